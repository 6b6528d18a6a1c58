"""Calibre as a Source: one item per book of each library's metadata.db, its text from the EPUB (else the PDF).

Read-only through appdb (`mode=ro`, lock retries), base tables only (books, data, the link tables, identifiers,
comments, custom_column_N, books_pages_link): never the views or triggers (they call calibre's own SQL functions
title_sort, uuid4, sortconcat) nor FTS5 tables (calibre's tokenizer). Reference: ../shared/reference/sources.md §2.

Keys: `book/<id>` (`<library folder>/book/<id>` when the source has several libraries): the id survives the title
and author edits that rename a book's folder. Stamps: `books.last_modified`, the formats and the chosen file's
format:size:mtime. Files are found as calibre finds them (`<books.path>/<data.name>.<format>`, else any file with
that extension in the book's folder), never by rebuilding names. Text: the EPUB, else the PDF (chapters, pages),
else what calibre's full-text index extracted (full-text-search.db `books_text`, any format), else none: the book
is still indexed from its metadata and description (metadata `text: "metadata only"`; `text_error` says why).
The first section of every book holds its title, authors, series, publisher, tags and description.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections import namedtuple
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator, Literal, Mapping, Sequence

from pydantic import Field, field_validator
from rag_search.records import Document, Section

from rag_pipelines import parsers
from rag_pipelines.parsers.errors import ParseError
from rag_pipelines.parsers.limits import MB, Limits, bound_document
from rag_pipelines.sources import appdb
from rag_pipelines.sources.base import BaseSource, Loaded, ScanResult, SourceUnavailable, Stamp
from rag_pipelines.sources.files import root_labels
from rag_search.keys import path_key
from rag_pipelines.sources.options import SourceOptions, expand_paths

APP, BATCH, MAX_CUSTOM = "Calibre", 200, 30
VERSION = "calibre-2"  # part of every content hash: bump when the Document built from the same rows changes
# (calibre-2: EPUB chapters labelled by the table-of-contents entry that covers them)
READABLE = ("EPUB", "PDF")  # formats whose files are parsed, in order of preference
FTS_DB = "full-text-search.db"
ABOUT = "About this book"
# name → (link table, its value column, value table, value column); authors in link order (calibre's own order)
LINKS = {"authors": ("books_authors_link", "author", "authors", "name"),
         "tags": ("books_tags_link", "tag", "tags", "name"),
         "series": ("books_series_link", "series", "series", "name"),
         "publisher": ("books_publishers_link", "publisher", "publishers", "name"),
         "rating": ("books_ratings_link", "rating", "ratings", "rating"),
         "languages": ("books_languages_link", "lang_code", "languages", "lang_code")}


class CalibreOptions(SourceOptions):
    type: Literal["calibre"] = Field(description="calibre: the books of Calibre libraries.")
    libraries: tuple[Path, ...] = Field(min_length=1, description="Calibre library folders (each holds metadata.db), "
                                        "e.g. '~/Calibre Library'.")

    @field_validator("libraries", mode="before")
    @classmethod
    def _one(cls, v):
        return [v] if isinstance(v, (str, Path)) else v

    @field_validator("libraries")
    @classmethod
    def _expand(cls, v: tuple[Path, ...]) -> tuple[Path, ...]:
        return tuple(p.parent if p.name == "metadata.db" else p for p in expand_paths(v))


Library = namedtuple("Library", "root label")  # label: the key prefix when the source has several libraries
Light = namedtuple("Light", "id path modified data")  # what a scan reads of a book; data: ((format, name), …)
_Item = namedtuple("_Item", "lib book_id stamp uri")
# what a book's Document is made from besides its text (its JSON is part of the content hash)
Book = namedtuple("Book", "id title authors tags series series_index rating publisher pubdate added identifiers "
                  "languages comments formats custom pages uuid")


class CalibreSource(BaseSource):
    """The books of one or more Calibre libraries."""

    type = "calibre"

    def __init__(self, options: CalibreOptions, label: str | None = None, limits: Limits | None = None):
        super().__init__(label)
        self.options, self.limits = options, limits or Limits()
        self.libs = [Library(root, sub) for root, sub in root_labels(list(options.libraries))]
        self._items: dict[str, _Item] | None = None

    def scan(self) -> ScanResult:
        items: dict[str, _Item] = {}
        for li, lib in enumerate(self.libs):  # any unreadable library makes the whole source unavailable:
            books, fts = read_books(lib.root)[0], None  # a partial scan would delete its books from the index
            for book in books.values():
                chosen = choose_file(lib.root, book)
                if chosen is None and book.data and fts is None:
                    fts = read_fts(lib.root)
                stamp, uri = _stamp_uri(lib.root, book, chosen, (fts or {}).get(book.id))
                items[self.key(path_key(f"book/{book.id}", lib.label))] = _Item(li, book.id, stamp, uri)
        self._items = items
        return ScanResult({key: Stamp(item.stamp, item.uri) for key, item in items.items()})

    def watch_paths(self) -> list:
        return [lib.root for lib in self.libs]

    def load(self, keys: Sequence[str], known_uris: Mapping[str, str] | None = None) -> Iterator[Loaded]:
        keys, known = list(dict.fromkeys(keys)), known_uris or {}
        if self._items is None or any(k not in self._items for k in keys):
            try:
                self.scan()  # a fresh process, or keys new since the last scan
            except SourceUnavailable as exc:
                yield from (_unavailable(k, known.get(k, k), str(exc)) for k in keys)
                return
        items, by_lib = self._items or {}, {}
        for key in keys:
            if key in items:
                by_lib.setdefault(items[key].lib, []).append(key)
            else:
                yield Loaded(key, known.get(key, key), "book", gone=True)
        for li, lib_keys in by_lib.items():
            for start in range(0, len(lib_keys), BATCH):
                yield from self._load_batch(self.libs[li], lib_keys[start : start + BATCH])

    def _load_batch(self, lib: Library, keys: list[str]) -> Iterator[Loaded]:
        items = self._items or {}
        ids = [items[k].book_id for k in keys]
        try:  # one short read per batch; the files are read afterwards, one book at a time
            lights, books = read_books(lib.root, ids, full=True)
        except SourceUnavailable as exc:
            yield from (_unavailable(k, items[k].uri, str(exc)) for k in keys)
            return
        chosen = {bid: choose_file(lib.root, light) for bid, light in lights.items()}
        textless = [bid for bid, c in chosen.items() if c is None and lights[bid].data]
        fts = read_fts(lib.root, textless) if textless else {}
        for key in keys:
            bid = items[key].book_id
            yield self._loaded(key, lib, lights[bid], books[bid], chosen[bid], fts.get(bid)) if bid in books else \
                Loaded(key, items[key].uri, "book", gone=True)

    def _loaded(self, key: str, lib: Library, light: Light, book: Book, chosen: tuple | None, fts: tuple | None):
        stamp, uri = _stamp_uri(lib.root, light, chosen, fts)
        data, text, why, digest = None, "metadata only", _no_text(lib.root, light), ""
        if chosen:
            fmt, file, st = chosen
            try:
                parsers.check_size(st.st_size, file.name, self.limits)  # before reading a byte of it
                data, text, why = file.read_bytes(), fmt, ""
                digest = hashlib.sha256(data).hexdigest()
            except ParseError as exc:
                why = f"{exc.kind}: {exc}"
            except OSError as exc:
                why = f"unreadable: cannot read {file} ({exc.strerror or exc}); check its permissions"
        elif fts:
            text, why, data = f"calibre full-text index ({fts[0]})", "", fts[2][: int(self.limits.max_text_mb * MB)]
            digest = hashlib.sha256(data.encode()).hexdigest()
        extra = {**self.options.metadata, "library": str(lib.root), "calibre_url": calibre_url(lib.root, book.id),
                 "text": text, "text_error": why}
        payload = json.dumps([VERSION, book, digest, sorted(extra.items())], ensure_ascii=False, default=str)
        (name, mtime), limits = (chosen[1].name, chosen[2].st_mtime_ns) if chosen else ("", None), self.limits

        def parse() -> Document:
            body, meta = [], dict(extra)
            if isinstance(data, bytes):
                try:
                    doc = parsers.parse(data, name, mtime, limits)
                    body, meta = list(doc.sections), {**doc.metadata, **meta}
                except Exception as exc:  # noqa: BLE001 - a corrupt or DRM'd file: the book stays findable
                    kind = exc.kind if isinstance(exc, ParseError) else f"error: {type(exc).__name__}"
                    meta.update(text="metadata only", text_error=f"{kind}: {exc}")
            elif data:
                body = [Section(data)]
            return bound_document(book_document(book, body, meta), limits)

        return Loaded(key, uri, "book", stamp=stamp, parse=parse, size=chosen[2].st_size if chosen else None,
                      mtime_ns=chosen[2].st_mtime_ns if chosen else None,
                      content_hash=hashlib.sha256(payload.encode()).hexdigest())


def read_books(root: Path, ids: Sequence[int] | None = None, full: bool = False) -> tuple[dict, dict[int, Book]]:
    """Light (folder, last_modified, formats) of every book or of these ids, and their Book when `full`; one read."""
    if not root.is_dir():
        raise SourceUnavailable(f"{root} does not exist or is not a folder; check the library path in the config "
                                "(calibre: Preferences → Library location). Nothing indexed from it was removed.")
    with appdb.open_ro(root / "metadata.db", APP, ("books", "data")) as conn:
        try:
            where, params = (f" WHERE {{}} IN ({','.join('?' * len(ids))})", list(ids)) if ids is not None else ("", [])
            cols = appdb.columns(conn, "books")
            rows = appdb.query(conn, f"SELECT id, {appdb.pick(cols, 'path', 'last_modified')} FROM books"
                               + where.format("id"), params)
            data: dict[int, list[tuple[str, str]]] = {}
            for book, fmt, name in appdb.query(conn, "SELECT book, format, name FROM data" + where.format("book")
                                               + " ORDER BY id", params):
                data.setdefault(book, []).append((_s(fmt).upper(), _s(name)))
            lights = {r[0]: Light(r[0], _s(r[1]), _s(r[2]), tuple(data.get(r[0], ()))) for r in rows}
            return lights, (_books(conn, cols, list(lights)) if full and lights else {})
        except sqlite3.DatabaseError as exc:
            raise SourceUnavailable(f"{root / 'metadata.db'} could not be read ({exc}); it is tried again on the "
                                    "next run. Nothing indexed from it was removed.") from exc


def _books(conn: sqlite3.Connection, cols: set[str], ids: list[int]) -> dict[int, Book]:
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    marks, many = ",".join("?" * len(ids)), {}

    def collect(name: str, sql: str, table: str, *more: str) -> None:
        if {table, *more} <= tables:
            for book, *value in appdb.query(conn, sql.format(marks), ids):
                many.setdefault(name, {}).setdefault(book, []).append(value[0] if len(value) == 1 else tuple(value))

    for name, (link, col, table, value) in LINKS.items():
        order = "l.item_order, l.id" if name == "languages" and "item_order" in appdb.columns(conn, link) else \
            "v.name" if name == "tags" else "l.id"
        collect(name, f"SELECT l.book, v.{value} FROM {link} l JOIN {table} v ON v.id = l.{col} "
                f"WHERE l.book IN ({{}}) ORDER BY {order}", link, table)
    collect("identifiers", "SELECT book, type, val FROM identifiers WHERE book IN ({}) ORDER BY type", "identifiers")
    collect("comments", "SELECT book, text FROM comments WHERE book IN ({})", "comments")
    collect("formats", "SELECT book, upper(format) FROM data WHERE book IN ({}) ORDER BY upper(format)", "data")
    collect("pages", "SELECT book, pages FROM books_pages_link WHERE pages > 0 AND book IN ({})", "books_pages_link")
    custom = _custom(conn, tables, ids) if "custom_columns" in tables else {}
    out = {}
    for bid, title, pubdate, added, index, uid, isbn in appdb.query(
            conn, f"SELECT id, {appdb.pick(cols, 'title', 'pubdate', 'timestamp', 'series_index', 'uuid', 'isbn')} "
            f"FROM books WHERE id IN ({marks})", ids):
        get = lambda name: tuple(_s(v) for v in many.get(name, {}).get(bid, ()))  # noqa: E731
        idents = tuple(f"{_s(k).lower()}:{_s(v)}" for k, v in many.get("identifiers", {}).get(bid, ()))
        if _s(isbn).strip() and not any(i.startswith("isbn:") for i in idents):
            idents += (f"isbn:{_s(isbn).strip()}",)  # old libraries kept it in books.isbn
        rating = max((r for r in many.get("rating", {}).get(bid, ()) if isinstance(r, int)), default=0)
        out[bid] = Book(bid, _s(title).strip() or "Unknown", get("authors"), get("tags"), (get("series") or ("",))[0],
                        _number(index, 1.0) if get("series") else None, rating / 2 if rating else None,
                        (get("publisher") or ("",))[0], _date(pubdate), _date(added), idents, get("languages"),
                        (get("comments") or ("",))[0], get("formats"), tuple(custom.get(bid, ())),
                        (many.get("pages", {}).get(bid) or [None])[0], _s(uid))
    return out


def _custom(conn: sqlite3.Connection, tables: set[str], ids: list[int]) -> dict[int, list[tuple[str, str, object]]]:
    """book → [(label, column name, value or values)] of the user's custom columns (composite ones are not stored)."""
    marks, out, cols = ",".join("?" * len(ids)), {}, appdb.columns(conn, "custom_columns")
    skip = "WHERE mark_for_delete = 0 " if "mark_for_delete" in cols else ""
    for cid, label, name, dtype, multiple, normalized in appdb.query(
            conn, f"SELECT id, label, name, datatype, is_multiple, normalized FROM custom_columns {skip}"
            f"ORDER BY id LIMIT {MAX_CUSTOM}"):
        table, link = f"custom_column_{int(cid)}", f"books_custom_column_{int(cid)}_link"
        if table not in tables or (normalized and link not in tables):
            continue
        sql = (f"SELECT l.book, v.value FROM {link} l JOIN {table} v ON v.id = l.value WHERE l.book IN ({marks}) "
               "ORDER BY l.id" if normalized else f"SELECT book, value FROM {table} WHERE book IN ({marks})")
        values: dict[int, list] = {}
        for book, value in appdb.query(conn, sql, ids):
            values.setdefault(book, []).append(_custom_value(_s(dtype), value))
        for book, vs in values.items():
            out.setdefault(book, []).append((_s(label), _s(name), vs if multiple else vs[0]))
    return out


def _custom_value(dtype: str, value: object) -> object:
    convert = {"bool": bool, "rating": lambda v: (v or 0) / 2, "comments": lambda v: comment_text(_s(v)),
               "datetime": lambda v: (d := _date(v)) and d.date().isoformat()}.get(dtype)
    return convert(value) if convert else value if isinstance(value, (int, float)) else _s(value)


def read_fts(root: Path, ids: Sequence[int] | None = None) -> dict[int, tuple]:
    """book → (format, text hash[, text of these ids]) from calibre's full-text index; {} without one (optional)."""
    path = root / FTS_DB
    if not path.is_file():
        return {}
    try:
        with appdb.open_ro(path, APP, ("books_text",)) as conn:
            cols = appdb.columns(conn, "books_text")
            text, where = (", searchable_text", f"AND book IN ({','.join('?' * len(ids))})") if ids else ("", "")
            rows = appdb.query(conn, f"SELECT book, format, {appdb.pick(cols, 'text_hash')}{text} FROM books_text "
                               f"WHERE length(searchable_text) > 0 {where} ORDER BY length(searchable_text)", ids or [])
    except (SourceUnavailable, sqlite3.DatabaseError):
        return {}
    return {r[0]: (_s(r[1]).upper(), _s(r[2]), *map(_s, r[3:])) for r in rows}  # the longest text per book wins


def choose_file(root: Path, book: Light) -> tuple | None:
    """(format, path, stat) of the first readable format whose file is on disk, as calibre resolves it."""
    names = dict(reversed(book.data))
    for fmt in READABLE:
        if fmt in names and (found := find_file(root, book.path, fmt, names[fmt])):
            try:
                return fmt, found, found.stat()
            except OSError:
                continue
    return None


def find_file(root: Path, folder: str, fmt: str, name: str) -> Path | None:
    """`<root>/<books.path>/<data.name>.<fmt>`, else any file with that extension in the folder (calibre's fallback)."""
    rel = Path(folder)
    if not folder or rel.is_absolute() or ".." in rel.parts or "/" in name:
        return None  # a path calibre never writes: nothing outside the library is read
    exact, ext = root / rel / f"{name}.{fmt.lower()}", f".{fmt.lower()}"
    if exact.is_file():
        return exact
    try:
        return next((p for p in sorted((root / rel).iterdir()) if p.suffix.lower() == ext and p.is_file()), None)
    except OSError:
        return None


def _stamp_uri(root: Path, book: Light, chosen: tuple | None, fts: tuple | None) -> tuple[str, str]:
    formats = ",".join(sorted(f for f, _ in book.data))
    if chosen:
        fmt, path, st = chosen
        return f"{book.modified}|{formats}|{fmt}:{st.st_size}:{st.st_mtime_ns}", str(path)
    folder = root / book.path if book.path and not Path(book.path).is_absolute() else root
    return f"{book.modified}|{formats}|" + (f"fts:{fts[0]}:{fts[1]}" if fts else "none"), str(folder)


def _no_text(root: Path, book: Light) -> str:
    """Why a book has no readable text file (shown as metadata text_error)."""
    formats = [f for f, _ in book.data]
    if not formats:
        return "no file: the book has no formats in calibre"
    if any(f in READABLE for f in formats):
        return (f"missing: no {' or '.join(f for f in READABLE if f in formats)} file in {root / book.path}; "
                "calibre's 'Check library' finds missing files")
    return (f"unsupported: only {', '.join(formats)}; local-rag reads EPUB and PDF (convert the book to EPUB in "
            "calibre, or enable calibre's full-text search so its index supplies the text)")


def book_document(b: Book, body: list[Section], meta: dict) -> Document:
    """The book's metadata and description as the first section, then its text (chapters, pages)."""
    meta = {"calibre_id": b.id, "series": b.series, "series_index": b.series_index, "rating": b.rating,
            "publisher": b.publisher, "pubdate": b.pubdate.date().isoformat() if b.pubdate else "",
            "added": b.added.date().isoformat() if b.added else "", "identifiers": list(b.identifiers),
            "isbn": next((i[5:] for i in b.identifiers if i.startswith("isbn:")), ""), "languages": list(b.languages),
            "formats": list(b.formats), "pages": b.pages, "uuid": b.uuid, **meta,
            **{f"#{label}": value for label, _, value in b.custom}}
    when = b.pubdate or b.added
    return Document(title=b.title, sections=(Section(about(b), (ABOUT,)), *body), tags=b.tags,
                    author=" & ".join(b.authors) or None, participants=b.authors,
                    ts=int(when.timestamp()) if when else None,
                    metadata={k: v for k, v in meta.items() if v not in ("", [], None)})


def about(b: Book) -> str:
    """Title, authors, series, publisher and year, tags, identifiers, text custom columns, then the description."""
    published = [b.publisher and f"Published by {b.publisher}", b.pubdate and str(b.pubdate.year)]
    custom = [f"{name}: {', '.join(map(str, v)) if isinstance(v, list) else v}" for _, name, v in b.custom
              if v not in ("", None, []) and not isinstance(v, bool)]
    lines = [b.title, b.authors and f"by {' & '.join(b.authors)}",
             b.series and f"Series: {b.series}, book {b.series_index:g}", ", ".join(filter(None, published)),
             b.tags and f"Tags: {', '.join(b.tags)}", b.identifiers and f"Identifiers: {', '.join(b.identifiers)}",
             *custom, b.comments.strip() and "\n" + comment_text(b.comments)]
    return "\n".join(line for line in lines if line).strip()


def comment_text(html: str) -> str:
    """Calibre's comments are HTML (plain text in old libraries): their text, paragraphs kept."""
    if "<" not in html:
        return html.strip()
    from rag_pipelines.parsers.webpage import html_sections

    return "\n\n".join(s.text for s in html_sections(html)[1]).strip()


def calibre_url(root: Path, book_id: int) -> str:
    """calibre://show-book/<library>/<id>: the folder's name with spaces as '_', hex-encoded when it needs escaping."""
    name = root.name.replace(" ", "_")
    ok = name and all(c.isascii() and (c.isalnum() or c in "_-.") for c in name)
    return f"calibre://show-book/{name if ok else '_hex_-' + name.encode().hex()}/{book_id}"


def _date(value: object) -> datetime | None:
    """Calibre's 'YYYY-MM-DD HH:MM:SS[.ffffff]+00:00' → an aware datetime; year 101 (calibre's 'none') → None."""
    try:
        d = datetime.fromisoformat(_s(value).strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return None if d.year <= 101 else d if d.tzinfo else d.replace(tzinfo=timezone.utc)


def _number(value: object, default: float) -> float:
    return float(value) if isinstance(value, (int, float)) else default


def _s(value: object) -> str:
    return "" if value is None else value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _unavailable(key: str, uri: str, why: str) -> Loaded:
    # a stamp no scan gives: the next sync sees a change and retries; the previous chunks stay searchable
    return Loaded(key, uri, "book", stamp="unavailable", error=("unavailable", why))


def _cli_params() -> tuple:
    import click

    return (click.Option(["--library", "libraries"], multiple=True, type=click.Path(exists=True, path_type=Path),
                         help="A calibre library folder (holding metadata.db; repeatable; registers the collection); "
                              "without it the configured calibre sources are indexed."),)


def _cli_source(libraries: tuple[Path, ...] = (), **_) -> dict | None:
    return {"libraries": [str(p) for p in libraries]} if libraries else None


def _source_type():
    from rag_pipelines.sources.registry import SourceType

    return SourceType(type="calibre", options=CalibreOptions, build=CalibreSource, collection="calibre", kind="system",
                      summary="Calibre: every book of its libraries (metadata, description, EPUB/PDF text).",
                      cli_params=_cli_params(), cli_source=_cli_source, seed_keys={"calibre_libraries": "libraries"})


SOURCE = _source_type()
