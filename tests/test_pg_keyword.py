"""Keyword search on the PostgreSQL store ranks a bounded set of rows (pg_keyword.ROW_BUDGET) chosen so that the
best hits are among them, and keeps rag.db's budgets in hybrid search (keyword.search: an AND of common words
over RANK_BUDGET rows leaves the query to the vector side)."""

from __future__ import annotations

import uuid

import pytest
from conftest import add_doc
from postgres_server import fresh_database

from rag_search.retrieval import Filters, SearchRequest, keyword
from rag_search.retrieval.pg import keyword as pg_keyword
from rag_search.retrieval import search_engine
from rag_search.retrieval.filters import build_where
from rag_search.retrieval.keyword import parse_terms
from rag_search.store import open_store

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def river_store(postgres_url):
    """60 notes say only "river" (written first: the GIN index returns them first), 3 say "river delta", 4 "delta"."""
    from fakes import HashEmbedder

    store = open_store(fresh_database(postgres_url, f"t_{uuid.uuid4().hex[:12]}"))
    emb = HashEmbedder()
    for n in range(60):
        add_doc(store, emb, "notes", f"river{n:02}.md", f"the river runs past mill number {n}")
    for n in range(3):
        add_doc(store, emb, "notes", f"both{n}.md", f"where the river delta meets the sea, part {n}")
    for n in range(4):
        add_doc(store, emb, "notes", f"delta{n}.md", f"a delta of sand, part {n}")
    yield store
    store.close()


@pytest.mark.parametrize("table", [pg_keyword.CHUNKS, pg_keyword.ITEMS])
def test_only_the_row_budget_is_ranked_and_the_best_rows_are_in_it(river_store, table, monkeypatch):
    conn, terms, where = river_store.conn, parse_terms("river delta"), build_where(Filters())
    n = conn.execute("SELECT count(*) FROM items").fetchone()[0]
    unbounded = pg_keyword.search(conn, terms, where, 50, n, {}, table)
    monkeypatch.setattr(pg_keyword, "ROW_BUDGET", 10)
    bounded = pg_keyword.search(conn, terms, where, 50, n, {}, table)
    assert len(unbounded.ids) == 50  # 67 rows match
    # Ten candidates (duplicates count): the 3 rows with both words, then the rarer word's 7 rows; no "river" row
    # alone. They are the unbounded ranking's best 7, in the same order with the same scores.
    assert len(bounded.ids) == 7
    assert (bounded.ids, bounded.scores) == (unbounded.ids[:7], unbounded.scores[:7])


BACKENDS = ["sqlite", "postgres"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_hybrid_leaves_an_and_of_common_words_over_the_budget_to_the_vector_side(backend, tmp_path, request,
                                                                                 fake_embedder, monkeypatch):
    """rag.db and the PostgreSQL store decide alike: scaled down, 5 rows make a word common, 8 rows a budget."""
    for module in (keyword, pg_keyword):
        monkeypatch.setattr(module, "COMMON_MIN_DOCS", 5)
        monkeypatch.setattr(module, "RANK_BUDGET", 8)
    location = str(tmp_path / "rag.db") if backend == "sqlite" else fresh_database(
        request.getfixturevalue("postgres_url"), f"t_{uuid.uuid4().hex[:12]}")
    with open_store(location) as store:
        for n in range(40):
            add_doc(store, fake_embedder, "notes", f"n{n:02}.md", f"alpha beta note {n}")
        engine = search_engine(store, fake_embedder)
        hybrid = engine.search(SearchRequest("alpha beta", mode="hybrid"))
        assert (hybrid.keyword_expression, hybrid.keyword_dropped) == (None, ["alpha", "beta"])
        assert len(hybrid.hits) == 10  # the vector side answers
        ranked = engine.search(SearchRequest("alpha beta", mode="keyword"))
        assert ranked.keyword_expression is not None and len(ranked.hits) == 10  # keyword mode still ranks the AND


DOCS = {  # lengths and word counts on which ts_rank x IDF and BM25 disagree
    "short.md": "solar panels",
    "twice.md": "solar panels and more solar energy for the roof",
    "long.md": "solar " + " ".join(f"filler{i}" for i in range(80)),
    "long3.md": "solar solar solar " + " ".join(f"filler{i}" for i in range(80)),
    "panel.md": "the panels of the roof",
    "both.md": "panels on a roof, solar power, wind power and batteries in the garage of the house",
    "wind.md": "wind turbines and wind farms",
}
PHRASES = {"kube.md": "kube-proxy crashed", "logs.md": "the logs of the roof", "logs2.md": "more logs from the farm",
           "logs3.md": "logs and logs"}


@pytest.mark.parametrize("docs, query", [(DOCS, "solar"), (DOCS, "solar panels"), (DOCS, "solar wind"),
                                         (PHRASES, "kube-proxy logs")])
def test_chunks_rank_in_rag_db_bm25_order(docs, query, tmp_path, postgres_url, fake_embedder):
    """The PostgreSQL store's BM25 (counts from ts_rank, lengths from tsvector sizes) orders rows as FTS5's bm25():
    a word twice in a short row before once, a long row after a short one, the rarer word first; a phrase's match
    counts (ts_rank's value for a phrase is no count of it)."""
    order = {}
    for name, location in (("sqlite", str(tmp_path / "rag.db")),
                           ("postgres", fresh_database(postgres_url, f"t_{uuid.uuid4().hex[:12]}"))):
        with open_store(location) as store:
            for key, text in docs.items():
                add_doc(store, fake_embedder, "n", key, text, title="" if key == "short.md" else key[:-3])
            module = keyword if name == "sqlite" else pg_keyword
            run = module.search(store.conn, parse_terms(query), build_where(Filters()), 10, len(docs), {},
                                module.CHUNKS)
            keys = dict(store.conn.execute("SELECT c.id, i.key FROM chunks c JOIN items i ON i.id = c.item_id"))
            order[name] = [keys[i] for i in run.ids]
    assert order["postgres"] == order["sqlite"]


def test_a_server_engine_answers_as_the_one_shot_engine_with_work_beside(river_store, fake_embedder, monkeypatch):
    """A long-running engine on PostgreSQL runs its vector side (hybrid) and its whole-item ranking (keyword) on a
    second connection at once with the rest: the same hits as one connection, in every mode, filtered or not."""
    from rag_search.retrieval import vector

    monkeypatch.setattr(vector, "EXACT_SCOPE_LIMIT", 10)  # the binary candidates' path too
    one = search_engine(river_store, fake_embedder)
    server = search_engine(river_store, fake_embedder, bits_in_ram=True)
    beside = []
    submit = server.second.submit
    server.second.submit = lambda fn, *args: beside.append(fn) or submit(fn, *args)
    for mode in ("hybrid", "keyword", "semantic"):
        for query in ("river delta", "sea", "mill number 7"):
            for filters in (Filters(), Filters(collections=("notes",))):
                request = SearchRequest(query, mode=mode, filters=filters)
                want = [(h.chunk_id, h.score) for h in one.search(request).hits]
                assert [(h.chunk_id, h.score) for h in server.search(request).hits] == want, (mode, query)
    assert len(beside) == 12 and server.second.connection is not None  # 6 hybrid vector sides, 6 item rankings
