"""Calibre as a Source: books, metadata, files and their fallbacks, faults, a real calibredb library, end to end."""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from pathlib import Path

import dagster as dg
import pytest
import yaml
from click.testing import CliRunner

import calibre_fixture as fx
from rag_pipelines.indexing import runs
from rag_pipelines.config import load_collections
from rag_pipelines.sources import appdb
from rag_pipelines.sources.base import SourceUnavailable
from rag_pipelines.sources.calibre import ABOUT, CalibreOptions, CalibreSource
from rag_pipelines.wiring import resources
from rag_search.cli.main import cli
from rag_search.config import Paths
from rag_search.retrieval import Filters, SearchEngine, SearchRequest
from rag_search.store import reads


@pytest.fixture
def lib(tmp_path):
    return fx.build(tmp_path / "Calibre Library")


def source(*libraries, **options) -> CalibreSource:
    return CalibreSource(CalibreOptions(type="calibre", libraries=libraries, **options))


def documents(src: CalibreSource, keys=None) -> dict:
    out = {}
    for loaded in src.load(sorted(keys or fx.KEYS)):
        assert loaded.error is None and not loaded.gone, (loaded.key, loaded.error)
        out[loaded.key] = (loaded, loaded.parse())
    return out


def text(doc) -> str:
    return "\n".join(s.text for s in doc.sections)


@pytest.fixture
def fast_locks(monkeypatch):
    monkeypatch.setattr(appdb, "RETRIES", (0.05, 0.05))
    monkeypatch.setattr(appdb, "BUSY_MS", 50)


# -- the fixture is as hostile as calibre's database ----------------------------------------------------------


def test_plain_sqlite_cannot_write_the_library_nor_read_its_views_and_fts(lib):
    conn = sqlite3.connect(lib.db)
    for sql, error in (("INSERT INTO books(title) VALUES ('x')", "no such function: title_sort"),
                       ("SELECT * FROM meta", "no such function: sortconcat")):
        with pytest.raises(sqlite3.OperationalError, match=error):
            conn.execute(sql).fetchall()
    conn.close()
    fts = sqlite3.connect(lib.root / "full-text-search.db")
    with pytest.raises(sqlite3.OperationalError, match="no such tokenizer: calibre"):
        fts.execute("SELECT * FROM books_fts").fetchall()
    fts.close()


# -- scan ----------------------------------------------------------------------------------------------------


def test_scan_keys_stamps_and_uris(lib):
    items = source(lib.root).scan().items
    assert sorted(items, key=lambda k: int(k.split("/")[1])) == fx.KEYS  # the trashed book is not one of them
    uri = {k: s.uri.removeprefix(str(lib.root) + "/") for k, s in items.items()}
    assert uri["book/1"] == "Zoe Brandt/Tidal Engines_ A Field Guide (1)/Tidal Engines_ A Field Guide - Zoe Brandt.epub"
    assert uri["book/3"].endswith(".pdf") and uri["book/5"].endswith("Ghost Copy - Eve Park.pdf")  # EPUB missing
    assert uri["book/7"] == "Finn Roe/Renamed By Hand (7)/my copy.EPUB"  # calibre's extension fallback
    assert uri["book/4"] == "Dan Wu/The Lost Atlas (4)" and uri["book/6"] == "Eve Park/Missing Pages (6)"
    assert items["book/1"].value.startswith(f"{fx.MODIFIED}|EPUB,ORIGINAL_EPUB,PDF|EPUB:")
    assert items["book/8"].value.startswith(f"{fx.MODIFIED}|AZW3|fts:AZW3:") and items["book/9"].value.endswith("|none")
    assert source(lib.root).scan().items == items  # stable


def test_stamps_follow_metadata_files_and_formats(lib):
    src = source(lib.root)
    before = src.scan().items
    [old] = src.load(["book/3"])
    fx.execute(lib, ("UPDATE books SET title = 'Quiet Harbours', last_modified = '2024-03-01 09:00:00+00:00' "
                     "WHERE id = 3",))
    epub = lib.folder(1) / "Tidal Engines_ A Field Guide - Zoe Brandt.epub"
    os.utime(epub, ns=(epub.stat().st_atime_ns, epub.stat().st_mtime_ns + 10**9))  # touched, same bytes
    shutil.copy(lib.folder(7) / "my copy.EPUB", lib.folder(4) / "The Lost Atlas - Dan Wu.epub")
    fx.execute(lib, ("INSERT INTO data(book, format, uncompressed_size, name) VALUES (4, 'EPUB', 1, "
                     "'The Lost Atlas - Dan Wu')",))
    after = src.scan().items
    assert {k for k in after if after[k] != before[k]} == {"book/1", "book/3", "book/4"}
    assert after["book/4"].uri.endswith("The Lost Atlas - Dan Wu.epub")
    docs = documents(src, ["book/1", "book/3", "book/4"])
    assert docs["book/3"][1].title == "Quiet Harbours" and docs["book/3"][0].content_hash != old.content_hash
    assert docs["book/1"][0].stamp == after["book/1"].value  # load and scan agree, so the next sync is a no-op
    assert "Copper kettle restoration" in text(docs["book/4"][1]) and docs["book/4"][1].metadata["text"] == "EPUB"


def test_several_libraries_and_one_missing(lib, tmp_path):
    legacy = fx.build(tmp_path / "Old Library", "legacy")
    items = source(lib.root, legacy.root).scan().items
    assert {"Calibre Library/book/1", "Old Library/book/11"} <= set(items) and len(items) == 2 * len(fx.KEYS)
    shutil.rmtree(legacy.root)
    with pytest.raises(SourceUnavailable, match="Old Library does not exist"):  # not half a scan: that would delete
        source(lib.root, legacy.root).scan()


def test_missing_and_corrupt_libraries(lib, tmp_path):
    with pytest.raises(SourceUnavailable, match="does not exist"):
        source(tmp_path / "nowhere").scan()
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceUnavailable, match="metadata.db does not exist"):
        source(tmp_path / "empty").scan()
    lib.db.write_bytes(b"not a database" * 500)
    with pytest.raises(SourceUnavailable, match="not a readable SQLite database"):
        source(lib.root).scan()


@pytest.mark.parametrize("journal", ["rollback", "wal"])
def test_a_locked_library_is_unavailable_not_empty(tmp_path, fast_locks, journal):
    lib = fx.build(tmp_path / "Calibre Library", wal=journal == "wal")
    holder = sqlite3.connect(lib.db, isolation_level=None)
    if journal == "rollback":  # calibre's own libraries: it commits under an EXCLUSIVE lock
        holder.execute("BEGIN EXCLUSIVE")
    else:  # WAL with exclusive locking (maintenance) after one write
        holder.execute("PRAGMA locking_mode = EXCLUSIVE")
        fx.app_functions(holder).execute("UPDATE books SET title = title WHERE id = 1")
        holder.execute("BEGIN")
    try:
        t0 = time.perf_counter()
        with pytest.raises(SourceUnavailable, match="stayed locked by Calibre"):
            source(lib.root).scan()
        assert time.perf_counter() - t0 < 5
        [busy] = source(lib.root).load(["book/1"])
        assert busy.error[0] == "unavailable" and busy.stamp == "unavailable"  # retried by the next sync
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_a_closed_wal_library_is_read_without_leaving_files(tmp_path):
    lib = fx.build(tmp_path / "Calibre Library", wal=True)
    before = fx.hash_tree(lib.root)
    assert len(documents(source(lib.root))) == len(fx.KEYS)
    assert fx.hash_tree(lib.root) == before and not list(lib.root.glob("*-wal")) + list(lib.root.glob("*-shm"))


def test_a_library_replaced_under_the_reader(lib, tmp_path):
    src = source(lib.root)
    before = src.scan().items
    other = fx.build(tmp_path / "rebuilt")
    fx.execute(other, ("UPDATE books SET title = 'Quiet Harbours', last_modified = '2025-01-01 00:00:00+00:00' "
                       "WHERE id = 3",), ("DELETE FROM books WHERE id = 4",))
    os.replace(other.db, lib.db)  # renamed over the old file, as a restore or a sync tool does
    pdf = lib.folder(3) / "Quiet Harbors - Carol Diaz.pdf"
    fx.make_pdf(tmp_path / "new.pdf", ["A new edition about foghorns."])
    os.replace(tmp_path / "new.pdf", pdf)
    [harbors, atlas] = src.load(["book/3", "book/4"])  # keys of the old scan, rows of the new file
    assert harbors.parse().title == "Quiet Harbours" and "foghorns" in text(harbors.parse()) and atlas.gone
    after = source(lib.root).scan().items
    assert after["book/3"].value != before["book/3"].value and "book/4" not in after
    assert harbors.stamp == after["book/3"].value


# -- load ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("schema", ["current", "legacy"])
def test_documents_metadata_and_text(tmp_path, schema):
    lib = fx.build(tmp_path / "Calibre Library", schema)
    docs = {k: doc for k, (_, doc) in documents(source(lib.root)).items()}
    tidal = docs["book/1"]
    assert tidal.title == "Tidal Engines: A Field Guide" and tidal.author == "Zoë Brandt & Ann Lee"  # link order
    assert tidal.participants == ("Zoë Brandt", "Ann Lee") and tidal.tags == ("Engineering", "Oceans")
    assert tidal.ts == fx.unix("2019-06-01T12:00:00")
    meta = {k: v for k, v in tidal.metadata.items() if k not in ("uuid", "library")}
    assert meta == {
        "calibre_id": 1, "series": "Ocean Power", "series_index": 1.5, "rating": 3.5, "publisher": "Harbor Press",
        "pubdate": "2019-06-01", "added": "2024-01-15", "identifiers": ["goodreads:12345", "isbn:9780306406157"],
        "isbn": "9780306406157", "languages": ["eng"], "formats": ["EPUB", "ORIGINAL_EPUB", "PDF"], "text": "EPUB",
        "calibre_url": "calibre://show-book/Calibre_Library/1", "#shelf": ["Workshop", "Favourites"], "#read": True,
        **({"pages": 212} if schema == "current" else {})}
    assert tidal.sections[0].heading_path == (ABOUT,) and tidal.sections[0].text.startswith(
        "Tidal Engines: A Field Guide\nby Zoë Brandt & Ann Lee\nSeries: Ocean Power, book 1.5\n"
        "Published by Harbor Press, 2019\nTags: Engineering, Oceans\n")
    assert "Shelf: Workshop, Favourites" in tidal.sections[0].text and "Read" not in tidal.sections[0].text
    assert tidal.sections[0].text.endswith("A practical guide to building tidal turbines.\nWith many diagrams.")
    assert [s.heading_path for s in tidal.sections[1:]] == [("Turbines",), ("Maintenance",)]
    assert "zeppelin" not in text(tidal) and "walrus" not in text(tidal)  # the EPUB is read, not the PDF or original
    war = docs["book/2"]
    assert (war.title, war.author, war.metadata["languages"]) == ("Война и мир", "Лев Толстой", ["rus", "fra"])
    assert war.ts == fx.unix("2024-01-15T10:00:00") and "pubdate" not in war.metadata  # year 101: the date added
    assert war.sections[1].heading_path == ("Бородино",) and war.sections[0].text.endswith("Роман-эпопея.")
    harbors = docs["book/3"]
    assert [(s.page, s.text[:11]) for s in harbors.sections[1:]] == [(1, "Harbors at "), (2, "The lightho")]
    assert harbors.metadata["rating"] == 5 and harbors.metadata["text"] == "PDF"
    assert "phantom manuscript" in text(docs["book/5"]) and docs["book/5"].metadata["text"] == "PDF"
    assert "Copper kettle" in text(docs["book/7"]) and "peregrine" in text(docs["book/8"])
    assert docs["book/8"].metadata["text"] == "calibre full-text index (AZW3)"
    assert docs["book/11"].title == "Why? And/Or How" and docs["book/11"].sections[0].text.endswith(
        "Plain text comment\nwith a newline.")
    why = {k: (d.metadata["text"], d.metadata.get("text_error", "").split(":")[0]) for k, d in docs.items()
           if d.metadata["text"] == "metadata only"}
    assert why == {"book/4": ("metadata only", "no file"), "book/6": ("metadata only", "missing"),
                   "book/9": ("metadata only", "unsupported"), "book/10": ("metadata only", "corrupt")}
    assert "forgotten islands in the South Pacific" in docs["book/4"].sections[0].text
    assert len(docs["book/4"].sections) == 1 and docs["book/4"].metadata["isbn"] == "9780140449136"


def test_a_gutenberg_epub_is_cited_by_its_staves(lib):
    """A Christmas Carol (Project Gutenberg #46, public domain; tests/fixtures/books): several staves share a spine
    file; every chunk must name the stave its text belongs to, as its table of contents does."""
    from rag_pipelines.chunking.prose import ChunkSpec, chunk_document

    carol = (Path(__file__).parent / "fixtures" / "books" / "christmas_carol_pg46.epub").read_bytes()
    fx.add_to_library(lib, fx.Book(30, "A Christmas Carol", ["Charles Dickens"], "Charles Dickens/A Christmas Carol (30)",
                                   "A Christmas Carol - Charles Dickens", files={"EPUB": carol}))
    [(loaded, doc)] = documents(source(lib.root), ["book/30"]).values()
    assert doc.metadata["text"] == "EPUB" and loaded.uri.endswith("A Christmas Carol - Charles Dickens.epub")
    chunks = chunk_document(doc, lambda t: len(t.split()), ChunkSpec(max_tokens=200, overlap_tokens=20))
    stave = {phrase: next(c.heading_path[0] for c in chunks if phrase in " ".join(c.text.split()))
             for phrase in ("Marley was dead: to begin with", "When Scrooge awoke, it was so dark",
                            "Awaking in the middle of a prodigiously tough snore",
                            "The Phantom slowly, gravely, silently", "Scrooge was better than his word")}
    assert stave == {"Marley was dead: to begin with": "STAVE ONE.", "When Scrooge awoke, it was so dark": "STAVE TWO.",
                     "Awaking in the middle of a prodigiously tough snore": "STAVE THREE.",
                     "The Phantom slowly, gravely, silently": "STAVE FOUR.",
                     "Scrooge was better than his word": "STAVE FIVE."}


def test_only_base_tables_are_read_read_only(lib, monkeypatch):
    seen, uris, real = [], [], appdb._connect

    def traced(path):
        conn = real(path)
        uris.append(appdb.uri(path))
        conn.set_trace_callback(seen.append)
        return conn

    monkeypatch.setattr(appdb, "_connect", traced)
    before = fx.hash_tree(lib.root)
    documents(source(lib.root))
    assert fx.hash_tree(lib.root) == before
    assert uris and all(u.endswith("?mode=ro") and "immutable" not in u for u in uris)
    assert any("books_text" in sql for sql in seen) and not [
        sql for sql in seen if any(w in sql for w in (" meta", "tag_browser", "books_fts"))]
    assert not [sql for sql in seen if sql.split()[0].upper() in ("INSERT", "UPDATE", "DELETE", "CREATE", "VACUUM")]


def test_a_book_deleted_between_scan_and_load_is_gone(lib):
    src = source(lib.root)
    src.scan()
    fx.delete_book(lib, 3)
    [gone, kept] = src.load(["book/3", "book/2"])
    assert gone.gone and kept.parse().title == "Война и мир"


def test_cli_and_seed_key(lib, tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(yaml.safe_dump({"calibre_libraries": [str(lib.root)]}))
    monkeypatch.setenv("LOCAL_RAG_HOME", str(home))
    monkeypatch.delenv("LOCAL_RAG_CONFIG", raising=False)
    [src] = load_collections(Paths.from_env())["calibre"].sources
    assert src.type == "calibre" and src.libraries == (lib.root,)
    r = CliRunner().invoke(cli, ["index", "calibre", "--help"])
    assert r.exit_code == 0 and "--library" in r.output


# -- a library made by calibre itself ------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("calibredb") is None, reason="calibre is not installed (apt-get install calibre)")
def test_a_library_made_by_calibredb(tmp_path):
    root = fx.calibredb_library(tmp_path / "Real Library", tmp_path / "work")
    with sqlite3.connect(root / "metadata.db") as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] >= 21
    conn.close()
    before = fx.hash_tree(root)
    src = source(root)
    assert set(src.scan().items) == {"book/1", "book/2", "book/3", "book/4"}
    docs = {k: doc for k, (_, doc) in documents(src, ["book/1", "book/2", "book/3", "book/4"]).items()}
    assert fx.hash_tree(root) == before
    tidal = docs["book/1"]
    assert tidal.author == "Zoë Brandt & Ann Lee" and tidal.tags == ("Engineering", "Oceans")
    assert {k: tidal.metadata[k] for k in ("series", "series_index", "rating", "publisher", "isbn", "#shelf")} == {
        "series": "Ocean Power", "series_index": 1.5, "rating": 3.5, "publisher": "Harbor Press",
        "isbn": "9780306406157", "#shelf": ["Workshop", "Favourites"]}
    assert "goodreads:12345" in tidal.metadata["identifiers"] and tidal.metadata["text"] == "EPUB"
    assert "Barnacle fouling" in text(tidal) and "A practical guide" in tidal.sections[0].text
    assert [s.page for s in docs["book/2"].sections[1:]] == [1, 2] and docs["book/2"].author == "Carol Díaz"
    war = docs["book/3"]  # only an AZW3: its text is what calibre's full-text index extracted
    assert war.title == "Война и мир" and war.metadata["text"] == "calibre full-text index (AZW3)"
    assert "battle of Borodino" in text(war) and war.metadata["formats"] == ["AZW3"]
    assert docs["book/4"].metadata["text"] == "metadata only" and docs["book/4"].author == "Dan Wu"


# -- end to end ----------------------------------------------------------------------------------------------


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = tmp_path / "home"
    h.mkdir()
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "garden.md").write_text("# Garden\n\nThe rooftop orchids need watering every Friday evening.\n")
    config = {"collections": {"notes": {"sources": [{"type": "project", "paths": [str(notes)]}]}}}
    (h / "config.yaml").write_text(yaml.safe_dump(config))
    monkeypatch.setenv("LOCAL_RAG_HOME", str(h))
    monkeypatch.setenv("DAGSTER_HOME", str(h / "dagster"))
    monkeypatch.delenv("LOCAL_RAG_DB", raising=False)
    monkeypatch.delenv("LOCAL_RAG_CONFIG", raising=False)
    yield Paths.from_env()
    resources.close_all()


def search(query: str, **filters) -> list:
    engine = SearchEngine(resources.RagResource().store(), resources.RagResource().embedder())
    return engine.search(SearchRequest(query, filters=Filters(**filters))).hits


def test_index_and_search_while_calibre_writes(home, tmp_path):
    lib = fx.build(tmp_path / "Calibre Library", wal=True)
    r = CliRunner().invoke(cli, ["index", "calibre", "--library", str(lib.root)], catch_exceptions=False)
    assert r.exit_code == 0, r.output  # registers the collection `calibre`; the app is not running yet
    fx.delete_book(lib, 9)
    app = fx.AppWriter(lib)  # a book only in the -wal, and an open write transaction
    try:
        before = fx.hash_tree(lib.root)
        [summary, _] = runs.index_collections(home, ["calibre", "notes"])
        assert fx.hash_tree(lib.root) == before  # every file byte for byte, -wal and -shm included
    finally:
        app.close()
    assert summary.outcomes == {"indexed": 1, "deleted": 1} and not summary.failures and not summary.unavailable
    store = resources.RagResource().store()
    keys = set(reads.item_states(store, "calibre"))
    assert keys == set(fx.KEYS) - {"book/9"} | {"book/20"}  # committed in the WAL: yes; uncommitted: no
    assert set(dg.DagsterInstance.get().get_dynamic_partitions("calibre_items")) == keys

    [hit] = search("barnacle fouling on the rotor blades")[:1]  # a short book: About and chapters share a chunk
    assert (hit.key, hit.collection) == ("book/1", "calibre") and "# Turbines\n\nBarnacle fouling" in hit.text
    assert hit.uri.endswith(".epub") and hit.metadata["series"] == "Ocean Power"
    [hit] = search("lighthouse keeper logbook trawler")[:1]
    assert (hit.key, hit.page) == ("book/3", 2)
    assert {h.key for h in search("tidal turbines guide", author="ann lee")} <= {"book/1", "book/11"}
    assert {h.key for h in search("guide", author="zoë brandt")} == {"book/1"}
    assert {h.key for h in search("war and peace", participants=("Толстой",))} == {"book/2"}
    in_2019 = search("turbines", date_from=fx.unix("2019-01-01T00:00:00"), date_to=fx.unix("2019-12-31T23:59:59"),
                     include_undated=False)
    assert {h.key for h in in_2019} == {"book/1"}
    [atlas] = search("atlas of forgotten islands coral reefs")[:1]
    assert atlas.key == "book/4" and atlas.metadata["text"] == "metadata only"
    assert search("falconer peregrine moor")[0].key == "book/8"
    assert search("greenhouse orchids", collections=("calibre",))[0].key == "book/20"
    assert {h.collection for h in search("orchids", collections=("notes",))} == {"notes"}
    for absent in ("zeppelin", "walrus", "marmalade", "ferret", "sundials"):
        assert not [h for h in search(absent) if absent in h.text.lower()], absent


def test_unreadable_library_keeps_what_was_indexed(home, lib):
    config = yaml.safe_load(home.config.read_text())
    config["collections"]["calibre"] = {"sources": [{"type": "calibre", "libraries": [str(lib.root)]}]}
    home.config.write_text(yaml.safe_dump(config))
    [first] = runs.index_collections(home, ["calibre"])
    assert first.outcomes == {"indexed": len(fx.KEYS)}
    lib.db.write_bytes(b"garbage" * 1000)
    [summary] = runs.index_collections(home, ["calibre"])
    assert "not a readable SQLite database" in summary.unavailable["calibre"] and summary.outcomes == {}
    lib.root.rename(lib.root.with_name("moved away"))
    [summary] = runs.index_collections(home, ["calibre"])
    assert "does not exist" in summary.unavailable["calibre"]
    assert set(reads.item_states(resources.RagResource().store(), "calibre")) == set(fx.KEYS)
