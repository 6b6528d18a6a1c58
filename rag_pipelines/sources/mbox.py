"""Gmail via Google Takeout as a Source: one item per message of a Takeout .mbox file (or of a folder of them).

Reference: ../shared/reference/sources.md §6b. `path` is `All mail Including Spam and Trash.mbox`, another .mbox
(one per label when exported that way), or a folder searched for *.mbox. Files are never written.

Scan: each file's table of contents (mbox_index: offsets, Message-ID, X-GM-THRID, X-Gmail-Labels, a header stamp)
is kept in memory and in a sidecar under the local-rag home, so a file that only grew is parsed from where it
ended, and an unchanged one is not read at all. A new export (a rewritten file) is parsed again in full; keys are
Message-IDs and stamps hash each message's header block, so unchanged messages keep their stamps (nothing is
loaded or embedded again), changed labels re-index one message, and messages gone from the export leave.

Keys: `<message-id>` (as is when printable ASCII of at most 200 characters without '%', else `~sha1`); without a
Message-ID, `nomid:<hash of Date, From, Subject, thread>`. The same Message-ID in several files (a per-label
export) is one item with the union of their labels; the same Message-ID in another Gmail thread is a different
message (`<id>#<thread>`). Messages with an excluded label (Spam, Trash by default) are left out. Labels are tags,
except the read-state ones (Opened, Unread, IMAP_*), which would re-index a message whenever it is read.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator, Literal, Mapping, NamedTuple, Sequence
from urllib.parse import quote

from pydantic import Field, field_validator

from rag_pipelines.parsers.limits import MB, Limits, human_size
from rag_pipelines.parsers.mail import mail_document
from rag_pipelines.parsers.rfc822 import mail_record
from rag_pipelines.sources import mbox_index as toc_
from rag_pipelines.sources.base import BaseSource, Loaded, ScanResult, SourceUnavailable, Stamp
from rag_pipelines.sources.options import SourceOptions

VERSION = "gmail-mbox-1"  # part of every content hash: bump when the Document built from the same bytes changes
KEY_SAFE = re.compile(r"[\x21-\x24\x26-\x7e]{1,200}")  # printable ASCII without space or '%'
URI_SAFE = re.compile(r"[\w@!$&()*+,;=:~.-]+", re.ASCII)
READ_STATE = re.compile(r"(?i)^(?:opened|unread|imap_.*)$")
ESCAPED_FROM = re.compile(rb"^>(>*From )", re.MULTILINE)
ENVELOPE_DATE = re.compile(rb"\S+ +\w{3} +(\w{3}) +(\d{1,2}) +(\d{1,2}):(\d\d)(?::(\d\d))?(?: +([+-]\d{4}|[A-Z]{1,5}))? +"
                           rb"(\d{4})")
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_TOCS: dict[str, toc_.Toc] = {}  # path → its table of contents, shared by the sources of this process


class GmailOptions(SourceOptions):
    type: Literal["gmail"] = Field(description="gmail: a Google Takeout mail export (.mbox).")
    path: Path = Field(description="Takeout's `All mail Including Spam and Trash.mbox`, another .mbox file, or a "
                       "folder searched for *.mbox files (Takeout/Mail).")
    exclude_labels: tuple[str, ...] = Field(
        ("Spam", "Trash"), description="Messages with any of these Gmail labels are not indexed (case-insensitive); "
        "set [] to index everything.")
    strip_quotes: bool = Field(True, description="Drop quoted replies (On … wrote:, > lines) from bodies; forwards "
                               "keep their content.")
    strip_signatures: bool = Field(True, description="Drop signatures (-- , Sent from my iPhone, sign-off blocks).")

    @field_validator("path")
    @classmethod
    def _expand(cls, v: Path) -> Path:
        return Path(v).expanduser().resolve()


class _Item(NamedTuple):
    copies: tuple[tuple[int, toc_.Rec], ...]  # (file index, record), the first one loaded
    labels: tuple[str, ...]
    stamp: str
    uri: str


class GmailSource(BaseSource):
    """The messages of the Takeout mbox files under one path."""

    type = "gmail"

    def __init__(self, options: GmailOptions, label: str | None = None, limits: Limits | None = None):
        super().__init__(label)
        self.options, self.limits = options, limits or Limits()
        self._excluded = {x.strip().lower() for x in options.exclude_labels}
        self._files: list[Path] = []
        self._items: dict[str, _Item] | None = None
        self._stamps: dict[str, Stamp] = {}
        self._groups: dict[str, list[tuple[int, toc_.Rec]]] = {}  # key → its copies (file index, record)
        self._threads: dict[str, str] = {}
        self._tocs: list[toc_.Toc] = []
        self._seen: tuple | None = None  # identities of the files the items were built from
        self.updates: dict[str, toc_.Update] = {}  # file → how the last scan brought its table of contents up to date
        self.bytes_parsed = self.bytes_checked = self.bytes_loaded = 0  # read by scans and loads so far (tests, benches)

    # -- scan ------------------------------------------------------------------------------------------------

    def scan(self) -> ScanResult:
        files = find_files(self.options.path)
        tocs = [self._toc(f) for f in files]
        seen = tuple((t.path, t.size, t.mtime_ns, t.inode) for t in tocs)
        if seen != self._seen or self._items is None:
            if not self._extend(tocs):
                self._group(tocs)
            self._files, self._tocs, self._seen = files, tocs, seen
        return ScanResult(dict(self._stamps))

    def _toc(self, path: Path) -> toc_.Toc:
        name, sidecar = str(path), toc_.Sidecar(sidecar_path())
        old = _TOCS.get(name) or sidecar.load(name)
        try:
            toc, upd = toc_.update(path, old)
        except toc_.NotMbox as exc:
            raise SourceUnavailable(f"{path} is not an mbox file ({exc}); point `path` at Takeout's .mbox file or its "
                                    "Mail folder. Nothing indexed from it was removed.") from exc
        except OSError as exc:
            raise SourceUnavailable(f"{path} cannot be read ({exc.strerror or exc}); check it exists and is readable "
                                    "(macOS: Full Disk Access). Nothing indexed from it was removed.") from exc
        if upd.mode != "unchanged":
            sidecar.save(toc, upd.parsed_from if upd.mode == "grown" else 0)
        _TOCS[name] = toc
        self.updates[name] = upd
        self.bytes_parsed += upd.bytes_parsed
        self.bytes_checked += upd.bytes_checked
        return toc

    def _group(self, tocs: list[toc_.Toc]) -> None:
        """Items from every record: copies of one message joined, the same Message-ID in other threads apart."""
        kept = [(fi, rec) for fi, toc in enumerate(tocs) for rec in toc.records if not self._skips(rec)]
        self._threads = {}  # Message-ID → its oldest thread (the one keyed by the Message-ID alone)
        for _, rec in kept:
            if rec.mid and (rec.mid not in self._threads or
                            _thread_order(rec.thread) < _thread_order(self._threads[rec.mid])):
                self._threads[rec.mid] = rec.thread
        self._groups = {}
        for fi, rec in kept:
            self._groups.setdefault(self._key(rec), []).append((fi, rec))
        self._items = {key: self._item(tocs, copies) for key, copies in self._groups.items()}
        self._stamps = {key: Stamp(item.stamp, item.uri) for key, item in self._items.items()}

    def _extend(self, tocs: list[toc_.Toc]) -> bool:
        """Add the records files gained at their end (a grown mbox) to the items; False when a full _group is due."""
        old = self._tocs
        if self._items is None or [t.path for t in old] != [t.path for t in tocs]:
            return False
        dirty: set[str] = set()
        for fi, (before, now) in enumerate(zip(old, tocs)):
            if now is before:
                continue
            upd = self.updates.get(now.path)
            if not upd or upd.mode != "grown" or upd.parsed_from != before.size:
                return False  # rewritten, or its last message was parsed again
            for rec in now.records[len(before.records):]:
                if self._skips(rec):
                    continue
                if rec.mid:
                    first = self._threads.setdefault(rec.mid, rec.thread)
                    if _thread_order(rec.thread) < _thread_order(first):
                        return False  # an older thread with this Message-ID: keys move
                key = self._key(rec)
                self._groups.setdefault(key, []).append((fi, rec))
                dirty.add(key)
        for key in dirty:
            self._groups[key].sort(key=lambda copy: (copy[0], copy[1].offset))  # as _group orders them
            self._items[key] = item = self._item(tocs, self._groups[key])
            self._stamps[key] = Stamp(item.stamp, item.uri)
        return True

    def _skips(self, rec: toc_.Rec) -> bool:
        return bool(self._excluded) and any(lb.lower() in self._excluded for lb in rec.labels)

    def _key(self, rec: toc_.Rec) -> str:
        if rec.mid and rec.thread and self._threads[rec.mid] and rec.thread != self._threads[rec.mid]:
            return self.key(_safe(f"<{rec.mid}>#{rec.thread}"))  # another message with the same Message-ID
        return self.key(_local_key(rec))

    def _item(self, tocs: list[toc_.Toc], copies: list[tuple[int, toc_.Rec]]) -> _Item:
        fi, rec = copies[0]
        if len(copies) == 1:
            labels, stamp = rec.labels, rec.stamp
        else:
            labels = tuple(dict.fromkeys(lb for _, r in copies for lb in r.labels))
            stamp = f"{len(copies)}:" + hashlib.sha1("".join(r.stamp for _, r in copies).encode()).hexdigest()[:20]
        if rec.mid:
            uri = f"mid:{rec.mid if URI_SAFE.fullmatch(rec.mid) else quote(rec.mid, safe='@!$&()*+,;=:~-._')}"
        else:
            uri = f"{tocs[fi].path}#{rec.gmail_id.removesuffix('@xxx') or rec.offset}"
        return _Item(tuple(copies), labels, stamp, uri)

    def watch_paths(self) -> list:
        path = self.options.path
        return [path if path.is_dir() else path.parent] if path.exists() else []

    # -- load ------------------------------------------------------------------------------------------------

    def load(self, keys: Sequence[str], known_uris: Mapping[str, str] | None = None) -> Iterator[Loaded]:
        keys = list(dict.fromkeys(keys))
        if self._items is None or any(k not in self._items for k in keys):
            try:
                self.scan()  # a fresh process, or keys new since the last scan
            except SourceUnavailable as exc:
                yield from (_unavailable(k, (known_uris or {}).get(k, k), str(exc)) for k in keys)
                return
        yield from self._load(keys, retry=True)

    def _load(self, keys: list[str], retry: bool) -> Iterator[Loaded]:
        items, stale = self._items or {}, []
        by_file: dict[int, list[str]] = {}
        for key in keys:
            if key in items:
                by_file.setdefault(items[key].copies[0][0], []).append(key)
            else:
                yield Loaded(key, key, "email", gone=True)
        for fi, file_keys in sorted(by_file.items()):
            yield from self._load_file(fi, file_keys, stale)
        if stale and retry:
            try:
                self.scan()  # the file changed since the scan (a new export): find the messages again
            except SourceUnavailable as exc:
                yield from (_unavailable(k, items[k].uri, str(exc)) for k in stale)
                return
            yield from self._load(stale, retry=False)
            return
        yield from (Loaded(k, items[k].uri, "email", gone=True) for k in stale)

    def _load_file(self, fi: int, keys: list[str], stale: list[str]) -> Iterator[Loaded]:
        items, fds, done = self._items or {}, {}, set()
        try:
            for key in keys:
                item, raws = items[key], []
                too_big = next((r for _, r in item.copies if r.length > self.limits.max_file_mb * MB), None)
                if too_big:
                    done.add(key)
                    yield Loaded(key, item.uri, "email", stamp=item.stamp, error=("too_large", (
                        f"the message is {human_size(too_big.length)}, over limits.max_file_mb "
                        f"({self.limits.max_file_mb} MB); raise it in config.yaml to index it")))
                    continue
                for cfi, rec in item.copies:
                    if cfi not in fds:
                        fds[cfi] = os.open(self._files[cfi], os.O_RDONLY)
                    raw = os.pread(fds[cfi], rec.length, rec.offset)
                    self.bytes_loaded += len(raw)
                    raws.append((cfi, rec, raw))
                done.add(key)
                if all(toc_.still(raw, rec) for _, rec, raw in raws):
                    yield self._loaded(key, item, raws)
                else:
                    stale.append(key)
        except OSError as exc:
            why = (f"{self._files[fi]} cannot be read ({exc.strerror or exc}); it is tried again on the next run. "
                   "Nothing indexed from it was removed.")
            yield from (_unavailable(k, items[k].uri, why) for k in keys if k not in done)
        finally:
            for fd in fds.values():
                os.close(fd)

    def _loaded(self, key: str, item: _Item, raws: list[tuple[int, toc_.Rec, bytes]]) -> Loaded:
        cfi, rec, raw = raws[0]
        line, _, message = raw.partition(b"\n")
        mail = mail_record(
            ESCAPED_FROM.sub(rb"\1", message).replace(b"\r\n", b"\n"), max_text=int(self.limits.max_text_mb * MB),
            fallback_ts=envelope_time(line), thread=rec.thread,
            tags=tuple(lb for lb in item.labels if not READ_STATE.match(lb)),
            extra=(*self.options.metadata.items(), ("mbox", self._files[cfi].name),
                   ("gmail_id", rec.gmail_id.removesuffix("@xxx") if rec.gmail_id.endswith("@xxx") else "")))
        quotes, signature = self.options.strip_quotes, self.options.strip_signatures
        payload = json.dumps([VERSION, asdict(mail), quotes, signature], ensure_ascii=False, sort_keys=True, default=str)
        return Loaded(key, item.uri, "email", stamp=item.stamp,
                      content_hash=hashlib.sha256(payload.encode()).hexdigest(),
                      parse=lambda: mail_document(mail, quotes=quotes, signature=signature))


def find_files(path: Path) -> list[Path]:
    """The mbox files of `path`: itself, or the *.mbox files under it (sorted); SourceUnavailable when none."""
    try:
        if path.is_file():
            return [path]
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.suffix.lower() == ".mbox" and p.is_file()
                           and not any(part.startswith(".") for part in p.relative_to(path).parts))
            if found:
                return found
            raise SourceUnavailable(f"{path} holds no .mbox file; point `path` at Takeout's Mail folder or its "
                                    "`All mail Including Spam and Trash.mbox`. Nothing indexed from it was removed.")
    except OSError as exc:
        raise SourceUnavailable(f"{path} cannot be read ({exc.strerror or exc}); check its permissions. Nothing "
                                "indexed from it was removed.") from exc
    raise SourceUnavailable(f"{path} does not exist; check the path in the config (unpacked the Takeout archive?). "
                            "Nothing indexed from it was removed.")


def sidecar_path() -> Path:
    from rag_search.config import Paths

    return Paths.from_env().home / "cache" / "mbox-toc.sqlite"


def envelope_time(line: bytes) -> int | None:
    """The date of a From_ line (`From 1234@xxx Thu Jan 01 00:00:00 +0000 2026`) → unix seconds."""
    m = ENVELOPE_DATE.search(line)
    if not m or m.group(1).decode() not in MONTHS:
        return None
    month, day, hour, minute, second, zone, year = m.groups()
    try:
        when = datetime(int(year), MONTHS.index(month.decode()) + 1, int(day), int(hour), int(minute),
                        int(second or 0), tzinfo=timezone.utc)
    except ValueError:
        return None
    offset = 0
    if zone and zone[:1] in b"+-":
        offset = (1 if zone[:1] == b"+" else -1) * (int(zone[1:3]) * 3600 + int(zone[3:5]) * 60)
    return int(when.timestamp()) - offset


def _thread_order(thread: str) -> tuple[int, int, str]:
    """Gmail thread ids grow over time: the oldest thread of a Message-ID keeps the plain key, whatever the file order."""
    return (0 if thread else 1, len(thread), thread)


def _local_key(rec: toc_.Rec) -> str:
    return _safe(f"<{rec.mid}>") if rec.mid else f"nomid:{rec.nomid}"


def _safe(key: str) -> str:
    return key if KEY_SAFE.fullmatch(key) and "..." not in key else "~" + hashlib.sha1(key.encode()).hexdigest()


def _unavailable(key: str, uri: str, why: str) -> Loaded:
    # a stamp no scan gives: the next sync sees a change and retries; the previous chunks stay searchable
    return Loaded(key, uri, "email", stamp="unavailable", error=("unavailable", why))


def _cli_params() -> tuple:
    import click

    return (
        click.Option(["--path"], type=click.Path(exists=True, path_type=Path),
                     help="Takeout's `All mail Including Spam and Trash.mbox`, another .mbox, or a folder of them "
                          "(registers the collection); without it the configured gmail sources are indexed."),
        click.Option(["--include-spam-trash", "include_all"], is_flag=True,
                     help="Index messages labelled Spam or Trash too."),
    )


def _cli_source(path: Path | None = None, include_all: bool = False, **_) -> dict | None:
    if path is None:
        return None
    return {"path": str(path), **({"exclude_labels": []} if include_all else {})}


def _source_type():
    from rag_pipelines.sources.registry import SourceType

    return SourceType(type="gmail", options=GmailOptions, build=GmailSource, collection="gmail", kind="system",
                      summary="Gmail via Google Takeout (.mbox): every message (labels as tags, thread, people, date).",
                      cli_params=_cli_params(), cli_source=_cli_source)


SOURCE = _source_type()
