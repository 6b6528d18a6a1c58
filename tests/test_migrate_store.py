"""`local-rag migrate-store`: a rag.db copied into a PostgreSQL store answers the same, vectors copied not re-embedded."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import add_doc
from fakes import HashEmbedder
from postgres_server import fresh_database

from rag_search.cli.main import cli
from rag_search.errors import StoreError
from rag_search.store.item_writer import ParsedItem, write_items
from rag_search.records import Chunk, Fingerprint, ItemRef
from rag_search.retrieval import Filters, SearchRequest
from rag_search.retrieval import search_engine
from rag_search.store import Store, open_store, writes
from rag_search.store.pg.migrate import migrate_store
from rag_search.store.vectors import from_blob

pytestmark = pytest.mark.postgres
QUERIES = [("sourdough bread", Filters()), ("kube-proxy", Filters()), ("meeting", Filters(tags=("work",))),
           ("notes", Filters(collections=("mail",))), ("river", Filters(author="ann"))]


def build_rag_db(path, embedder) -> None:
    store = Store.open(path)
    add_doc(store, embedder, "notes", "bread.md", "baking sourdough bread at home", tags=("food",))
    add_doc(store, embedder, "notes", "k8s.md", "kubernetes kube-proxy networking notes", tags=("work",),
            metadata={"area": "infra"})
    add_doc(store, embedder, "mail", "m1", "meeting notes about the river trip", source_type="email",
            author="Ann <ann@example.org>", tags=("work",), ts=1_700_000_000)
    writes.ensure_collection(store, "notes")
    ref = ItemRef("notes", "long.md", "/data/notes/long.md", "markdown")
    chunks = [Chunk(n, f"section {n} of a long note about the river delta") for n in range(3)]
    write_items(store, embedder, [ParsedItem(ref, Fingerprint(9, 1, "y"), "Long", chunks, links=("bread",),
                                             text="# Long\nthe river delta")])
    writes.mark_failed(store, ItemRef("notes", "bad.pdf", "/data/notes/bad.pdf", "pdf"), "parse", "no PDF header")
    writes.record_scan(store, "notes", "files", "folder", 5, 1, 0.2)
    store.close()


def table_counts(conn) -> dict[str, int]:
    tables = ("collections", "items", "chunks", "chunk_facets", "embedding_cache", "item_links", "item_texts",
              "source_scans", "item_names", "chunk_vec")
    return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}


def test_migrated_store_holds_every_row_and_answers_the_same(tmp_path, postgres_url):
    embedder = HashEmbedder()
    build_rag_db(tmp_path / "rag.db", embedder)
    url = fresh_database(postgres_url, "t_migrate")
    report = migrate_store(tmp_path / "rag.db", url)
    sqlite, pg = Store.open(tmp_path / "rag.db"), open_store(url)
    try:
        assert table_counts(pg.conn) == table_counts(sqlite.conn)
        assert report.rows["chunk_vec"] == 6 and report.rows["items"] == 5
        vec = {cid: from_blob(v) for cid, v in sqlite.conn.execute("SELECT chunk_id, embedding FROM chunk_vec")}
        copied = dict(pg.conn.execute("SELECT chunk_id, embedding FROM chunk_vec").fetchall())
        assert set(copied) == set(vec)
        for cid, v in vec.items():
            np.testing.assert_array_equal(copied[cid], v)  # float32 exactly: nothing re-embedded or rounded
        assert pg.embedder == sqlite.embedder
        for query, filters in QUERIES:
            on_sqlite = [(h.key, h.item_id) for h in search_engine(sqlite, embedder).search(
                SearchRequest(query, filters=filters)).hits]
            on_pg = [(h.key, h.item_id) for h in search_engine(pg, embedder).search(
                SearchRequest(query, filters=filters)).hits]
            assert on_pg == on_sqlite, query
        calls = len(embedder.calls)
        add_doc(pg, embedder, "notes", "new.md", "a new note after the move")  # ids continue after the copied ones
        assert len(embedder.calls) == calls + 1
        assert [h.key for h in search_engine(pg, embedder).search(SearchRequest("new note")).hits][0] == "new.md"
    finally:
        sqlite.close()
        pg.close()


def test_migrating_into_a_store_that_holds_data_is_refused_and_changes_nothing(tmp_path, postgres_url):
    build_rag_db(tmp_path / "rag.db", HashEmbedder())
    url = fresh_database(postgres_url, "t_migrate_twice")
    migrate_store(tmp_path / "rag.db", url)
    with pytest.raises(StoreError, match="not empty .*create a new one"):
        migrate_store(tmp_path / "rag.db", url)
    with open_store(url) as pg:
        assert table_counts(pg.conn)["items"] == 5
    with pytest.raises(StoreError, match="No index at .*--from PATH"):
        migrate_store(tmp_path / "missing.db", url)


def test_migrate_store_command_then_search_through_the_configured_store(tmp_path, postgres_url):
    home = tmp_path / "home"
    home.mkdir()
    build_rag_db(home / "rag.db", HashEmbedder())
    url = fresh_database(postgres_url, "t_migrate_cli")
    env = {"LOCAL_RAG_HOME": str(home)}
    result = CliRunner().invoke(cli, ["migrate-store", "--to", url], env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "5 items, 6 chunks, 6 chunk_vec" in result.output and "store: postgresql://postgres:***@" in result.output
    (home / "config.yaml").write_text(f"store: {url}\n")
    result = CliRunner().invoke(cli, ["collections", "list"], env=env, catch_exceptions=False)
    assert result.exit_code == 0 and "mail" in result.output and "notes" in result.output
    result = CliRunner().invoke(cli, ["migrate-store"], env=env)
    assert result.exit_code == 3 and "not empty" in result.output
    result = CliRunner().invoke(cli, ["migrate-store"], env={"LOCAL_RAG_HOME": str(tmp_path / "empty")})
    assert result.exit_code == 2 and "--to postgresql://" in result.output
