"""Reading Messages' chat.db: chats, handles, message rows and attachments, read-only and briefly.

Through appdb (`mode=ro`, lock retries, a private copy of a WAL file no process has open); base tables only;
columns discovered per table (the `message` table grew from ~60 to 90+ columns across macOS versions).
Reference: ../shared/reference/sources.md §4.

What is a message here: a row of `chat_message_join` ⋈ `message` that is not a tapback or its removal
(associated_message_type 2000–3999), not a group event (item_type ≠ 0: renames, joins, leaves), not errored
(error ≠ 0: never delivered, including the empty junk rows some databases hold by the million), not unsent
(date_retracted ≠ 0) and that has a date. Messages in "Recently Deleted" (chat_recoverable_message_join) have
left chat_message_join and are not read. Text: `text`, else the decoded `attributedBody`.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import NamedTuple, Sequence

from rag_pipelines.parsers.typedstream import TypedStreamError, attributed_text
from rag_pipelines.sources import appdb
from rag_pipelines.sources.base import SourceUnavailable

APP = "Messages"
APPLE_EPOCH = 978_307_200  # 2001-01-01 UTC in unix seconds
NS_THRESHOLD = 100_000_000_000  # Apple-epoch values above this are nanoseconds (macOS 10.13+), else seconds
REQUIRED = ("message", "chat", "handle", "chat_message_join")
PLACEHOLDER = "\ufffc"  # an attachment's place in the text
BATCH = 900  # SQLite parameters per IN (…)


class Handle(NamedTuple):
    rowid: int
    id: str  # phone number or e-mail address, as stored
    person: str  # person_centric_id ('' when unknown): one contact's several handles share it


class Chat(NamedTuple):
    rowid: int
    identifier: str  # chat_identifier: the handle of a 1:1 chat, `chat…` of a group
    group: bool
    name: str  # display_name of a named group, else ''
    service: str
    handles: tuple[int, ...]  # chat_handle_join


class Row(NamedTuple):
    """A message as the scan sees it: enough to cut windows and to notice a change."""

    rowid: int
    guid: str
    ts: float  # unix seconds
    chat: int
    handle: int
    from_me: bool
    service: str
    size: int  # characters of its text (decoded from attributedBody when `text` is empty)
    edited: int  # date_edited as stored (0 = never)
    attachments: int
    problem: str  # why its attributedBody could not be decoded; '' when fine


class Message(NamedTuple):
    """A message as a window shows it."""

    rowid: int
    guid: str
    ts: float
    handle: int
    from_me: bool
    service: str
    text: str
    edited: bool
    attachments: tuple[str, ...]  # names (transfer_name, else the file's name); files are never opened


def unix_time(value: object) -> float | None:
    """An Apple-epoch date (nanoseconds since macOS 10.13, seconds before) → unix seconds; 0/NULL → None."""
    try:
        v = int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    if v == 0:
        return None
    return v / 1e9 + APPLE_EPOCH if abs(v) > NS_THRESHOLD else float(v + APPLE_EPOCH)


def message_text(text: object, body: object) -> tuple[str, str]:
    """(text, problem): `text` when it has any, else the attributedBody's string; problem says why not."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if isinstance(text, str) and text.strip(PLACEHOLDER + " \n\t"):
        return text, ""
    if not body:
        return (text if isinstance(text, str) else ""), ""
    try:
        return attributed_text(bytes(body)), ""
    except TypedStreamError as exc:
        return "", str(exc)


def _where(cols: set[str]) -> str:
    parts = ["m.date IS NOT NULL", "m.date != 0"]
    if "item_type" in cols:
        parts.append("COALESCE(m.item_type, 0) = 0")
    if "associated_message_type" in cols:
        parts.append("COALESCE(m.associated_message_type, 0) NOT BETWEEN 2000 AND 3999")
    if "error" in cols:
        parts.append("COALESCE(m.error, 0) = 0")
    if "date_retracted" in cols:
        parts.append("COALESCE(m.date_retracted, 0) = 0")
    return " AND ".join(parts)


def _col(cols: set[str], name: str, default: str = "NULL") -> str:
    return f"m.{name}" if name in cols else default


class Snapshot(NamedTuple):
    chats: dict[int, Chat]
    handles: dict[int, Handle]
    rows: list[Row]


def read_scan(path: Path) -> Snapshot:
    """Chats, handles and every message row, in one short read transaction."""
    with appdb.open_ro(path, APP, REQUIRED) as conn:
        try:
            conn.execute("BEGIN")  # one snapshot for the few queries (a WAL reader never blocks the app)
            try:
                return Snapshot(_chats(conn), _handles(conn), _rows(conn))
            finally:
                conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            raise SourceUnavailable(f"{path} could not be read ({exc}); it is tried again on the next run. "
                                    "Nothing indexed from it was removed.") from exc


def _handles(conn: sqlite3.Connection) -> dict[int, Handle]:
    cols = appdb.columns(conn, "handle")
    person = "person_centric_id" if "person_centric_id" in cols else "NULL"
    rows = appdb.query(conn, f"SELECT ROWID, id, {person} FROM handle")
    return {r[0]: Handle(r[0], _s(r[1]), _s(r[2])) for r in rows}


def _chats(conn: sqlite3.Connection) -> dict[int, Chat]:
    cols = appdb.columns(conn, "chat")
    pick = ", ".join(c if c in cols else "NULL" for c in ("guid", "style", "chat_identifier", "display_name",
                                                          "service_name"))
    members: dict[int, list[int]] = {}
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "chat_handle_join" in tables:
        for chat_id, handle_id in appdb.query(conn, "SELECT chat_id, handle_id FROM chat_handle_join "
                                                    "ORDER BY chat_id, handle_id"):
            members.setdefault(chat_id, []).append(handle_id)
    out = {}
    for rowid, guid, style, ident, name, service in appdb.query(conn, f"SELECT ROWID, {pick} FROM chat"):
        handles = tuple(members.get(rowid, ()))
        group = style == 43 if style in (43, 45) else (";+;" in _s(guid) or len(handles) > 1)
        out[rowid] = Chat(rowid, _s(ident) or _s(guid), group, " ".join(_s(name).split()), _s(service), handles)
    return out


def _rows(conn: sqlite3.Connection) -> list[Row]:
    cols = appdb.columns(conn, "message")
    has_joins = "message_attachment_join" in {r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type='table'")}
    count = ("(SELECT count(*) FROM message_attachment_join a WHERE a.message_id = m.ROWID)" if has_joins else "0")
    # the blob only where `text` is empty: the scan decodes it to know the message's size and whether it decodes
    body = ("CASE WHEN m.text IS NULL OR trim(m.text, char(65532, 32)) = '' THEN m.attributedBody END"
            if "attributedBody" in cols else "NULL")
    sql = (f"SELECT m.ROWID, m.guid, m.date, j.chat_id, COALESCE(m.handle_id, 0), COALESCE(m.is_from_me, 0), "
           f"{_col(cols, 'service')}, m.text, {body}, {_col(cols, 'date_edited', '0')}, {count} "
           f"FROM chat_message_join j JOIN message m ON m.ROWID = j.message_id WHERE {_where(cols)}")
    out = []
    for rowid, guid, date, chat, handle, me, service, text, blob, edited, n in appdb.query(conn, sql):
        ts = unix_time(date)
        if ts is None:
            continue
        body, problem = message_text(text, blob)
        size = len(body.replace(PLACEHOLDER, "").strip())
        if not size and not n and not problem:
            continue  # nothing to show: an empty row, a bare link-preview balloon
        out.append(Row(rowid, _s(guid), ts, chat, handle, bool(me), _s(service), size + 24 * n,
                       int(edited or 0), n, problem))
    return out


def read_messages(path: Path, rowids: Sequence[int]) -> dict[int, Message]:
    """The messages with these ROWIDs and their attachments' names (a short read per batch)."""
    out: dict[int, Message] = {}
    with appdb.open_ro(path, APP, REQUIRED) as conn:
        try:
            cols = appdb.columns(conn, "message")
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            body = "m.attributedBody" if "attributedBody" in cols else "NULL"
            for start in range(0, len(rowids), BATCH):
                ids = list(rowids[start : start + BATCH])
                marks = ",".join("?" * len(ids))
                names = _attachments(conn, ids, marks) if "attachment" in tables and \
                    "message_attachment_join" in tables else {}
                sql = (f"SELECT m.ROWID, m.guid, m.date, COALESCE(m.handle_id, 0), COALESCE(m.is_from_me, 0), "
                       f"{_col(cols, 'service')}, m.text, {body}, {_col(cols, 'date_edited', '0')} "
                       f"FROM message m WHERE m.ROWID IN ({marks}) AND {_where(cols)}")
                for rowid, guid, date, handle, me, service, text, blob, edited in appdb.query(conn, sql, ids):
                    body_text, _ = message_text(text, blob)
                    out[rowid] = Message(rowid, _s(guid), unix_time(date) or 0.0, handle, bool(me), _s(service),
                                         body_text, bool(edited), tuple(names.get(rowid, ())))
        except sqlite3.DatabaseError as exc:
            raise SourceUnavailable(f"{path} could not be read ({exc}); it is tried again on the next run.") from exc
    return out


def _attachments(conn: sqlite3.Connection, ids: list[int], marks: str) -> dict[int, list[str]]:
    cols = appdb.columns(conn, "attachment")
    pick = ", ".join(f"a.{c}" if c in cols else "NULL" for c in ("transfer_name", "filename"))
    sql = (f"SELECT j.message_id, {pick} FROM message_attachment_join j JOIN attachment a "
           f"ON a.ROWID = j.attachment_id WHERE j.message_id IN ({marks}) ORDER BY j.message_id, a.ROWID")
    out: dict[int, list[str]] = {}
    for message_id, transfer, filename in appdb.query(conn, sql, ids):
        name = _s(transfer).strip() or os.path.basename(_s(filename).rstrip("/")) or "attachment"
        out.setdefault(message_id, []).append(name)
    return out


def _s(value: object) -> str:
    return "" if value is None else value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
