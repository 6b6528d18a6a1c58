"""Gmail via Google Takeout as a Source: one item per message of a Takeout .mbox file (or of a folder of them).

Reference: ../shared/reference/sources.md §6b. `path` is `All mail Including Spam and Trash.mbox`, another .mbox
(one per label when exported that way; any mbox: mutt, Thunderbird, a mailing list's archive), or a folder of them
(which files count: mbox_files). Files are never written. A file that is no mbox, or cannot be read, is one failed
item `file:<path>` and the others are indexed; the messages indexed from it before stay until it is readable again.

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
from pathlib import Path
from typing import Iterator, Literal, Mapping, NamedTuple, Sequence
from urllib.parse import quote

from pydantic import Field, field_validator

from rag_pipelines.parsers.limits import MB, Limits, human_size
from rag_pipelines.parsers.mail import mail_document
from rag_pipelines.parsers.rfc822 import mail_record
from rag_pipelines.sources.mbox import index as toc_
from rag_pipelines.sources.mbox.envelope import envelope_time
from rag_pipelines.sources.mbox.files import list_files, problem_key
from rag_pipelines.sources.base import BaseSource, Loaded, ScanResult, SourceUnavailable, Stamp
from rag_pipelines.sources.options import SourceOptions

VERSION = "gmail-mbox-1"  # part of every content hash: bump when the Document built from the same bytes changes
KEY_SAFE = re.compile(r"[\x21-\x24\x26-\x7e]{1,200}")  # printable ASCII without space or '%'
URI_SAFE = re.compile(r"[\w@!$&()*+,;=:~.-]+", re.ASCII)
READ_STATE = re.compile(r"(?i)^(?:opened|unread|imap_.*)$")
ESCAPED_FROM = re.compile(rb"^>(>*From )", re.MULTILINE)
_TOCS: dict[str, toc_.Toc] = {}  # path → its table of contents, shared by the sources of this process
_BROKEN: dict[str, tuple[tuple[int, int, int], str]] = {}  # path → (size, mtime, inode) when found no mbox, and why


class GmailOptions(SourceOptions):
    type: Literal["gmail"] = Field(description="gmail: a Google Takeout mail export (.mbox).")
    path: Path = Field(description="Takeout's `All mail Including Spam and Trash.mbox`, another .mbox file, or a "
                       "folder searched for *.mbox files (Takeout/Mail) and mailing list archives (*.txt).")
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
        self._problems: dict[str, tuple[str, str]] = {}  # `file:<rel>` keys → (kind, message): failed items
        self._broken: set[str] = set()  # files that could not be read as mbox in the last scan (their old records kept)
        self._seen: tuple | None = None  # identities of the files the items were built from
        self.updates: dict[str, toc_.Update] = {}  # file → how the last scan brought its table of contents up to date
        self.bytes_parsed = self.bytes_checked = self.bytes_loaded = 0  # read by scans and loads so far (tests, benches)

    # -- scan ------------------------------------------------------------------------------------------------

    def scan(self) -> ScanResult:
        listing = list_files(self.options.path)
        problems = {self.key(k): v for k, v in listing.problems.items()}
        self._broken = set()
        tocs = [self._toc(f, problems) for f in listing.files]
        seen = tuple((t.path, t.size, t.mtime_ns, t.inode) for t in tocs)
        if seen != self._seen or self._items is None:
            if not self._extend(tocs):
                self._group(tocs)
            self._files, self._tocs, self._seen = listing.files, tocs, seen
        self._problems = problems
        return ScanResult(dict(self._stamps), dict(problems))

    def _toc(self, path: Path, problems: dict[str, tuple[str, str]]) -> toc_.Toc:
        """The file's table of contents; one it cannot be read as is a problem, and its last known one is kept."""
        name, sidecar = str(path), toc_.Sidecar(sidecar_path())
        old = _TOCS.get(name) or sidecar.load(name)
        try:
            toc, upd = self._update(path, old)
        except (OSError, toc_.NotMbox) as exc:
            if isinstance(exc, OSError) and path == self.options.path:
                raise SourceUnavailable(f"{path} cannot be read ({exc.strerror or exc}); check it exists and is "
                                        "readable (macOS: Full Disk Access). Nothing indexed from it was "
                                        "removed.") from exc
            problems[self.key(problem_key(self.options.path, path))] = self._problem(path, exc)
            self._broken.add(name)
            return _TOCS.setdefault(name, old or toc_.Toc(name))  # the same object each scan: nothing changed
        if upd.mode != "unchanged":
            sidecar.save(toc, upd.parsed_from if upd.mode == "grown" else 0)
        _TOCS[name] = toc
        self.updates[name] = upd
        self.bytes_parsed += upd.bytes_parsed
        self.bytes_checked += upd.bytes_checked
        return toc

    @staticmethod
    def _update(path: Path, old: toc_.Toc | None) -> tuple[toc_.Toc, toc_.Update]:
        """toc_.update, except that a file found no mbox is not read again while its size and mtime stay."""
        st = os.stat(path)
        ident = (st.st_size, st.st_mtime_ns, st.st_ino)
        known = _BROKEN.get(str(path))
        if known and known[0] == ident:
            raise toc_.NotMbox(known[1])
        try:
            return toc_.update(path, old)
        except toc_.NotMbox as exc:
            _BROKEN[str(path)] = (ident, str(exc))
            raise

    def _problem(self, path: Path, exc: OSError | toc_.NotMbox) -> tuple[str, str]:
        """(kind, message) of the failed item of a file that cannot be read as an mbox."""
        kept = "What was indexed from it stays searchable"
        if isinstance(exc, OSError):
            return "unreadable", (f"cannot read {path} ({exc.strerror or exc}); check it is readable (macOS: Full "
                                  f"Disk Access). {kept}")
        if str(exc) == toc_.GZIP:
            return "unsupported", (f"{path} is gzip-compressed; unpack it (`gunzip -k '{path}'`): the unpacked file "
                                   "is indexed")
        instead = (f"move the file out of {self.options.path}; the other files are indexed" if path != self.options.path
                   else "point `path` at an mbox file")
        return "unsupported", (f"{path} is not an mbox file: {exc}. Export the mailbox as mbox (Gmail: Google Takeout, "
                               f"Mail; a mailing list: its archive's .txt download), or {instead}. {kept}")

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
            uri = f"{tocs[fi].path}#{rec.gmail_id.removesuffix('@xxx') if _takeout(rec) else rec.offset}"
        return _Item(tuple(copies), labels, stamp, uri)

    def watch_paths(self) -> list:
        path = self.options.path
        return [path if path.is_dir() else path.parent] if path.exists() else []

    # -- load ------------------------------------------------------------------------------------------------

    def load(self, keys: Sequence[str], known_uris: Mapping[str, str] | None = None) -> Iterator[Loaded]:
        keys = list(dict.fromkeys(keys))
        if self._items is None or any(k not in self._items and k not in self._problems for k in keys):
            try:
                self.scan()  # a fresh process, or keys new since the last scan
            except SourceUnavailable as exc:
                yield from (_unavailable(k, (known_uris or {}).get(k, k), str(exc)) for k in keys)
                return
        problems = [k for k in keys if k in self._problems]
        for key in problems:  # a file that is no mbox, or cannot be read: its failed item
            kind, message = self._problems[key]
            yield Loaded(key, (known_uris or {}).get(key, key), "email", stamp=f"problem:{kind}", error=(kind, message))
        yield from self._load([k for k in keys if k not in self._problems], retry=True)

    def _load(self, keys: list[str], retry: bool) -> Iterator[Loaded]:
        items, stale = self._items or {}, []
        by_file: dict[int, list[str]] = {}
        for key in keys:
            if key in items:
                by_file.setdefault(items[key].copies[0][0], []).append(key)
            else:
                yield Loaded(key, key, "email", gone=True)
        for fi, file_keys in sorted(by_file.items()):
            yield from self._load_file(file_keys, stale)
        if stale and retry:
            try:
                self.scan()  # the file changed since the scan (a new export): find the messages again
            except SourceUnavailable as exc:
                yield from (_unavailable(k, items[k].uri, str(exc)) for k in stale)
                return
            yield from self._load(stale, retry=False)
            return
        yield from (Loaded(k, items[k].uri, "email", gone=True) for k in stale)

    def _load_file(self, keys: list[str], stale: list[str]) -> Iterator[Loaded]:
        fds: dict[int, int] = {}  # file index → open descriptor, for the keys of one file (and their copies)
        try:
            for key in keys:
                loaded = self._load_one(key, fds)
                if loaded is None:
                    stale.append(key)
                else:
                    yield loaded
        finally:
            for fd in fds.values():
                os.close(fd)

    def _load_one(self, key: str, fds: dict[int, int]) -> Loaded | None:
        """One message read and made a mail record: a Loaded, an error Loaded, or None when its bytes moved."""
        item = (self._items or {})[key]
        copies = [(fi, rec) for fi, rec in item.copies if str(self._files[fi]) not in self._broken]
        if not copies:  # its file is no mbox (any more) or unreadable: a failed item of its own says so
            return _unavailable(key, item.uri, f"{self._files[item.copies[0][0]]} cannot be read as an mbox now (see "
                                "its failed item); it is tried again when it changes. Nothing indexed from it was "
                                "removed.")
        too_big = next((r for _, r in copies if r.length > self.limits.max_file_mb * MB), None)
        if too_big:
            return Loaded(key, item.uri, "email", stamp=item.stamp, error=("too_large", (
                f"the message is {human_size(too_big.length)}, over limits.max_file_mb "
                f"({self.limits.max_file_mb} MB); raise it in config.yaml to index it")))
        raws = []
        for fi, rec in copies:
            try:
                if fi not in fds:
                    fds[fi] = os.open(self._files[fi], os.O_RDONLY)
                raw = os.pread(fds[fi], rec.length, rec.offset)
            except OSError as exc:
                return _unavailable(key, item.uri, f"{self._files[fi]} cannot be read ({exc.strerror or exc}); it is "
                                    "tried again on the next run. Nothing indexed from it was removed.")
            self.bytes_loaded += len(raw)
            raws.append((fi, rec, raw))
        if not all(toc_.still(raw, rec) for _, rec, raw in raws):
            return None
        try:
            return self._loaded(key, item, raws)
        except Exception as exc:  # noqa: BLE001 - one message's bytes must never stop the others
            why = "its MIME parts are nested too deeply" if isinstance(exc, RecursionError) else \
                f"{type(exc).__name__}: {exc}"
            return Loaded(key, item.uri, "email", stamp=item.stamp, error=("corrupt", (
                f"the message cannot be read ({why}); the other messages are indexed. It is tried again when the "
                "mbox changes; open it in a mail client to see what is wrong with it")))

    def _loaded(self, key: str, item: _Item, raws: list[tuple[int, toc_.Rec, bytes]]) -> Loaded:
        cfi, rec, raw = raws[0]
        line, _, message = raw.partition(b"\n")
        mail = mail_record(
            ESCAPED_FROM.sub(rb"\1", message).replace(b"\r\n", b"\n"), max_text=int(self.limits.max_text_mb * MB),
            fallback_ts=envelope_time(line), thread=rec.thread,
            tags=tuple(lb for lb in item.labels if not READ_STATE.match(lb)),
            extra=(*self.options.metadata.items(), ("mbox", self._files[cfi].name),
                   ("gmail_id", rec.gmail_id.removesuffix("@xxx") if _takeout(rec) else "")))
        quotes, signature = self.options.strip_quotes, self.options.strip_signatures
        payload = json.dumps([VERSION, asdict(mail), quotes, signature], ensure_ascii=False, sort_keys=True, default=str)
        return Loaded(key, item.uri, "email", stamp=item.stamp,
                      content_hash=hashlib.sha256(payload.encode()).hexdigest(),
                      parse=lambda: mail_document(mail, quotes=quotes, signature=signature))


def sidecar_path() -> Path:
    from rag_search.config import Paths

    return Paths.from_env().home / "cache" / "mbox-toc.sqlite"


def _takeout(rec: toc_.Rec) -> bool:
    """Whether the message's envelope sender is a Gmail message id (`<digits>@xxx`, Takeout's From_ lines)."""
    return rec.gmail_id.endswith("@xxx") and rec.gmail_id[:-4].isdigit()


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
                     help="Takeout's `All mail Including Spam and Trash.mbox`, another mbox (a mailing list archive "
                          ".txt), or a folder of them (registers the collection); without it the configured gmail "
                          "sources are indexed."),
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
