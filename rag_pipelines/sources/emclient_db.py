"""eM Client's mail stores, read-only: which stores a data folder holds, the rows a scan needs, message data by id.

Layout and schema: ../shared/reference/sources.md §1. A store is any `<guid>/<guid>/` folder holding
mail_index.dat (MailItems, MailAddresses, MailCategoryNames), with folders.dat (Folders), mail_fti.dat
(eM Client's FTS4 index: only its `LocalMailsIndex3_content` shadow table is read) and mail_data.dat
(LocalMailContents, one row per MIME part). Every file is opened through appdb (mode=ro, lock retries).

Scans read one row per MailItems row (no bodies). Loads read bodies in batches of at most BATCH ids; the
FTI content table has no index on the mail id, so its rows (and mail_data's, when that has no index on
`id`) are located once per load in one pass, then fetched by rowid.
"""

from __future__ import annotations

import json
import re
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, NamedTuple, Sequence

from rag_pipelines.parsers.mail import normalise_message_id
from rag_pipelines.sources import appdb
from rag_pipelines.sources.base import SourceUnavailable

APP = "eM Client"
MAGIC = b"SQLite format 3\x00"
TICKS_AT_UNIX_EPOCH = 621_355_968_000_000_000  # .NET ticks (100 ns since 0001-01-01) at 1970-01-01
DELETED = 65536  # MailItems.flags bit of deleted/hidden rows [?]; such rows are not indexed
BATCH = 500  # ids per `IN (...)` query
FTI = "LocalMailsIndex3_content"
PART_ORDER = ("1", "1.1", "TEXT", "2", "1.2", "1.1.1", "1.1.2", "1.2.1")  # FTI parts, most plain first
MIN_FTI_CHARS = 20  # shorter FTI fragments are attachment names and the like
ADDRESS_TYPES = {1: "from", 2: "sender", 3: "reply_to", 4: "to", 5: "cc", 6: "bcc"}
TEXT_TYPES = ("text/plain", "text/html", "text/calendar")
STAMP_COLUMNS = ("folder", "date", "receivedDate", "editTime", "downloadState", "size")


@dataclass(frozen=True)
class Store:
    path: Path  # the <guid>/<guid> folder
    ident: str  # "<outer guid>/<inner guid>"
    account: str | None  # from the <name>.acn marker next to it, when there is one


def ticks_to_unix(ticks: int | None) -> int | None:
    """.NET ticks → unix seconds (UTC assumed); None for 0 and impossible values."""
    if not isinstance(ticks, int) or ticks <= 0:
        return None
    seconds = (ticks - TICKS_AT_UNIX_EPOCH) // 10_000_000
    return seconds if -62_135_596_800 < seconds < 253_402_300_800 else None


def sqlite_state(path: Path) -> str:
    """'missing', 'empty' (0 bytes), 'sqlite' (the magic header) or 'other'."""
    try:
        with path.open("rb") as fh:
            head = fh.read(16)
    except FileNotFoundError:
        return "missing"
    except OSError:
        return "sqlite"  # unreadable: let the open report why
    return "empty" if not head else ("sqlite" if head == MAGIC else "other")


def find_stores(path: Path) -> list[Store]:
    """The stores under an eM Client data folder, or the one store a folder or a file in it names."""
    path = Path(path).expanduser()
    if path.is_file():
        path = path.parent
    if not path.is_dir():
        raise SourceUnavailable(f"{path} does not exist; check the email source's path in the config (eM Client's "
                                "data folder, e.g. ~/Library/Application Support/eM Client). Nothing indexed from it "
                                "was removed.")
    found = [path / "mail_index.dat"] if (path / "mail_index.dat").is_file() else \
        sorted(path.glob("*/*/mail_index.dat")) + sorted(path.glob("*/mail_index.dat"))
    stores = [_store(p.parent) for p in found if p.is_file()]
    if not stores:
        raise SourceUnavailable(f"{path} holds no eM Client mail store (a <guid>/<guid>/ folder with mail_index.dat); "
                                "point the email source's path at eM Client's data folder. Nothing indexed from it "
                                "was removed.")
    for store in stores:
        state = sqlite_state(store.path / "mail_index.dat")
        if state == "other":
            raise SourceUnavailable(f"{store.path / 'mail_index.dat'} is not an SQLite database (damaged, or not "
                                    "eM Client's); let eM Client repair its database or restore it from a backup. "
                                    "Nothing indexed from this source was removed.")
    return stores


def _store(folder: Path) -> Store:
    markers = sorted(folder.parent.glob("*.acn"))
    return Store(folder, f"{folder.parent.name}/{folder.name}", markers[0].stem if markers else None)


# -- scan ----------------------------------------------------------------------------------------------


class Row(NamedTuple):
    """One MailItems row as a scan sees it (one per message per folder copy); a tuple, as there are 150k+."""

    id: int
    message_id: str  # normalised; '' when the message has none
    folder: int
    stamp: tuple  # the row's change-relevant values (STAMP_COLUMNS)
    subject: str | None = None  # only for rows without a Message-ID (they are keyed by subject + date)
    date: int = 0


@dataclass
class StoreScan:
    rows: list[Row]
    folders: dict[int, str]  # folder id → path ("INBOX", "[Gmail]/All Mail")
    categories: dict[int, tuple[str, ...]]  # row id → category names


def scan_store(store: Store) -> StoreScan:
    """Every live MailItems row of a store, its folder names and categories; SourceUnavailable when unreadable."""
    if sqlite_state(store.path / "mail_index.dat") == "empty":
        return StoreScan([], {}, {})
    with appdb.open_ro(store.path / "mail_index.dat", APP, ("MailItems",)) as conn:
        cols = appdb.columns(conn, "MailItems")
        select = appdb.pick(cols, "id", "messageId", *STAMP_COLUMNS, "flags")
        no_id = "\"messageId\" IS NULL OR trim(\"messageId\") IN ('', '<>')" if "messageId" in cols else "1"
        subject = f"CASE WHEN {no_id} THEN {appdb.pick(cols, 'subject')} END"
        raw = appdb.query(conn, f"SELECT {select}, {subject} FROM MailItems")
        categories: dict[int, list[str]] = {}
        if "categoryName" in appdb.columns(conn, "MailCategoryNames"):
            for row_id, name in appdb.query(conn, "SELECT id, categoryName FROM MailCategoryNames"):
                if name:
                    categories.setdefault(row_id, []).append(str(name))
    rows = []
    for row_id, mid, *stamp, flags, subj in raw:
        if isinstance(row_id, int) and not (flags or 0) & DELETED:
            folder, date = stamp[0], stamp[1]
            rows.append(Row(row_id, normalise_message_id(mid), folder if isinstance(folder, int) else -1,
                            tuple(stamp), subj, date if isinstance(date, int) else 0))
    return StoreScan(rows, folder_names(store), {k: tuple(sorted(v)) for k, v in categories.items()})


def folder_names(store: Store) -> dict[int, str]:
    """Folder id → path without the leading '/' (its name, or 'folder <id>', when the path is unknown)."""
    path = store.path / "folders.dat"
    if sqlite_state(path) in ("missing", "empty"):
        return {}
    with appdb.open_ro(path, APP, ("Folders",)) as conn:
        select = appdb.pick(appdb.columns(conn, "Folders"), "id", "name", "path")
        rows = appdb.query(conn, f"SELECT {select} FROM Folders")
    return {fid: (str(p or "").strip("/") or str(name or "") or f"folder {fid}") for fid, name, p in rows}


# -- load ----------------------------------------------------------------------------------------------


@dataclass
class Part:
    """One located MIME part of a message in mail_data.dat (its body only when it was fetched)."""

    rowid: int
    name: str
    content_type: str
    disposition: str
    encoding: int | None
    size: int  # length of partBody
    header_size: int
    body: bytes | None = None
    header: bytes | None = None

    @property
    def is_text(self) -> bool:
        return self.content_type.lower().startswith(TEXT_TYPES) and "attachment" not in self.disposition.lower()

    @property
    def filename(self) -> str | None:
        m = re.search(r"""(?:file)?name\*?\s*=\s*"?([^";]+)""", f"{self.disposition};{self.content_type}", re.I)
        return m.group(1).strip() if m and not self.is_text else None


@dataclass
class MessageData:
    """What a load reads of one MailItems row."""

    id: int
    fields: dict  # subject, messageId, date, receivedDate, preview, conversationId, inReplyTo
    addresses: list[tuple[int, int, str, str]] = field(default_factory=list)  # (type, position, name, address)
    fti: list[tuple[str, str]] = field(default_factory=list)  # (partName, text)
    parts: list[Part] = field(default_factory=list)


def best_fti(fti: Sequence[tuple[str, str]]) -> str | None:
    """The FTI text to use: the first part in PART_ORDER with at least MIN_FTI_CHARS characters."""
    rank = {name: i for i, name in enumerate(PART_ORDER)}
    for name, text in sorted(fti, key=lambda p: (rank.get(p[0], len(rank)), p[0])):
        if text and len(text.strip()) >= MIN_FTI_CHARS:
            return text
    return None


class StoreReader:
    """Open connections to one store's files for a load; optional files that cannot be read are noted, not raised."""

    MESSAGE_FIELDS = ("subject", "messageId", "date", "receivedDate", "preview", "conversationId", "inReplyTo")

    def __init__(self, store: Store, max_body_bytes: int):
        self.store, self.max_body = store, max_body_bytes
        self.problem: str | None = None  # why mail_fti.dat or mail_data.dat could not be read (bodies then fail)
        self._stack = ExitStack()
        self._fti_rows: dict[int, list[tuple[int, str]]] = {}  # mail id → [(docid, partName)]
        self._parts: dict[int, list[Part]] = {}

    def __enter__(self) -> StoreReader:
        try:
            index = appdb.open_ro(self.store.path / "mail_index.dat", APP, ("MailItems",))
            self.index = self._stack.enter_context(index)
            self.fti = self._optional("mail_fti.dat")
            self.data = self._optional("mail_data.dat", "LocalMailContents")
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()

    def _optional(self, name: str, table: str | None = None):
        path = self.store.path / name
        state = sqlite_state(path)
        if state in ("missing", "empty"):
            return None
        if state == "other":
            self.problem = (f"{path} is not an SQLite database (damaged?); let eM Client repair its database; "
                            "the messages are tried again on the next run")
            return None
        try:
            conn = self._stack.enter_context(appdb.open_ro(path, APP))
        except SourceUnavailable as exc:
            self.problem = str(exc)
            return None
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        return conn if (table or FTI) in tables else None

    def prepare(self, ids: Sequence[int]) -> None:
        """Locate the FTI rows and MIME parts of these mail ids (one pass per file, no bodies read)."""
        ids = sorted(set(ids))
        if self.fti is not None and (fcols := _fti_columns(self.fti)):
            id_col, part_col, _ = fcols
            for docid, mail_id, part in _locate(self.fti, FTI, id_col, ids, f'"{part_col}"', rowid="docid"):
                self._fti_rows.setdefault(mail_id, []).append((docid, str(part or "")))
        if self.data is not None:
            cols = appdb.columns(self.data, "LocalMailContents")
            select = appdb.pick(cols, "partName", "contentType", "contentDisposition", "contentTransferEncoding")
            sizes = ", ".join(f'length("{c}")' if c in cols else "0" for c in ("partBody", "partHeader"))
            for rowid, mail_id, *rest in _locate(self.data, "LocalMailContents", "id", ids, f"{select}, {sizes}"):
                name, ctype, disp, enc, size, hsize = rest
                self._parts.setdefault(mail_id, []).append(
                    Part(rowid, str(name or ""), str(ctype or ""), str(disp or ""), enc, size or 0, hsize or 0))

    def read(self, ids: Sequence[int]) -> dict[int, MessageData]:
        """MessageData of these MailItems ids (those still present), bodies included."""
        out: dict[int, MessageData] = {}
        for chunk in _batches(sorted(set(ids))):
            marks = ",".join("?" * len(chunk))
            select = appdb.pick(appdb.columns(self.index, "MailItems"), "id", *self.MESSAGE_FIELDS)
            for row in appdb.query(self.index, f"SELECT {select} FROM MailItems WHERE id IN ({marks})", chunk):
                out[row[0]] = MessageData(row[0], dict(zip(self.MESSAGE_FIELDS, row[1:])),
                                          parts=self._parts.get(row[0], []))
            if "parentId" in appdb.columns(self.index, "MailAddresses"):
                sql = (f"SELECT parentId, type, position, displayName, address FROM MailAddresses "
                       f"WHERE parentId IN ({marks}) ORDER BY parentId, type, position, id")
                for parent, kind, pos, name, address in appdb.query(self.index, sql, chunk):
                    if parent in out:
                        out[parent].addresses.append((kind, pos or 0, str(name or ""), str(address or "")))
        self._read_fti(out)
        self._read_parts([m for m in out.values() if best_fti(m.fti) is None])
        return out

    def _read_fti(self, messages: dict[int, MessageData]) -> None:
        wanted = {docid: (mid, part) for mid in messages for docid, part in self._fti_rows.get(mid, [])}
        if not wanted or self.fti is None:
            return
        content = _fti_columns(self.fti)[2]
        for chunk in _batches(sorted(wanted)):
            sql = f'SELECT docid, "{content}" FROM {FTI} WHERE docid IN ({",".join("?" * len(chunk))})'
            for docid, text in appdb.query(self.fti, sql, chunk):
                mid, part = wanted[docid]
                messages[mid].fti.append((part, text if isinstance(text, str) else ""))

    def _read_parts(self, messages: list[MessageData]) -> None:
        """Bodies of the text parts (and the TEXT part's header, which may hold the whole message) when needed."""
        if self.data is None:
            return
        bodies = {p.rowid: p for m in messages for p in m.parts if p.is_text and 0 < p.size <= self.max_body}
        headers = {p.rowid: p for m in messages if not any(p.rowid in bodies for p in m.parts)
                   for p in m.parts if p.name.upper() == "TEXT" and 0 < p.header_size <= self.max_body}
        for column, wanted in (("partBody", bodies), ("partHeader", headers)):
            for chunk in _batches(sorted(wanted)):
                sql = f'SELECT rowid, "{column}" FROM LocalMailContents WHERE rowid IN ({",".join("?" * len(chunk))})'
                for rowid, blob in appdb.query(self.data, sql, chunk):
                    data = bytes(blob) if isinstance(blob, (bytes, memoryview)) else str(blob or "").encode()
                    setattr(wanted[rowid], "body" if column == "partBody" else "header", data)


def _fti_columns(conn) -> tuple[str, str, str] | None:
    """(id, partName, content) columns of the FTS4 content table (named c0<col>, c1<col>, ...)."""
    cols = sorted(appdb.columns(conn, FTI))
    find = lambda suffix: next((c for c in cols if re.fullmatch(rf"c\d+{suffix}", c, re.I)), None)  # noqa: E731
    found = (find("id"), find("partname"), find("content"))
    return found if all(found) else None  # type: ignore[return-value]


def _locate(conn, table: str, id_col: str, ids: list[int], select: str, rowid: str = "rowid") -> list[tuple]:
    """(rowid, mail id, *select) of a table's rows for these mail ids: by its index on id_col, else in one pass."""
    if _indexed(conn, table, id_col):
        out: list[tuple] = []
        for chunk in _batches(ids):
            marks = ",".join("?" * len(chunk))
            sql = f'SELECT {rowid}, "{id_col}", {select} FROM {table} WHERE "{id_col}" IN ({marks})'
            out += appdb.query(conn, sql, chunk)
        return out
    sql = (f'SELECT {rowid}, CAST("{id_col}" AS INTEGER), {select} FROM {table} '
           f'WHERE CAST("{id_col}" AS INTEGER) IN (SELECT value FROM json_each(?))')
    return appdb.query(conn, sql, (json.dumps(ids),))


def _indexed(conn, table: str, column: str) -> bool:
    for _, name, *_ in conn.execute(f"PRAGMA index_list('{table}')"):
        first = conn.execute(f"PRAGMA index_info('{name}')").fetchone()
        if first and first[2] == column:
            return True
    return False


def _batches(ids: Sequence) -> Iterator[list]:
    for i in range(0, len(ids), BATCH):
        yield list(ids[i : i + BATCH])
