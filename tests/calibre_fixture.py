"""A Calibre library generated from the documented schema (../shared/reference/sources.md §2), and a real one.

    <root>/metadata.db                       tables as calibre names them; triggers that call calibre's own SQL
                                             functions (title_sort, uuid4) and a `meta` view using sortconcat/concat,
                                             so a plain-SQLite INSERT into books or SELECT from meta fails: rows are
                                             written by a connection with Python stand-ins for those functions
    <root>/full-text-search.db               books_text rows (book 8's AZW3 text) and FTS5 tables declared with
                                             calibre's tokenizer (unreadable outside calibre)
    <root>/<Author>/<Title> (<id>)/<name>.<fmt>   book folders as calibre names them (ASCII, ':' '/' '?' → '_')
    <root>/.caltrash/b/12/                   a book in calibre's recycle bin: not in metadata.db, never indexed

Schema generations: "current" (user_version 27: no isbn/lccn/flags, books_pages_link, application_id 'cali',
an unknown extra column) and "legacy" (user_version 21: isbn/lccn/flags, no books_pages_link, no item_order,
no custom_columns.mark_for_delete). Nasty cases in BOOKS: several authors (order = link id, not author id or
name), no formats, EPUB + PDF + ORIGINAL_EPUB, a data row whose file is missing (with and without another format),
a file renamed by hand (extension fallback), only AZW3 (text from the full-text index), only MOBI, a corrupt
EPUB, Cyrillic title and author, a title with ':' '/' '?', HTML and plain-text comments, identifiers, languages,
series index 1.5, rating 7, custom columns (normalised multi-value text, bool), an undefined pubdate (year 101).

`calibredb_library()` makes a real library with calibre's own `calibredb` (when it is installed).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

ADDED = "2024-01-15 10:00:00.123456+00:00"
MODIFIED = "2024-02-01 08:30:00.654321+00:00"
UNDEFINED = "0101-01-01 00:00:00+00:00"


def unix(iso: str) -> int:
    return int(datetime.fromisoformat(iso).replace(tzinfo=timezone.utc).timestamp())


@dataclass
class Book:
    id: int
    title: str
    authors: list[str]
    path: str  # books.path as calibre writes it
    name: str = ""  # data.name: file stem of every format
    files: dict[str, object] = field(default_factory=dict)  # FORMAT → chapters [(title, html)], pages [str] or bytes
    on_disk: dict[str, str] = field(default_factory=dict)  # FORMAT → file name when not <name>.<fmt> (None: missing)
    tags: list[str] = field(default_factory=list)
    series: str | None = None
    series_index: float = 1.0
    rating: int | None = None
    publisher: str | None = None
    pubdate: str = UNDEFINED
    identifiers: dict[str, str] = field(default_factory=dict)
    languages: list[str] = field(default_factory=list)
    comments: str | None = None
    shelf: list[str] = field(default_factory=list)  # custom column #shelf (text, multiple, normalised)
    read: bool | None = None  # custom column #read (bool)


BOOKS = [
    Book(1, "Tidal Engines: A Field Guide", ["Zoë Brandt", "Ann Lee"], "Zoe Brandt/Tidal Engines_ A Field Guide (1)",
         "Tidal Engines_ A Field Guide - Zoe Brandt",
         {"EPUB": [("Turbines", "<h1>Turbines</h1><p>Barnacle fouling on the rotor blades cuts the output by a third "
                                "within one season.</p>"),
                   ("Maintenance", "<h1>Maintenance</h1><p>Grease the yaw bearings at every spring tide and check "
                                   "the seals for salt crust.</p>")],
          "PDF": ["PDF edition only: the zeppelin mooring appendix."],
          "ORIGINAL_EPUB": [("Draft", "<p>Original draft before conversion: walrus notes.</p>")]},
         tags=["Oceans", "Engineering"], series="Ocean Power", series_index=1.5, rating=7, publisher="Harbor Press",
         pubdate="2019-06-01 12:00:00+00:00", identifiers={"isbn": "9780306406157", "goodreads": "12345"},
         languages=["eng"], comments="<div><p>A <b>practical</b> guide to building tidal turbines.</p>"
                                     "<p>With many diagrams.</p></div>", shelf=["Workshop", "Favourites"], read=True),
    Book(2, "Война и мир", ["Лев Толстой"], "Lev Tolstoi/Voina i mir (2)", "Voina i mir - Lev Tolstoi",
         {"EPUB": [("Бородино", "<h1>Бородино</h1><p>Pierre watches the battle of Borodino from the Raevsky "
                               "redoubt, among the gunners.</p>")]},
         languages=["rus", "fra"], comments="<p>Роман-эпопея.</p>", read=False),
    Book(3, "Quiet Harbors", ["Carol Díaz"], "Carol Diaz/Quiet Harbors (3)", "Quiet Harbors - Carol Diaz",
         {"PDF": ["Harbors at dawn, before the fishing fleet leaves.",
                  "The lighthouse keeper's logbook records every passing trawler and the fog signals."]},
         tags=["Travel"], publisher="Salt & Sons", pubdate="2015-03-10 00:00:00+00:00", rating=10),
    Book(4, "The Lost Atlas", ["Dan Wu"], "Dan Wu/The Lost Atlas (4)",
         comments="<p>An atlas of <i>forgotten</i> islands in the South Pacific, with hand-drawn coral reefs.</p>",
         tags=["Maps"], pubdate="1998-07-04 00:00:00+00:00", identifiers={"isbn": "9780140449136"}),
    Book(5, "Ghost Copy", ["Eve Park"], "Eve Park/Ghost Copy (5)", "Ghost Copy - Eve Park",
         {"EPUB": [("One", "<p>never written</p>")], "PDF": ["The phantom manuscript was found in the attic trunk."]},
         on_disk={"EPUB": None}, pubdate="2020-01-01 00:00:00+00:00"),
    Book(6, "Missing Pages", ["Eve Park"], "Eve Park/Missing Pages (6)", "Missing Pages - Eve Park",
         {"EPUB": [("One", "<p>never written</p>")]}, on_disk={"EPUB": None},
         comments="A memoir of misplaced things.", pubdate="2021-05-05 00:00:00+00:00"),
    Book(7, "Renamed By Hand", ["Finn Roe"], "Finn Roe/Renamed By Hand (7)", "Renamed By Hand - Finn Roe",
         {"EPUB": [("Kettles", "<h1>Kettles</h1><p>Copper kettle restoration starts with vinegar and salt.</p>")]},
         on_disk={"EPUB": "my copy.EPUB"}, pubdate="2012-09-09 00:00:00+00:00"),
    Book(8, "Kindle Only", ["Gus Hale"], "Gus Hale/Kindle Only (8)", "Kindle Only - Gus Hale",
         {"AZW3": b"TPZ0 not really a kindle book"}, pubdate="2008-08-08 00:00:00+00:00"),
    Book(9, "Mobi Relic", ["Gus Hale"], "Gus Hale/Mobi Relic (9)", "Mobi Relic - Gus Hale",
         {"MOBI": b"BOOKMOBI not really a mobi book"}, comments="<p>An old Mobipocket book about sundials.</p>",
         pubdate="2005-05-05 00:00:00+00:00"),
    Book(10, "Broken Spine", ["Ivy Chen"], "Ivy Chen/Broken Spine (10)", "Broken Spine - Ivy Chen",
         {"EPUB": b"PK\x03\x04 this is not a zip archive at all"}, comments="<p>Bookbinding for beginners.</p>",
         pubdate="2018-02-02 00:00:00+00:00"),
    Book(11, "Why? And/Or How", ["Ann Lee"], "Ann Lee/Why_ And_Or How (11)", "Why_ And_Or How - Ann Lee",
         {"EPUB": [("Questions", "<p>The question of questions is asked by a curious heron.</p>")]},
         comments="Plain text comment\nwith a newline.", pubdate="2023-11-11 00:00:00+00:00"),
]
TRASHED = (12, "Trashed Book", "Trashed Book - Ann Lee", "The trashed secret recipe for marmalade.")
FTS_TEXT = {8: ("AZW3", "The falconer trains a peregrine on the moor at dusk."),
            1: ("EPUB", "calibre's own extraction of the EPUB: not used, the file is read")}
KEYS = [f"book/{b.id}" for b in BOOKS]

TABLES = {
    "authors": "id INTEGER PRIMARY KEY, name TEXT NOT NULL COLLATE NOCASE, sort TEXT COLLATE NOCASE, "
               "link TEXT NOT NULL DEFAULT '', UNIQUE(name)",
    "books_authors_link": "id INTEGER PRIMARY KEY, book INTEGER NOT NULL, author INTEGER NOT NULL, "
                          "UNIQUE(book, author)",
    "tags": "id INTEGER PRIMARY KEY, name TEXT NOT NULL COLLATE NOCASE, link TEXT NOT NULL DEFAULT '', UNIQUE(name)",
    "books_tags_link": "id INTEGER PRIMARY KEY, book INTEGER NOT NULL, tag INTEGER NOT NULL, UNIQUE(book, tag)",
    "series": "id INTEGER PRIMARY KEY, name TEXT NOT NULL COLLATE NOCASE, sort TEXT COLLATE NOCASE, "
              "link TEXT NOT NULL DEFAULT '', UNIQUE(name)",
    "books_series_link": "id INTEGER PRIMARY KEY, book INTEGER NOT NULL, series INTEGER NOT NULL, UNIQUE(book)",
    "publishers": "id INTEGER PRIMARY KEY, name TEXT NOT NULL COLLATE NOCASE, sort TEXT COLLATE NOCASE, "
                  "link TEXT NOT NULL DEFAULT '', UNIQUE(name)",
    "books_publishers_link": "id INTEGER PRIMARY KEY, book INTEGER NOT NULL, publisher INTEGER NOT NULL, UNIQUE(book)",
    "ratings": "id INTEGER PRIMARY KEY, rating INTEGER CHECK(rating > -1 AND rating < 11), "
               "link TEXT NOT NULL DEFAULT '', UNIQUE(rating)",
    "books_ratings_link": "id INTEGER PRIMARY KEY, book INTEGER NOT NULL, rating INTEGER NOT NULL, "
                          "UNIQUE(book, rating)",
    "languages": "id INTEGER PRIMARY KEY, lang_code TEXT NOT NULL COLLATE NOCASE, link TEXT NOT NULL DEFAULT '', "
                 "UNIQUE(lang_code)",
    "books_languages_link": "id INTEGER PRIMARY KEY, book INTEGER NOT NULL, lang_code INTEGER NOT NULL, "
                            "item_order INTEGER NOT NULL DEFAULT 0, UNIQUE(book, lang_code)",
    "identifiers": "id INTEGER PRIMARY KEY, book INTEGER NOT NULL, type TEXT NOT NULL DEFAULT 'isbn' COLLATE NOCASE, "
                   "val TEXT NOT NULL COLLATE NOCASE, UNIQUE(book, type)",
    "comments": "id INTEGER PRIMARY KEY, book INTEGER NOT NULL, text TEXT NOT NULL COLLATE NOCASE, UNIQUE(book)",
    "data": "id INTEGER PRIMARY KEY, book INTEGER NOT NULL, format TEXT NOT NULL COLLATE NOCASE, "
            "uncompressed_size INTEGER NOT NULL, name TEXT NOT NULL, UNIQUE(book, format)",
    "custom_columns": "id INTEGER PRIMARY KEY AUTOINCREMENT, label TEXT NOT NULL, name TEXT NOT NULL, "
                      "datatype TEXT NOT NULL, mark_for_delete BOOL DEFAULT 0 NOT NULL, "
                      "editable BOOL DEFAULT 1 NOT NULL, display TEXT DEFAULT '{}' NOT NULL, "
                      "is_multiple BOOL DEFAULT 0 NOT NULL, normalized BOOL NOT NULL, UNIQUE(label)",
    "custom_column_1": "id INTEGER PRIMARY KEY AUTOINCREMENT, value TEXT NOT NULL COLLATE NOCASE, "
                       "link TEXT NOT NULL DEFAULT '', UNIQUE(value)",
    "books_custom_column_1_link": "id INTEGER PRIMARY KEY AUTOINCREMENT, book INTEGER NOT NULL, "
                                  "value INTEGER NOT NULL, UNIQUE(book, value)",
    "custom_column_2": "id INTEGER PRIMARY KEY AUTOINCREMENT, book INTEGER, value BOOL NOT NULL, UNIQUE(book)",
    "preferences": "id INTEGER PRIMARY KEY, key TEXT NOT NULL, val TEXT NOT NULL, UNIQUE(key)",
    "library_id": "id INTEGER PRIMARY KEY, uuid TEXT NOT NULL, UNIQUE(uuid)",
    "metadata_dirtied": "id INTEGER PRIMARY KEY, book INTEGER NOT NULL, UNIQUE(book)",
}
BOOKS_COLUMNS = ("id INTEGER PRIMARY KEY AUTOINCREMENT, title TEXT NOT NULL DEFAULT 'Unknown' COLLATE NOCASE, "
                 "sort TEXT COLLATE NOCASE, timestamp TIMESTAMP DEFAULT CURRENT_TIMESTAMP, "
                 "pubdate TIMESTAMP DEFAULT CURRENT_TIMESTAMP, series_index REAL NOT NULL DEFAULT 1.0, "
                 "author_sort TEXT COLLATE NOCASE, {legacy}path TEXT NOT NULL DEFAULT '', uuid TEXT, "
                 "has_cover BOOL DEFAULT 0, "
                 "last_modified TIMESTAMP NOT NULL DEFAULT '2000-01-01 00:00:00+00:00'{extra}")
LEGACY_COLUMNS = ("isbn TEXT DEFAULT '' COLLATE NOCASE, lccn TEXT DEFAULT '' COLLATE NOCASE, "
                  "flags INTEGER NOT NULL DEFAULT 1, ")
APP_SQL = [  # what makes calibre's database need calibre: triggers and a view calling its own SQL functions
    "CREATE TRIGGER books_insert_trg AFTER INSERT ON books BEGIN "
    "UPDATE books SET sort = title_sort(NEW.title), uuid = uuid4() WHERE id = NEW.id; END",
    "CREATE TRIGGER books_update_trg AFTER UPDATE ON books BEGIN "
    "UPDATE books SET sort = title_sort(NEW.title) WHERE id = NEW.id AND OLD.title <> NEW.title; END",
    "CREATE TRIGGER fkc_data_insert BEFORE INSERT ON data BEGIN SELECT CASE WHEN (SELECT id FROM books "
    "WHERE id = NEW.book) IS NULL THEN RAISE(ABORT, 'Foreign key violation: book not in books') END; END",
    "CREATE TRIGGER books_delete_trg AFTER DELETE ON books BEGIN DELETE FROM books_authors_link WHERE book = OLD.id; "
    "DELETE FROM data WHERE book = OLD.id; DELETE FROM comments WHERE book = OLD.id; END",
    "CREATE VIEW meta AS SELECT id, title, (SELECT sortconcat(bal.id, name) FROM books_authors_link AS bal "
    "JOIN authors ON (author = authors.id) WHERE book = books.id) authors, (SELECT concat(name) FROM tags WHERE "
    "tags.id IN (SELECT tag FROM books_tags_link WHERE book = books.id)) tags, path, pubdate, uuid FROM books",
]


def app_functions(conn: sqlite3.Connection) -> sqlite3.Connection:
    """Python stand-ins for calibre's SQL functions, so this connection can write as calibre does."""
    conn.create_function("title_sort", 1, lambda t: t)
    conn.create_function("uuid4", 0, lambda: str(uuid.uuid4()))
    return conn


@dataclass
class Library:
    root: Path
    schema: str

    @property
    def db(self) -> Path:
        return self.root / "metadata.db"

    def folder(self, book_id: int) -> Path:
        return self.root / next(b.path for b in BOOKS if b.id == book_id)


def build(root: Path, schema: str = "current", wal: bool = False) -> Library:
    """The library of BOOKS under root (created)."""
    root.mkdir(parents=True)
    for book in BOOKS:
        write_files(root, book)
    trash = root / ".caltrash" / "b" / str(TRASHED[0])
    make_epub(trash / f"{TRASHED[2]}.epub", TRASHED[1], "Ann Lee", [("Secret", f"<p>{TRASHED[3]}</p>")])
    (trash / "metadata.opf").write_text("<package/>", encoding="utf-8")
    conn = app_functions(sqlite3.connect(root / "metadata.db", isolation_level=None))
    legacy = schema == "legacy"
    extra = "" if legacy else ", reading_notes_v99 TEXT"  # a column from a future calibre
    conn.execute(f"CREATE TABLE books ({BOOKS_COLUMNS.format(legacy=LEGACY_COLUMNS if legacy else '', extra=extra)})")
    for name, columns in TABLES.items():
        if legacy and name == "books_languages_link":
            columns = columns.replace("item_order INTEGER NOT NULL DEFAULT 0, ", "")
        if legacy and name == "custom_columns":
            columns = columns.replace("mark_for_delete BOOL DEFAULT 0 NOT NULL, ", "")
        conn.execute(f"CREATE TABLE {name} ({columns})")
    if not legacy:
        conn.execute("CREATE TABLE books_pages_link (book INTEGER PRIMARY KEY, pages INTEGER DEFAULT 0 NOT NULL, "
                     "algorithm INTEGER DEFAULT 0 NOT NULL, format TEXT DEFAULT '' NOT NULL, "
                     "format_size INTEGER DEFAULT 0 NOT NULL, timestamp TIMESTAMP, "
                     "needs_scan INTEGER NOT NULL DEFAULT 0)")
    for sql in APP_SQL:
        conn.execute(sql)
    conn.execute("BEGIN")
    conn.execute("INSERT INTO library_id(uuid) VALUES (?)", (str(uuid.uuid4()),))
    conn.executemany("INSERT INTO custom_columns(id, label, name, datatype, is_multiple, normalized) "
                     "VALUES (?, ?, ?, ?, ?, ?)", [(1, "shelf", "Shelf", "text", 1, 1),
                                                   (2, "read", "Read", "bool", 0, 0)])
    for name in sorted({a for b in BOOKS for a in b.authors}):  # by name: book 1's link order (Zoë, Ann) is not
        conn.execute("INSERT INTO authors(name, sort) VALUES (?, ?)", (name, name))
    for book in BOOKS:
        add_book(conn, book, legacy)
    if not legacy:
        conn.execute("INSERT INTO books_pages_link(book, pages) VALUES (1, 212)")
    conn.execute("COMMIT")
    conn.execute(f"PRAGMA user_version = {21 if legacy else 27}")
    if not legacy:
        conn.execute("PRAGMA application_id = 1667329129")  # 0x63616c69, "cali"
    if wal:
        conn.execute("PRAGMA journal_mode = WAL")
    conn.close()
    write_fts(root)
    return Library(root, schema)


def add_book(conn: sqlite3.Connection, b: Book, legacy: bool = False) -> None:
    """A book's rows, written as calibre writes them (needs app_functions on conn)."""
    conn.execute("INSERT INTO books(id, title, timestamp, pubdate, series_index, author_sort, path, last_modified"
                 f"{', isbn' if legacy else ''}) VALUES (?,?,?,?,?,?,?,?{',?' if legacy else ''})",
                 (b.id, b.title, ADDED, b.pubdate, b.series_index, b.authors[0], b.path, MODIFIED,
                  *([b.identifiers.get("isbn", "")] if legacy else [])))
    for name in b.authors:
        conn.execute("INSERT OR IGNORE INTO authors(name, sort) VALUES (?, ?)", (name, name))
        conn.execute("INSERT INTO books_authors_link(book, author) SELECT ?, id FROM authors WHERE name = ?",
                     (b.id, name))
    links = [("tags", "books_tags_link", "tag", "name", v) for v in b.tags]
    links += [("series", "books_series_link", "series", "name", b.series)] if b.series else []
    links += [("publishers", "books_publishers_link", "publisher", "name", b.publisher)] if b.publisher else []
    links += [("ratings", "books_ratings_link", "rating", "rating", b.rating)] if b.rating is not None else []
    links += [("languages", "books_languages_link", "lang_code", "lang_code", v) for v in b.languages]
    links += [("custom_column_1", "books_custom_column_1_link", "value", "value", v) for v in b.shelf]
    for table, link, col, value_col, value in links:
        conn.execute(f"INSERT OR IGNORE INTO {table}({value_col}) VALUES (?)", (value,))
        conn.execute(f"INSERT INTO {link}(book, {col}) SELECT ?, id FROM {table} WHERE {value_col} = ?", (b.id, value))
    if not legacy:
        conn.execute("UPDATE books_languages_link SET item_order = id WHERE book = ?", (b.id,))
    if b.read is not None:
        conn.execute("INSERT INTO custom_column_2(book, value) VALUES (?, ?)", (b.id, int(b.read)))
    for kind, val in b.identifiers.items():
        if legacy and kind == "isbn":
            continue  # old libraries kept the ISBN in books.isbn
        conn.execute("INSERT INTO identifiers(book, type, val) VALUES (?, ?, ?)", (b.id, kind, val))
    if b.comments is not None:
        conn.execute("INSERT INTO comments(book, text) VALUES (?, ?)", (b.id, b.comments))
    for fmt in b.files:
        conn.execute("INSERT INTO data(book, format, uncompressed_size, name) VALUES (?, ?, ?, ?)",
                     (b.id, fmt, 1000, b.name))


def write_files(root: Path, b: Book) -> None:
    folder = root / b.path
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "metadata.opf").write_text(f"<package><title>{b.title}</title></package>", encoding="utf-8")
    for fmt, content in b.files.items():
        name = b.on_disk.get(fmt, f"{b.name}.{fmt.lower()}")
        if name is None:
            continue  # the data row exists, the file does not
        if isinstance(content, bytes):
            (folder / name).write_bytes(content)
        elif fmt == "PDF":
            make_pdf(folder / name, content)
        else:
            make_epub(folder / name, b.title, b.authors[0], content)


def make_epub(path: Path, title: str, author: str, chapters: list[tuple[str, str]]) -> None:
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier(f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, title)}")
    book.set_title(title)
    book.set_language("en")
    book.add_author(author)
    items = []
    for i, (name, html) in enumerate(chapters, 1):
        item = epub.EpubHtml(title=name, file_name=f"chapter{i}.xhtml", lang="en")
        item.content = f"<html><body>{html}</body></html>"
        book.add_item(item)
        items.append(item)
    book.toc = tuple(items)
    book.spine = ["nav", *items]
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    path.parent.mkdir(parents=True, exist_ok=True)
    epub.write_epub(str(path), book)


def make_pdf(path: Path, pages: list[str]) -> None:
    import pymupdf

    doc = pymupdf.open()
    for text in pages:
        doc.new_page().insert_textbox(pymupdf.Rect(72, 72, 520, 760), text, fontsize=11)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc.save(str(path))
    doc.close()


def write_fts(root: Path) -> None:
    """full-text-search.db: books_text rows, then FTS5 tables with calibre's tokenizer (declared, not creatable)."""
    conn = sqlite3.connect(root / "full-text-search.db", isolation_level=None)
    conn.execute("CREATE TABLE dirtied_formats (id INTEGER PRIMARY KEY, book INTEGER NOT NULL, format TEXT NOT NULL, "
                 "in_progress INTEGER NOT NULL DEFAULT FALSE, UNIQUE(book, format))")
    conn.execute("CREATE TABLE books_text (id INTEGER PRIMARY KEY, book INTEGER NOT NULL, timestamp REAL NOT NULL, "
                 "format TEXT NOT NULL, format_hash TEXT NOT NULL, format_size INTEGER NOT NULL DEFAULT 0, "
                 "searchable_text TEXT NOT NULL DEFAULT '', text_size INTEGER NOT NULL DEFAULT 0, "
                 "text_hash TEXT NOT NULL DEFAULT '', err_msg TEXT DEFAULT '', UNIQUE(book, format))")
    for book, (fmt, text) in FTS_TEXT.items():
        conn.execute("INSERT INTO books_text(book, timestamp, format, format_hash, format_size, searchable_text, "
                     "text_size, text_hash) VALUES (?, 1.7e9, ?, 'x', 30, ?, ?, ?)",
                     (book, fmt, text, len(text), hashlib.sha1(text.encode()).hexdigest()))
    conn.execute("INSERT INTO books_text(book, timestamp, format, format_hash, err_msg) VALUES (9, 1.7e9, 'MOBI', 'y', "
                 "'DRM')")  # extraction failed: no text
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute("INSERT INTO sqlite_master(type, name, tbl_name, rootpage, sql) VALUES ('table', 'books_fts', "
                 "'books_fts', 0, 'CREATE VIRTUAL TABLE books_fts USING fts5(searchable_text, "
                 "content = ''books_text'', content_rowid = ''id'', tokenize = ''calibre remove_diacritics 2'')')")
    conn.execute("PRAGMA writable_schema = OFF")
    conn.execute("PRAGMA user_version = 1")
    conn.close()


def execute(lib: Library, *statements: tuple) -> None:
    """Change the library as calibre would (its SQL functions available)."""
    with app_functions(sqlite3.connect(lib.db)) as conn:
        for sql, *params in statements:
            conn.execute(sql, params)
    conn.close()


def add_to_library(lib: Library, book: Book) -> None:
    """A book added as calibre adds one: its files in its folder, then its rows."""
    write_files(lib.root, book)
    conn = app_functions(sqlite3.connect(lib.db, isolation_level=None))
    conn.execute("BEGIN")
    add_book(conn, book, lib.schema == "legacy")
    conn.execute("COMMIT")
    conn.close()


def delete_book(lib: Library, book_id: int) -> None:
    """Calibre's delete: the rows go (triggers clean the links), the folder moves to .caltrash/b/<id>."""
    folder = lib.folder(book_id)
    execute(lib, ("DELETE FROM books WHERE id = ?", book_id), ("DELETE FROM books_tags_link WHERE book = ?", book_id))
    shutil.move(str(folder), str(lib.root / ".caltrash" / "b" / str(book_id)))


class AppWriter:
    """Calibre running on a WAL library: a book committed only to the -wal (no checkpoint), then an open write."""

    LATE = Book(20, "Late Arrival", ["Kim Ode"], "Kim Ode/Late Arrival (20)",
                comments="<p>A late arrival about greenhouse orchids.</p>", pubdate="2024-03-12 00:00:00+00:00")
    UNCOMMITTED = Book(21, "Uncommitted Draft", ["Kim Ode"], "Kim Ode/Uncommitted Draft (21)",
                       comments="<p>secret ferret plans, not committed</p>")

    def __init__(self, lib: Library):
        self.conn = app_functions(sqlite3.connect(lib.db, isolation_level=None))
        self.conn.execute("PRAGMA wal_autocheckpoint = 0")
        self.conn.execute("BEGIN")
        add_book(self.conn, self.LATE)
        self.conn.execute("COMMIT")  # committed, but only in metadata.db-wal
        self.conn.execute("SELECT count(*) FROM books").fetchall()
        self.conn.execute("BEGIN IMMEDIATE")
        add_book(self.conn, self.UNCOMMITTED)  # held open while we index

    def close(self) -> None:
        self.conn.execute("ROLLBACK")
        self.conn.close()


def hash_tree(root: Path) -> dict[str, str]:
    """sha256 of every file under root (metadata.db and its -wal/-shm included)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


# -- a real library made by calibre itself -------------------------------------------------------------------


def calibredb_library(root: Path, work: Path) -> Path:
    """A library made by calibre's own tools: an EPUB with full metadata (2 authors, series 1.5, identifiers, a
    custom column, HTML comments), a PDF, a Cyrillic book with only an AZW3 (made by ebook-convert) whose text comes
    from calibre's full-text index (enabled, indexed), and an empty book (no formats)."""
    work.mkdir(parents=True, exist_ok=True)
    epub_file, pdf_file, kindle = work / "tidal.epub", work / "harbors.pdf", work / "borodino.epub"
    make_epub(epub_file, "Tidal Engines", "Zoë Brandt", BOOKS[0].files["EPUB"])
    make_pdf(pdf_file, BOOKS[2].files["PDF"])
    make_epub(kindle, "Война и мир", "Лев Толстой", BOOKS[1].files["EPUB"])
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "CALIBRE_CONFIG_DIRECTORY": str(work / "config"),
           "HOME": str(work)}
    run = lambda *args: subprocess.run(args, env=env, check=True, capture_output=True, timeout=120)  # noqa: E731
    run("ebook-convert", str(kindle), str(work / "borodino.azw3"))
    steps = [
        ["add", str(epub_file), "--title", "Tidal Engines: A Field Guide", "--authors", "Zoë Brandt & Ann Lee",
         "--tags", "Engineering,Oceans", "--series", "Ocean Power", "--series-index", "1.5",
         "--isbn", "9780306406157", "--identifier", "goodreads:12345", "--languages", "eng"],
        ["add", str(pdf_file), "--title", "Quiet Harbors", "--authors", "Carol Díaz"],
        ["add", "--empty", "--title", "Война и мир", "--authors", "Лев Толстой"],
        ["add_format", "3", str(work / "borodino.azw3")],
        ["add", "--empty", "--title", "The Lost Atlas", "--authors", "Dan Wu"],
        ["add_custom_column", "shelf", "Shelf", "text", "--is-multiple"],
        ["set_metadata", "1", "-f", f"comments:{BOOKS[0].comments}", "-f", "rating:3.5",
         "-f", "publisher:Harbor Press", "-f", "pubdate:2019-06-01T12:00:00+00:00", "-f", "#shelf:Workshop,Favourites"],
        ["fts_index", "enable", "--wait-for-completion", "--indexing-speed", "fast"],
    ]
    for step in steps:
        run("calibredb", "--with-library", str(root), *step)
    return root
