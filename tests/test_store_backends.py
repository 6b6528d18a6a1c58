"""The store and hybrid search on both backends: rag.db (SQLite) and the PostgreSQL store (a real server with
pgvector, tests/postgres_server.py). The same writes, filters and fusion must give the same answers."""

from __future__ import annotations

import threading
import uuid

import numpy as np
import pytest
from conftest import add_doc
from fakes import HashEmbedder
from postgres_server import fresh_database
from test_search_filters import fill

from rag_search.embedders.cached import embed_texts
from rag_search.errors import ConfigError, EmbedderMismatch, NotFound, StoreError
from rag_search.records import Chunk, ItemRef
from rag_search.retrieval import Filters, SearchRequest, parse_date
from rag_search.retrieval.pg import vector as pg_vector
from rag_search.retrieval import vector as vector_mod
from rag_search.retrieval import search_engine
from rag_search.store import open_store, reads, writes

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def new_location(backend: str, tmp_path, request) -> str:
    if backend == "sqlite":
        return str(tmp_path / "rag.db")
    url = request.getfixturevalue("postgres_url")
    return fresh_database(url, f"t_{uuid.uuid4().hex[:12]}")


@pytest.fixture(params=BACKENDS)
def any_store(request, tmp_path):
    store = open_store(new_location(request.param, tmp_path, request))
    yield store
    store.close()


@pytest.fixture
def add(any_store, fake_embedder):
    def _add(collection, key, text, **kw):
        add_doc(any_store, fake_embedder, collection, key, text, **kw)

    return _add


def counts(store) -> dict[str, int]:
    q = lambda sql: store.conn.execute(sql).fetchone()[0]  # noqa: E731
    whole = "item_docs" if store.postgres else "items_fts_docsize"
    return {"items": q("SELECT count(*) FROM items"), "chunks": q("SELECT count(*) FROM chunks"),
            "whole": q(f"SELECT count(*) FROM {whole}"), "vec": q("SELECT count(*) FROM chunk_vec"),
            "facets": q("SELECT count(*) FROM chunk_facets"), "names": q("SELECT count(*) FROM item_names")}


def keys(engine, query, **kw) -> list[str]:
    return [h.key for h in engine.search(SearchRequest(query, **kw)).hits]


# -- writes ---------------------------------------------------------------------------------------------------------

def test_item_round_trip_keeps_every_field(any_store, add):
    add("notes", "a.md", "alpha beta", ts=1700000000, author="Ann", participants=("Bob",), tags=("x/y",),
        metadata={"area": "work", "n": 3}, heading_path=("H1", "H2"), page=4)
    row = any_store.conn.execute(
        "SELECT title, text, ts, author, participants, tags, metadata, heading_path, page FROM chunks").fetchone()
    assert tuple(row) == ("a.md", "alpha beta", 1700000000, "Ann", '["Bob"]', '["x/y"]', '{"area":"work","n":3}',
                          '["H1","H2"]', 4)
    facets = set(any_store.conn.execute("SELECT name, value FROM chunk_facets").fetchall())
    assert facets == {("tag", "x/y"), ("participant", "Bob"), ("meta.area", "work"), ("meta.n", "3")}
    item = any_store.conn.execute("SELECT status, size, sha256, indexed_at IS NOT NULL FROM items").fetchone()
    assert tuple(item) == ("indexed", len("alpha beta"), "x", True)


def test_replacing_an_item_replaces_its_rows_and_search_sees_it(any_store, add, fake_embedder):
    engine = search_engine(any_store, fake_embedder)
    add("notes", "a.md", "first version")
    assert keys(engine, "first", mode="keyword") == ["a.md"]
    add("notes", "a.md", "second version")
    assert counts(any_store) == {"items": 1, "chunks": 1, "whole": 1, "vec": 1, "facets": 0, "names": 2}
    assert keys(engine, "first", mode="keyword") == []
    assert keys(engine, "second") == ["a.md"]


def test_deleting_items_and_collections_removes_every_derived_row(any_store, add, fake_embedder):
    add("notes", "a.md", "one", tags=("t",))
    add("notes", "b.md", "two", tags=("t",))
    add("other", "c.md", "three", tags=("t",))
    assert writes.delete_items(any_store, "notes", ["a.md", "missing.md"]) == 1
    assert counts(any_store) == {"items": 2, "chunks": 2, "whole": 2, "vec": 2, "facets": 2, "names": 4}
    assert writes.delete_collection(any_store, "notes") == 1
    assert counts(any_store) == {"items": 1, "chunks": 1, "whole": 1, "vec": 1, "facets": 1, "names": 2}
    assert keys(search_engine(any_store, fake_embedder), "two", mode="keyword") == []
    with pytest.raises(NotFound, match="Known collections: other"):
        writes.delete_collection(any_store, "notes")


def test_a_failed_write_leaves_the_previous_version_intact(any_store, add, fake_embedder):
    add("notes", "a.md", "original text")
    before = counts(any_store)
    ref = ItemRef("notes", "a.md", "/data/notes/a.md", "markdown")
    chunks = [Chunk(0, "new one"), Chunk(0, "duplicate index violates UNIQUE(item_id, idx)")]
    vecs = fake_embedder.embed_documents([c.text for c in chunks])
    with pytest.raises(Exception):
        writes.replace_item(any_store, ref, None, "a", chunks, vecs)
    assert counts(any_store) == before
    assert any_store.conn.execute("SELECT text FROM chunks").fetchone()[0] == "original text"
    with pytest.raises(StoreError, match="nothing was written"):
        writes.replace_item(any_store, ref, None, "a", chunks[:1], vecs)
    add("notes", "b.md", "the store still takes writes")
    assert counts(any_store)["items"] == 2


def test_failures_are_recorded_and_cleared_by_a_good_write(any_store, add):
    writes.ensure_collection(any_store, "notes")
    ref = ItemRef("notes", "bad.pdf", "/data/notes/bad.pdf", "pdf")
    writes.mark_failed(any_store, ref, "parse", "PDF header missing")
    [failure] = reads.failures(any_store)
    assert (failure.key, failure.error_kind, failure.message) == ("bad.pdf", "parse", "PDF header missing")
    status = reads.status(any_store)
    assert status["totals"]["failed"] == 1 and status["pending_migrations"] == [] and status["db_bytes"] > 0
    add("notes", "bad.pdf", "fixed content", source_type="pdf")
    assert reads.failures(any_store) == []
    assert reads.item_states(any_store, "notes")["bad.pdf"].status == "indexed"


def test_embedding_cache_embeds_each_text_once(any_store):
    emb = HashEmbedder()
    vecs1, n1 = embed_texts(any_store, emb, ["a b", "c d", "a b"])
    vecs2, n2 = embed_texts(any_store, emb, ["c d", "a b", "e f"])
    assert (n1, n2) == (2, 1)
    np.testing.assert_allclose(vecs1[0], vecs2[1])


def test_opening_with_another_embedder_is_refused_with_the_fix(any_store, add):
    add("notes", "a.md", "text")
    other = HashEmbedder(dimensions=32, name="other")
    with pytest.raises(EmbedderMismatch, match="local-rag reembed"):
        any_store.bind_embedder(other.id, other.dimensions)


def test_collection_summary_counts(any_store, add):
    add("notes", "a.md", "one")
    add("notes", "b.pdf", "two", source_type="pdf")
    info = reads.collection_info(any_store, "notes")
    assert (info["items"], info["chunks"], info["items_by_source_type"]) == (2, 2, {"markdown": 1, "pdf": 1})


# -- hybrid search with filters (the corpus of test_search_filters.py) ----------------------------------------------

QUERY = "apple banana cherry orchard harvest"
JAN_2020, JUN_2023 = parse_date("2020-01-15"), parse_date("2023-06-01")
NEEDLES = {
    "tag": dict(tags=("projects/rare",)),
    "author": dict(author="Zelda Zimmer <zelda@example.org>"),
    "chat-author": dict(participants=("Xavier Xu <slack:U0XAVIER>",), metadata={"authors": ["Yorick Yates"]}),
    "participant": dict(participants=("Quentin Quux",)),
    "date": dict(ts=JAN_2020),
    "meta": dict(metadata={"area": "archive"}),
    "type": dict(source_type="pdf"),
}
FILTERS = {
    "tag": Filters(tags=("#projects",)),
    "author": Filters(author="ZELDA"),  # any case, as SQLite's LIKE
    "chat-author": Filters(author="yorick"),
    "participant": Filters(participants=("quentin",)),
    "date": Filters(date_to=parse_date("2020-12-31", end=True), include_undated=False),
    "meta": Filters(metadata={"area": ["archive", "nothing"]}),
    "type": Filters(source_types=("pdf",)),
    "path": Filters(path_prefix="/data/other/needles/"),
    "collection": Filters(collections=("other",)),
}


@pytest.fixture(scope="module", params=BACKENDS)
def corpus(request, tmp_path_factory):
    """400 decoys share every query word; each needle one: a filter must act inside each retriever."""
    store = open_store(new_location(request.param, tmp_path_factory.mktemp("filters"), request))
    fill(store, 400, NEEDLES)
    yield store
    store.close()


@pytest.fixture(params=["exact", "binary+rescore"])
def engine(request, corpus, fake_embedder, monkeypatch):
    if request.param == "binary+rescore":
        monkeypatch.setattr(vector_mod, "EXACT_SCOPE_LIMIT", 0)
        monkeypatch.setattr(pg_vector, "EXACT_SCOPE_LIMIT", 0)
    return search_engine(corpus, fake_embedder)


@pytest.mark.parametrize("mode", ["hybrid", "keyword", "semantic"])
@pytest.mark.parametrize("name", sorted(FILTERS))
def test_filter_finds_matches_outside_the_unfiltered_top_k(engine, name, mode):
    assert all("decoy" in k for k in keys(engine, QUERY, top_k=5, mode=mode))
    expected = "needles/path.md" if name in ("path", "collection") else f"needles/{name}.md"
    assert keys(engine, QUERY, top_k=5, mode=mode, filters=FILTERS[name]) == [expected]


def test_binary_candidates_rescored_rank_like_exact_search(corpus, fake_embedder, monkeypatch):
    query = SearchRequest("cherry pie notes for tag", mode="semantic")
    exact = search_engine(corpus, fake_embedder).search(query)
    monkeypatch.setattr(vector_mod, "EXACT_SCOPE_LIMIT", 0)
    monkeypatch.setattr(pg_vector, "EXACT_SCOPE_LIMIT", 0)
    binary = search_engine(corpus, fake_embedder).search(query)
    assert (exact.vector_plan, binary.vector_plan) == ("exact", "binary+rescore")
    assert binary.hits[0].key == exact.hits[0].key == "needles/tag.md"


def test_unknown_collection_lists_the_known_ones(corpus, fake_embedder):
    from rag_search.errors import QueryError

    with pytest.raises(QueryError, match="Known collections: fruit, other"):
        search_engine(corpus, fake_embedder).search(SearchRequest("x", filters=Filters(collections=("nope",))))


def test_date_tags_and_several_filters(any_store, add, fake_embedder):
    add("n", "old.md", "meeting garden", ts=JAN_2020, tags=("home/garden",), author="Ann")
    add("n", "new.md", "meeting garden", ts=JUN_2023, tags=("homework",), author="Bob")
    add("n", "undated.md", "meeting garden", tags=("home",), author="Ann")
    engine = search_engine(any_store, fake_embedder)
    after_2021 = Filters(date_from=parse_date("2021"))
    assert set(keys(engine, "meeting", filters=after_2021)) == {"new.md", "undated.md"}
    strict = Filters(date_from=parse_date("2021"), include_undated=False)
    assert keys(engine, "meeting", filters=strict) == ["new.md"]
    assert set(keys(engine, "garden", filters=Filters(tags=("home",)))) == {"old.md", "undated.md"}
    assert keys(engine, "garden", filters=Filters(tags=("home",), author="bob")) == []
    assert keys(engine, "garden", filters=Filters(tags=("home",), date_to=parse_date("2021"),
                                                  include_undated=False)) == ["old.md"]


def test_names_and_exact_identifiers_lead(any_store, add, fake_embedder):
    add("n", "tags.md", "how notes get organised with labels", title="Tags")
    add("n", "other.md", "tags tags tags everywhere: tags on notes, tags in lists")
    add("n", "inv.md", "the invoice INV-2024-0042 was paid")
    add("n", "inv2.md", "invoices are paid monthly")
    engine = search_engine(any_store, fake_embedder)
    assert keys(engine, "tags")[0] == "tags.md"
    result = engine.search(SearchRequest("INV-2024-0042 paid"))
    assert result.hits[0].key == "inv.md"


# -- the PostgreSQL store only ----------------------------------------------------------------------------------------

@pytest.mark.postgres
def test_a_long_lived_engine_sees_another_writers_commits(postgres_url, fake_embedder):
    """Counts are cached per store generation: a write by another connection (another indexing process) is seen."""
    url = fresh_database(postgres_url, "t_two_writers")
    reader, writer = open_store(url), open_store(url)
    try:
        engine = search_engine(reader, fake_embedder)
        assert keys(engine, "rivers") == []  # an empty index: no chunks in scope
        add_doc(writer, fake_embedder, "notes", "a.md", "first note about rivers")
        assert keys(engine, "rivers") == ["a.md"]
        add_doc(writer, fake_embedder, "notes", "b.md", "second note about rivers and lakes")
        assert set(keys(engine, "rivers")) == {"a.md", "b.md"}
        writes.delete_items(writer, "notes", ["a.md"])
        assert keys(engine, "rivers") == ["b.md"]
    finally:
        reader.close()
        writer.close()


@pytest.mark.postgres
def test_several_processes_write_items_at_once(postgres_url, fake_embedder):
    """Two stores (connections) write different items concurrently; every item lands once, with its vector."""
    url = fresh_database(postgres_url, "t_parallel")
    open_store(url).close()
    errors = []

    def write(part: int) -> None:
        store = open_store(url)
        try:
            for n in range(15):
                add_doc(store, HashEmbedder(), f"c{part}", f"{n}.md", f"note {n} of writer {part}")
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            store.close()

    threads = [threading.Thread(target=write, args=(p,)) for p in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    store = open_store(url)
    try:
        assert counts(store)["items"] == counts(store)["vec"] == 30
    finally:
        store.close()


@pytest.mark.postgres
def test_an_unreachable_server_is_a_store_error_that_says_what_to_check():
    with pytest.raises(StoreError, match=r"(?s)Cannot connect .*rag:\*\*\*@127.0.0.1:1/.*Check that the server is running"):
        open_store("postgresql://rag:secret@127.0.0.1:1/rag")


def test_the_store_setting_takes_only_a_postgresql_url(tmp_path):
    from rag_search.config import load_settings

    config = tmp_path / "config.yaml"
    config.write_text("store: mysql://db/rag\n")
    with pytest.raises(ConfigError, match="store: .*postgresql://"):
        load_settings(config)
    config.write_text("store: postgresql://rag@db.local/rag\n")
    assert load_settings(config).store == "postgresql://rag@db.local/rag"


def test_what_the_mcp_tools_read(any_store, add):
    """Stats, recent items, a document, related items, metadata and tags: the reads behind the MCP tools."""
    from rag_search.retrieval.related import related_items

    add("notes", "a.md", "rivers and lakes of europe", tags=("geo",), metadata={"area": "travel"}, ts=4_000_000_000)
    add("notes", "b.md", "lakes and rivers in spring", tags=("geo",))
    add("notes", "c.md", "sourdough bread")
    [stats] = reads.knowledge_stats(any_store)
    assert (stats["items"], stats["indexed"], stats["failed"], stats["chunks"]) == (3, 3, 0, 3)
    assert [r["key"] for r in reads.recent_items(any_store, days=1)][0] == "a.md"  # dated in the future: first
    doc = reads.get_document(any_store, "b.md")
    assert (doc["key"], doc["chunks"]) == ("b.md", 1) and "spring" in doc["text"]
    item_a = reads.find_item(any_store, "a.md")[0]
    assert related_items(any_store, item_a)["similar"][0]["key"] == "b.md"
    assert reads.metadata_values(any_store) == {"notes": {"area": ["travel"]}}
    assert reads.tag_counts(any_store) == [("geo", 2)]


def test_reembed_switches_the_index_to_another_embedder(any_store, add):
    from rag_search.embedders.reembed import reembed

    add("notes", "a.md", "rivers and lakes")
    add("notes", "b.md", "sourdough bread")
    other = HashEmbedder(dimensions=32, name="other")
    assert reembed(any_store, other)["vectors"] == 2
    assert any_store.embedder == (other.id, 32)
    assert keys(search_engine(any_store, other), "sourdough", mode="semantic")[0] == "b.md"
