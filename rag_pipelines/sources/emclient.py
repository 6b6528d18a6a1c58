"""eM Client mail as a Source: one item per message (by Message-ID), from every store of a data folder.

Keys: `<message-id>` (normalised, without folding; percent-encoded and hashed past 512 bytes like paths);
`nomid:<sha1 of subject + date>` for a message without a Message-ID; `row:<store>/<id>` when it has no
date either. The same Message-ID in several folders or stores (Gmail labels) is one item whose
metadata lists every folder. Stamps hash the item's rows (store, id, folder, dates, download state,
size, categories, folder names): a move, a new label, a downloaded body changes them; a read flag does not.

Any store that cannot be scanned (locked, damaged, unexpected schema) makes the whole source
unavailable for the run: keys are not scoped by store, so a partial scan would delete that store's
mail from the index. Bodies (FTI shadow table, then MIME parts, then a raw message, then the preview)
are read by emclient_db; cleaning and the Document are parsers.mail's.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from dataclasses import asdict
from pathlib import Path
from typing import Iterator, Literal, Mapping, NamedTuple, Sequence
from urllib.parse import quote

from pydantic import Field, field_validator

from rag_pipelines.parsers.limits import MB, Limits
from rag_pipelines.parsers.mail import (MailRecord, calendar_text, decode_part, format_address, looks_like_html,
                                        mail_document, message_bodies)
from rag_pipelines.sources import emclient_db as db
from rag_pipelines.sources.base import BaseSource, Loaded, ScanResult, SourceUnavailable, Stamp
from rag_search.keys import path_key
from rag_pipelines.sources.options import SourceOptions

DEFAULT_EXCLUDED = ("Junk*", "Spam", "Bulk Mail", "Trash", "Deleted Items", "Deleted Messages", "Papierkorb",
                    "Gelöschte Elemente", "Corbeille", "Éléments supprimés", "Papelera", "Cestino", "Prullenbak")
URI_CHARS = "@!$&()*+,;=:~-._"
URI_SAFE = re.compile(r"[\w@!$&()*+,;=:~.-]+", re.ASCII)
KEY_SAFE = re.compile(r"[\x21-\x24\x26-\x7e]{1,500}")  # printable ASCII without '%', short
VERSION = "emclient-1"  # part of every content hash: bump when the Document built from the same rows changes


class EmClientOptions(SourceOptions):
    type: Literal["email"] = Field(description="email: eM Client's mail stores.")
    path: Path = Field(description="eM Client's data folder (every store in it), one store folder "
                       "(<guid>/<guid>/), or a file in one (mail_index.dat, mail_data.dat).")
    exclude_folders: tuple[str, ...] = Field(
        DEFAULT_EXCLUDED, description="Folders whose mail is not indexed: patterns (* and ? wildcards, "
        "case-insensitive) matched against a folder's path ('[Gmail]/Spam') and its name ('Junk E-mail'). "
        "The default leaves out junk and trash folders; set [] to index everything.")
    strip_quotes: bool = Field(True, description="Drop quoted replies (On … wrote:, -----Original Message-----, "
                               "> lines) from bodies; forwards keep their content.")
    strip_signatures: bool = Field(True, description="Drop signatures (-- , Sent from my iPhone, sign-off blocks).")

    @field_validator("path")
    @classmethod
    def _expand(cls, v: Path) -> Path:
        return Path(v).expanduser().resolve()


class _Item(NamedTuple):  # a tuple: scans make one per message (150k+)
    rows: tuple[tuple[int, int], ...]  # (store index, MailItems id), the load's store first
    folders: tuple[str, ...]
    tags: tuple[str, ...]  # eM Client categories of any of its rows
    stamp: str
    uri: str
    message_id: str
    check: str  # what a row must show to still be this item (Message-ID, or the subject+date hash)


class EmClientSource(BaseSource):
    """The messages of eM Client's stores under one path."""

    type = "email"

    def __init__(self, options: EmClientOptions, label: str | None = None, limits: Limits | None = None):
        super().__init__(label)
        self.options, self.limits = options, limits or Limits()
        self._excluded = [re.compile(_glob(p), re.IGNORECASE) for p in options.exclude_folders]
        self._stores: list[db.Store] = []
        self._items: dict[str, _Item] | None = None

    # -- scan ----------------------------------------------------------------------------------------

    def scan(self) -> ScanResult:
        stores = db.find_stores(self.options.path)
        groups: dict[str, list[tuple[int, db.Row, str, tuple[str, ...]]]] = {}
        for si, store in enumerate(stores):
            scanned = db.scan_store(store)
            names: dict[int, str | None] = {}  # folder id → name, None when excluded
            for row in scanned.rows:
                if row.folder not in names:
                    name = scanned.folders.get(row.folder, f"folder {row.folder}")
                    names[row.folder] = None if self._skips(name) else name
                if (folder := names[row.folder]) is not None:
                    groups.setdefault(self.key(_local_key(row, store)), []).append(
                        (si, row, folder, scanned.categories.get(row.id, ())))
        items = {key: self._item(stores, rows) for key, rows in groups.items()}
        self._stores, self._items = stores, items
        return ScanResult({key: Stamp(item.stamp, item.uri) for key, item in items.items()})

    def _skips(self, folder: str) -> bool:
        name = folder.rsplit("/", 1)[-1]
        return any(p.fullmatch(folder) or p.fullmatch(name) for p in self._excluded)

    def _item(self, stores: list[db.Store], rows: list) -> _Item:
        if len(rows) > 1:
            rows.sort(key=lambda r: (r[0], r[1].id))
        si, first, folder, cats = rows[0]
        parts = [(stores[s].ident, r.id, r.stamp, f, c) for s, r, f, c in rows]
        digest = hashlib.sha1(repr(parts).encode()).hexdigest()[:20]  # ints, strs and tuples: a stable repr
        mid = first.message_id
        uri = (f"mid:{mid if URI_SAFE.fullmatch(mid) else quote(mid, safe=URI_CHARS)}" if mid else
               f"emclient://{stores[si].ident}/{first.id}")
        if len(rows) > 1:
            folders = tuple(sorted({f for _, _, f, _ in rows}))
            cats = tuple(sorted({c for _, _, _, cs in rows for c in cs}))
        return _Item(rows=tuple((s, r.id) for s, r, _, _ in rows), stamp=f"{len(rows)}:{digest}",
                     folders=folders if len(rows) > 1 else (folder,), tags=cats, uri=uri, message_id=mid,
                     check=mid or _nomid(first.subject, first.date))

    def watch_paths(self) -> list:
        try:
            return [s.path for s in (self._stores or db.find_stores(self.options.path))]
        except SourceUnavailable:
            return []

    # -- load ----------------------------------------------------------------------------------------

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
        items = self._items or {}
        by_store: dict[int, list[str]] = {}
        for key in keys:
            if key in items:
                by_store.setdefault(items[key].rows[0][0], []).append(key)
            else:
                yield Loaded(key, key, "email", gone=True)
        stale: list[str] = []
        for si, store_keys in by_store.items():
            yield from self._load_store(si, store_keys, stale)
        if stale and retry:
            try:
                self.scan()  # rows no longer hold the message they held (a rebuilt store): map keys again
            except SourceUnavailable as exc:
                yield from (_unavailable(k, items[k].uri, str(exc)) for k in stale)
                return
            yield from self._load(stale, retry=False)
            return
        yield from (Loaded(k, items[k].uri, "email", gone=True) for k in stale)

    def _load_store(self, si: int, keys: list[str], stale: list[str]) -> Iterator[Loaded]:
        items, store, done = self._items or {}, self._stores[si], set()
        try:
            with db.StoreReader(store, int(self.limits.max_text_mb * MB)) as reader:
                if reader.problem:
                    raise SourceUnavailable(reader.problem)
                reader.prepare([i for k in keys for s, i in items[k].rows if s == si])
                for start in range(0, len(keys), db.BATCH):
                    batch = keys[start : start + db.BATCH]
                    data = reader.read([i for k in batch for s, i in items[k].rows if s == si])
                    for key in batch:
                        item = items[key]
                        rows = [data[i] for s, i in item.rows if s == si and i in data and _still(item, data[i])]
                        done.add(key)
                        if rows:
                            yield self._loaded(key, item, rows)
                        else:
                            stale.append(key)
        except (SourceUnavailable, sqlite3.DatabaseError) as exc:
            why = str(exc) if isinstance(exc, SourceUnavailable) else \
                f"{store.path} could not be read ({exc}); it is tried again on the next run"
            yield from (_unavailable(k, items[k].uri, why) for k in keys if k not in done)

    def _loaded(self, key: str, item: _Item, rows: list[db.MessageData]) -> Loaded:
        mail = self._record(item, rows)
        payload = json.dumps([VERSION, asdict(mail), self.options.strip_quotes, self.options.strip_signatures],
                             ensure_ascii=False, sort_keys=True, default=str)
        quotes, signature = self.options.strip_quotes, self.options.strip_signatures
        return Loaded(key, item.uri, "email", stamp=item.stamp,
                      content_hash=hashlib.sha256(payload.encode()).hexdigest(),
                      parse=lambda: mail_document(mail, quotes=quotes, signature=signature))

    def _record(self, item: _Item, rows: list[db.MessageData]) -> MailRecord:
        first = rows[0]
        f = first.fields
        people: dict[str, list[str]] = {}
        for kind, _, name, address in sorted(first.addresses, key=lambda a: (a[0], a[1])):
            people.setdefault(db.ADDRESS_TYPES.get(kind, "other"), []).append(format_address(name, address))
        body, source, html = choose_body(rows)
        limit = int(self.limits.max_text_mb * MB)
        extra = {**self.options.metadata, "body_source": source,
                 "accounts": sorted({a for s, _ in item.rows if (a := self._stores[s].account)})}
        if len(body) > limit:
            body = body[:limit]
            extra["parse_warning"] = f"body cut to limits.max_text_mb ({self.limits.max_text_mb} MB)"
        sender = (people.get("from") or people.get("sender") or [""])[0]
        return MailRecord(
            subject=str(f.get("subject") or ""), body=body, html=html, sender=sender,
            ts=db.ticks_to_unix(f.get("date")) or db.ticks_to_unix(f.get("receivedDate")),
            to=tuple(people.get("to", ())), cc=tuple(people.get("cc", ())), bcc=tuple(people.get("bcc", ())),
            message_id=item.message_id, thread=str(f.get("conversationId") or ""),
            in_reply_to=db.normalise_message_id(f.get("inReplyTo")), folders=item.folders, tags=item.tags,
            attachments=tuple(dict.fromkeys(n for r in rows for p in r.parts if (n := p.filename))),
            extra=tuple((k, v) for k, v in extra.items() if v not in ("", [], None)))


def choose_body(rows: list[db.MessageData]) -> tuple[str, str, bool]:
    """(text, where it came from, is HTML): FTI, else a MIME text part, else a raw message, else the preview."""
    for m in rows:
        text = db.best_fti(m.fti)
        if text:
            return text, "fti", looks_like_html(text)
    for kind in ("text/plain", "text/html", "text/calendar"):
        for m in rows:
            for p in m.parts:
                if p.body and p.is_text and p.content_type.lower().startswith(kind):
                    text = decode_part(p.body, p.content_type, p.encoding)
                    if kind == "text/calendar":
                        return calendar_text(text), "calendar", False
                    if text.strip():
                        return text, "mime", kind == "text/html"
    for m in rows:
        for p in m.parts:
            if p.header and b"\n\n" in p.header.replace(b"\r\n", b"\n").strip():
                plain, html = message_bodies(p.header)
                if plain.strip() or html.strip():
                    return (plain, "raw", False) if plain.strip() else (html, "raw", True)
    fragments = sorted((t for m in rows for _, t in m.fti if t and t.strip()), key=len, reverse=True)
    if fragments:
        return fragments[0], "fti", False
    preview = next((str(m.fields.get("preview")) for m in rows if m.fields.get("preview")), "")
    return preview, "preview" if preview else "none", False


def _local_key(row: db.Row, store: db.Store) -> str:
    if row.message_id:
        key = f"<{row.message_id}>"  # path_key's encoding only when it would change something (it is slow)
        return key if KEY_SAFE.fullmatch(key) and "..." not in key else path_key(key)
    if row.date:
        return f"nomid:{_nomid(row.subject, row.date)}"
    return f"row:{store.ident}/{row.id}"


def _nomid(subject: str | None, date: int) -> str:
    return hashlib.sha1(f"{subject or ''}\x00{date}".encode()).hexdigest()[:20]


def _still(item: _Item, data: db.MessageData) -> bool:
    """Whether a row read now still holds the message the scan mapped to this item."""
    mid = db.normalise_message_id(data.fields.get("messageId"))
    if item.message_id or mid:
        return mid == item.message_id
    date = data.fields.get("date") if isinstance(data.fields.get("date"), int) else 0
    return not date or _nomid(data.fields.get("subject"), date) == item.check


def _unavailable(key: str, uri: str, why: str) -> Loaded:
    # a stamp no scan gives: the next sync sees a change and retries; the previous chunks stay searchable
    return Loaded(key, uri, "email", stamp="unavailable", error=("unavailable", why))


def _glob(pattern: str) -> str:
    return "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern.strip().strip("/"))


def _build(options: EmClientOptions, label: str | None, limits: Limits | None = None) -> EmClientSource:
    return EmClientSource(options, label, limits)


def _cli_params() -> tuple:
    import click

    return (
        click.Option(["--path"], type=click.Path(exists=True, path_type=Path),
                     help="eM Client's data folder, one store folder or a mail_data.dat (registers the collection); "
                          "without it the configured email sources are indexed."),
        click.Option(["--exclude-folder", "exclude_folder"], multiple=True,
                     help="A folder to leave out (path or name, * wildcards; repeatable), besides junk and trash."),
    )


def _cli_source(path: Path | None = None, exclude_folder: tuple[str, ...] = (), **_) -> dict | None:
    if path is None:
        return None
    body: dict = {"path": str(path)}
    if exclude_folder:
        body["exclude_folders"] = list(DEFAULT_EXCLUDED + tuple(exclude_folder))
    return body


def _source_type():
    from rag_pipelines.sources.registry import SourceType

    return SourceType(type="email", options=EmClientOptions, build=_build, collection="email", kind="system",
                      summary="eM Client mail: every message of its stores (sender, recipients, folders, thread).",
                      cli_params=_cli_params(), cli_source=_cli_source, seed_keys={"emclient_db_path": "path"})


SOURCE = _source_type()
