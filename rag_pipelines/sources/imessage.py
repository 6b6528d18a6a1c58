"""iMessage as a Source: Messages' chat.db, one item per conversation window (../shared/reference/sources.md §4).

Conversations: a group chat is one conversation (its chat rows merged by chat_identifier); the 1:1 chats with one
person are one conversation across iMessage, SMS and RCS and across that person's handles: handles are the same
when their identifiers normalise alike (E.164 phone numbers, lower-cased e-mail addresses) or when Messages gives
them the same person_centric_id. Each conversation is cut into windows (parsers/conversation.py: a 4 h silence or
a size bound starts a new one); a window is one item and one Dagster partition.

Keys: `with/<identifier>/<UTC start>~<first GUID>` (1:1; the person's first identifier in sort order) and
`group/<chat_identifier>/<UTC start>~<first GUID>`. New messages change only the conversation's last window.
Stamps hash each window's message rows (GUID, date, sender, size, date_edited, attachment count), so an edit or
a new message changes them; reading a message does not. A message whose attributedBody cannot be decoded is
recorded as a failed item `<conversation>/undecodable~<GUID>` (counted by `local-rag status`) and left out of
its window. A window's participants are its conversation's handles; its `authors` (metadata) are the handles that
wrote in it and `me` when you did, what `--from` matches. URIs: `sms:<identifier>` (opens the conversation in Messages), `sms:/open?addresses=a,b` for groups.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Iterator, Literal, Mapping, NamedTuple, Sequence

from pydantic import Field, field_validator

from rag_pipelines.parsers.conversation import Line, Stub, key_part, split, window_document, window_key
from rag_pipelines.parsers.limits import MB, Limits
from rag_pipelines.sources import imessage_db as db
from rag_pipelines.sources.base import BaseSource, Loaded, ScanResult, SourceUnavailable, Stamp
from rag_pipelines.sources.chat import ChatOptions
from rag_search.people import normalise_identifier

VERSION = "imessage-2"  # part of every stamp and content hash: bump when the Document of the same rows changes
DEFAULT_DB = Path("~/Library/Messages/chat.db")
LOAD_BATCH = 200  # windows per read of chat.db
MAX_ATTACHMENT_NAMES = 20  # per window, in metadata (all of them stay in the lines)


class IMessageOptions(ChatOptions):
    type: Literal["imessage"] = Field(description="imessage: Messages' chat.db (iMessage, SMS, RCS).")
    path: Path = Field(DEFAULT_DB, description="Messages' chat.db (default ~/Library/Messages/chat.db; the "
                       "process needs Full Disk Access on macOS), or a copy of it with its -wal and -shm.")
    me: str = Field("Me", description="How your own messages are labelled in the indexed text.")
    phone_region: str | None = Field(None, description="Country of phone numbers stored without a country code "
                                     "(ISO code such as US or DE), for E.164.")

    @field_validator("path")
    @classmethod
    def _expand(cls, v: Path) -> Path:
        return Path(v).expanduser().resolve()


class Conversation(NamedTuple):
    key: str  # key-safe: with/<id> or group/<chat_identifier>
    name: str
    group: bool
    identifiers: tuple[str, ...]  # normalised: the other person's handles, or the group's members
    uri: str


class _Window(NamedTuple):
    conversation: Conversation
    rows: tuple[db.Row, ...]
    stamp: str


class IMessageSource(BaseSource):
    """The conversations of one chat.db, as windows."""

    type = "imessage"

    def __init__(self, options: IMessageOptions, label: str | None = None, limits: Limits | None = None):
        super().__init__(label)
        self.options, self.limits = options, limits or Limits()
        self._windows: dict[str, _Window] | None = None
        self._problems: dict[str, tuple[str, str]] = {}
        self._handle_ids: dict[int, str] = {}  # handle ROWID → normalised identifier
        self._signature: tuple | None = None

    def scan(self) -> ScanResult:
        signature = file_signature(self.options.path)
        if self._windows is not None and signature is not None and signature == self._signature:
            return self._result()  # no byte of chat.db or its -wal changed since the last scan
        snap = db.read_scan(self.options.path)
        convs = conversations(snap.chats, snap.handles, self.options.phone_region)
        rows_of: dict[str, list[db.Row]] = {}
        by_key = {c.key: c for c in convs.values()}
        seen: set[tuple[str, int]] = set()
        problems: dict[str, tuple[str, str]] = {}
        for row in snap.rows:
            conv = convs.get(row.chat)
            if conv is None or (conv.key, row.rowid) in seen:
                continue
            seen.add((conv.key, row.rowid))
            if row.problem:
                problems[self.key(f"{conv.key}/undecodable~{key_part(row.guid, 80)}")] = (
                    "undecodable", f"message {row.guid} of {db_day(row.ts)}: its attributedBody could not be "
                    f"decoded ({row.problem}); the rest of the conversation is indexed")
                if not row.attachments:
                    continue
            rows_of.setdefault(conv.key, []).append(row)
        windows: dict[str, _Window] = {}
        for ckey, rows in rows_of.items():
            conv, by_guid = by_key[ckey], {r.guid: r for r in rows}
            for part in split([Stub(r.guid, r.ts, r.size) for r in rows], self.options.window_spec()):
                members = tuple(by_guid[s.id] for s in part)
                windows[self.key(window_key(ckey, part[0]))] = _Window(conv, members, _stamp(conv, members))
        self._windows, self._problems, self._signature = windows, problems, signature
        self._handle_ids = {h.rowid: normalise_identifier(h.id, self.options.phone_region) or h.id
                            for h in snap.handles.values()}
        return self._result()

    def _result(self) -> ScanResult:
        windows = self._windows or {}
        return ScanResult({k: Stamp(w.stamp, w.conversation.uri) for k, w in windows.items()}, dict(self._problems))

    def watch_paths(self) -> list:
        return [self.options.path.parent] if self.options.path.parent.is_dir() else []

    def load(self, keys: Sequence[str], known_uris: Mapping[str, str] | None = None) -> Iterator[Loaded]:
        keys, known = list(dict.fromkeys(keys)), known_uris or {}
        if self._windows is None or any(k not in self._windows and k not in self._problems for k in keys):
            try:
                self.scan()  # a fresh process, or keys new since the last scan
            except SourceUnavailable as exc:
                yield from (_unavailable(k, known.get(k, k), str(exc)) for k in keys)
                return
        windows, wanted = self._windows or {}, []
        for key in keys:
            if key in windows:
                wanted.append(key)
            elif key in self._problems:
                yield Loaded(key, known.get(key, key), "chat", stamp=f"problem:{self._problems[key][0]}",
                             error=self._problems[key])
            else:
                yield Loaded(key, known.get(key, key), "chat", gone=True)
        for start in range(0, len(wanted), LOAD_BATCH):
            yield from self._load_batch(wanted[start : start + LOAD_BATCH])

    def _load_batch(self, keys: list[str]) -> Iterator[Loaded]:
        windows = self._windows or {}
        rowids = [r.rowid for k in keys for r in windows[k].rows]
        try:
            messages = db.read_messages(self.options.path, rowids)
        except SourceUnavailable as exc:
            yield from (_unavailable(k, windows[k].conversation.uri, str(exc)) for k in keys)
            return
        for key in keys:
            window = windows[key]
            found = [messages[r.rowid] for r in window.rows if r.rowid in messages]
            if not found:
                yield Loaded(key, window.conversation.uri, "chat", gone=True)
                continue
            yield self._loaded(key, window, found)

    def _loaded(self, key: str, window: _Window, messages: list[db.Message]) -> Loaded:
        conv, opts = window.conversation, self.options
        lines, senders, wrote, attachments, budget = [], set(), set(), [], int(self.limits.max_text_mb * MB)
        for m in messages:
            sender = opts.me if m.from_me else _sender(m, conv, self._handle_ids)
            wrote.add(sender)
            if not m.from_me and sender:
                senders.add(sender)
            text = m.text.replace(db.PLACEHOLDER, "").strip()[:budget]
            budget = max(0, budget - len(text))
            notes = (("edited",) if m.edited else ()) + tuple(f"attachment: {a}" for a in m.attachments)
            attachments += m.attachments
            lines.append(Line(m.ts, sender, text, notes))
        services = sorted({m.service for m in messages if m.service})
        participants = tuple(sorted(set(conv.identifiers) | senders))
        meta = {"conversation": conv.name, "group": conv.group, "service": services,
                "attachments": attachments[:MAX_ATTACHMENT_NAMES], **dict(opts.metadata)}
        zone = opts.zone()
        authors = tuple(sorted(wrote))
        payload = json.dumps([VERSION, str(zone), conv.name, participants, authors, meta, lines], ensure_ascii=False)
        return Loaded(key, conv.uri, "chat", stamp=window.stamp, content_hash=hashlib.sha256(payload.encode()).hexdigest(),
                      parse=lambda: window_document(conv.name, lines, zone, participants, meta, authors=authors))


def conversations(chats: Mapping[int, db.Chat], handles: Mapping[int, db.Handle],
                  region: str | None = None) -> dict[int, Conversation]:
    """chat ROWID → its conversation: group chats by chat_identifier, 1:1 chats by person (see the module doc)."""
    norm = {h.rowid: normalise_identifier(h.id, region) for h in handles.values()}
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def ids_of(chat: db.Chat) -> list[str]:
        found = [norm[h] for h in chat.handles if norm.get(h)]
        return found or [normalise_identifier(chat.identifier, region) or chat.identifier]

    singles = [c for c in chats.values() if not c.group]
    for chat in singles:  # one person: shared identifiers, or Messages' person_centric_id
        labels = ids_of(chat) + [f"person:{handles[h].person}" for h in chat.handles if h in handles
                                 and handles[h].person]
        for label in labels[1:]:
            parent[find(label)] = find(labels[0])
    people: dict[str, set[str]] = {}
    for chat in singles:
        people.setdefault(find(ids_of(chat)[0]), set()).update(ids_of(chat))
    out: dict[int, Conversation] = {}
    for chat in singles:
        ids = tuple(sorted(people[find(ids_of(chat)[0])]))
        out[chat.rowid] = Conversation(f"with/{key_part(ids[0])}", ", ".join(ids), False, ids, f"sms:{ids[0]}")
    groups: dict[str, list[db.Chat]] = {}
    for chat in chats.values():
        if chat.group:
            groups.setdefault(chat.identifier, []).append(chat)
    for ident, rows in groups.items():
        ids = tuple(sorted({norm[h] for c in rows for h in c.handles if norm.get(h)}))
        name = next((c.name for c in rows if c.name), "") or ("Group with " + ", ".join(ids) if ids else ident)
        conv = Conversation(f"group/{key_part(ident)}", name, True, ids, "sms:/open?addresses=" + ",".join(ids))
        out.update({c.rowid: conv for c in rows})
    return out


def file_signature(path: Path) -> tuple | None:
    """(inode, size, mtime) of chat.db and its -wal: any commit by Messages changes one of them."""
    out = []
    for p in (path, Path(f"{path}-wal")):
        try:
            st = p.stat()
        except FileNotFoundError:
            out.append(None)
            continue
        except OSError:
            return None
        out.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out) if out[0] else None


def _sender(m: db.Message, conv: Conversation, handle_ids: Mapping[int, str]) -> str:
    return handle_ids.get(m.handle) or (conv.identifiers[0] if not conv.group and conv.identifiers else "Unknown")


def _stamp(conv: Conversation, rows: Sequence[db.Row]) -> str:
    parts = [(r.guid, r.ts, r.handle, r.from_me, r.size, r.edited, r.attachments) for r in rows]
    return hashlib.sha1(repr((VERSION, conv.name, conv.identifiers, parts)).encode()).hexdigest()[:20]


def db_day(ts: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _unavailable(key: str, uri: str, why: str) -> Loaded:
    # a stamp no scan gives: the next sync sees a change and retries; the previous chunks stay searchable
    return Loaded(key, uri, "chat", stamp="unavailable", error=("unavailable", why))


def _cli_params() -> tuple:
    import click

    return (click.Option(["--path"], type=click.Path(exists=True, dir_okay=False, path_type=Path),
                         help="Messages' chat.db (registers the collection). Without it: the configured imessage "
                              "sources, else ~/Library/Messages/chat.db."),)


def _cli_source(path: Path | None = None, **_) -> dict | None:
    if path is not None:
        return {"path": str(path)}
    from rag_pipelines.config import load_collections
    from rag_search.config import Paths

    configured = any(s.type == "imessage" for c in load_collections(Paths.from_env()).values() for s in c.sources)
    return None if configured or not DEFAULT_DB.expanduser().is_file() else {"path": str(DEFAULT_DB.expanduser())}


def _source_type():
    from rag_pipelines.sources.registry import SourceType

    return SourceType(type="imessage", options=IMessageOptions, build=IMessageSource, collection="imessage",
                      kind="system", summary="iMessage/SMS: Messages' chat.db as conversation windows (who, when, "
                      "text, attachment names).", cli_params=_cli_params(), cli_source=_cli_source)


SOURCE = _source_type()
