"""A PostgreSQL server holds the index's most common words in RAM (pg/common_words.py): an unfiltered AND or OR of
them is counted and ranked there, with the ranking statement's ids and scores over every matching row, and no
statement reads a tsvector for it; after a write searches go to the statements until the words are read again.

Scaled down as test_pg_keyword.py: 5 rows make a word common, 8 rows a ranking budget, and words in more than one
row are held. Work is counted as statements (no timings)."""

from __future__ import annotations

import uuid

import pytest
from conftest import add_doc
from postgres_server import fresh_database

from rag_search.retrieval import Filters, SearchRequest, search_engine
from rag_search.retrieval.filters import build_where
from rag_search.retrieval.keyword import parse_terms
from rag_search.retrieval.pg import keyword as pg_keyword
from rag_search.store import open_store
from rag_search.store.pg.connection import PgConnection

pytestmark = pytest.mark.postgres

RANKING, COUNTING = "WITH cand AS", "SELECT count(*) FROM (SELECT 1 FROM"


@pytest.fixture(scope="module")
def store(postgres_url):
    """40 notes: "alpha" in all (in the title of every fifth), "beta" in 30 (up to three times), "gamma" in 12,
    "delta" in 3; texts of different lengths; "rare" in one."""
    from fakes import HashEmbedder

    store = open_store(fresh_database(postgres_url, f"t_{uuid.uuid4().hex[:12]}"))
    emb = HashEmbedder()
    for n in range(40):
        words = ["alpha"] + ["beta"] * (1 + n % 3) * (n < 30) + ["gamma"] * (n % 3 == 0) + ["delta"] * (n < 3)
        words += ["rare"] * (n == 7) + [f"filler{k}" for k in range(n % 7)]
        add_doc(store, emb, "notes", f"n{n:02}.md", " ".join(words) + f" note {n}",
                title=f"alpha report {n}" if n % 5 == 0 else f"note {n}", tags=["t1"] if n < 10 else [])
    store.conn.execute("ANALYZE chunks, item_docs")
    yield store
    store.close()


@pytest.fixture
def scaled(monkeypatch):
    monkeypatch.setattr(pg_keyword, "COMMON_MIN_DOCS", 5)
    monkeypatch.setattr(pg_keyword, "RANK_BUDGET", 8)


def _server(store, fake_embedder):
    """The engine `local-rag serve` runs, its common words read (every word in more than one row)."""
    engine = search_engine(store, fake_embedder, bits_in_ram=True)
    common = getattr(engine, "common_words", None)
    assert common is not None, "a server engine on PostgreSQL holds the index's common words"
    common.min_docs = 1
    assert common.wait(60)
    return engine


@pytest.fixture
def statements(monkeypatch):
    seen: list[str] = []
    execute = PgConnection.execute

    def logged(self, sql, params=()):
        seen.append(sql)
        return execute(self, sql, params)

    monkeypatch.setattr(PgConnection, "execute", logged)
    return seen


QUERIES = ["alpha", "beta", "alpha beta", "beta gamma", "gamma delta", "alpha beta gamma delta", "delta",
           "rare beta", '"alpha beta" gamma', "report delta", "delta nowhere", "nowhere"]  # rare, a phrase, a word
# in no row: read by a statement (_fetch)


@pytest.mark.parametrize("table", [pg_keyword.CHUNKS, pg_keyword.ITEMS])
def test_held_rankings_equal_the_statement_over_every_row(store, fake_embedder, scaled, table, monkeypatch):
    engine = _server(store, fake_embedder)
    conn, where = store.conn, build_where(Filters())
    n = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    for query in QUERIES:
        terms = parse_terms(query)
        monkeypatch.setattr(pg_keyword, "ROW_BUDGET", 5)
        held = pg_keyword.search(conn, terms, where, 30, n, {}, table, held=engine.common_words)
        monkeypatch.setattr(pg_keyword, "ROW_BUDGET", 10_000)
        with pg_keyword.index_scans(conn):
            unbounded = pg_keyword.search(conn, terms, where, 30, n, {}, table)
        assert held.expression == unbounded.expression, query
        assert (held.ids, held.scores) == (unbounded.ids, unbounded.scores), query  # equal floats, not close
        assert len(set(held.scores)) > 1 or len(held.ids) <= 1  # the counts and lengths tell rows apart


def test_a_server_ranks_and_counts_held_words_without_statements(store, fake_embedder, scaled, statements):
    engine = _server(store, fake_embedder)
    for mode in ("keyword", "hybrid"):
        for query in ("alpha beta", "beta gamma delta", "gamma"):
            engine.search(SearchRequest(query, mode=mode))  # stems learnt once
            statements.clear()
            result = engine.search(SearchRequest(query, mode=mode))
            assert result.hits
            assert not [s for s in statements if RANKING in s or COUNTING in s], (mode, query)


def test_a_new_word_is_counted_from_ram(store, fake_embedder, scaled, statements):
    engine = _server(store, fake_embedder)
    statements.clear()
    engine.search(SearchRequest("beta gamma", mode="keyword"))  # first seen: their rows counted in RAM
    assert not [s for s in statements if COUNTING in s]


def test_filtered_searches_go_to_the_statements(store, fake_embedder, scaled, statements):
    engine = _server(store, fake_embedder)
    statements.clear()
    engine.search(SearchRequest("alpha beta", mode="keyword", filters=Filters(tags=("t1",))))
    assert sum(RANKING in s for s in statements) >= 2  # chunks and items (AND, then OR), among the tag's rows


def test_a_rare_word_beside_held_ones_is_read_once_not_ranked_by_statement(store, fake_embedder, scaled,
                                                                          statements, monkeypatch):
    from rag_search.retrieval.pg import common_words

    engine = _server(store, fake_embedder)
    statements.clear()
    engine.search(SearchRequest("rare beta", mode="keyword"))  # "rare" is in one row: not held
    assert not [s for s in statements if RANKING in s]
    assert sum(s.startswith(("SELECT r.id,", "SELECT r.item_id,")) for s in statements) == 2
    statements.clear()
    engine.search(SearchRequest("rare beta", mode="keyword"))  # its rows are kept while the index is unchanged
    assert not [s for s in statements if RANKING in s or "SELECT r." in s]
    monkeypatch.setattr(common_words, "FETCH_ROWS", 0)  # in more rows than a statement should read: ranked by one
    statements.clear()
    engine.search(SearchRequest("rare gamma", mode="keyword"))
    assert sum(RANKING in s for s in statements) == 2


def test_after_a_write_the_statements_answer_until_the_words_are_read_again(postgres_url, fake_embedder, scaled,
                                                                           statements):
    with open_store(fresh_database(postgres_url, f"t_{uuid.uuid4().hex[:12]}")) as fresh:
        for n in range(12):
            add_doc(fresh, fake_embedder, "notes", f"n{n:02}.md", f"alpha beta note {n}")
        engine = _server(fresh, fake_embedder)
        common = engine.common_words
        assert common.reads == 1
        common.quiet = 3600.0  # while the index is being written, no re-read
        add_doc(fresh, fake_embedder, "notes", "new.md", "alpha beta gamma")
        statements.clear()
        engine.search(SearchRequest("alpha beta", mode="keyword"))
        assert sum(RANKING in s for s in statements) >= 2  # what is held is stale: the statements rank
        assert not common._loading and common.reads == 1
        common.quiet = 0.0
        assert common.wait(60) and common.reads == 2  # read once more, with the new note
        assert common.count(fresh.conn, pg_keyword.CHUNKS, parse_terms("alpha"), True) == 13
        statements.clear()
        engine.search(SearchRequest("alpha beta", mode="keyword"))
        assert not [s for s in statements if RANKING in s]


def test_a_failed_read_is_not_tried_again_by_every_search(store, fake_embedder, monkeypatch):
    from rag_search.retrieval.pg import common_words

    calls = []

    def failing(*args):
        calls.append(1)
        raise RuntimeError("the server went away")

    monkeypatch.setattr(common_words, "_read", failing)
    engine = search_engine(store, fake_embedder, bits_in_ram=True)
    common = engine.common_words
    assert not common.wait(1)  # the first read failed; searches go to the statements
    for _ in range(5):
        assert engine.search(SearchRequest("alpha beta", mode="keyword")).hits
    assert len(calls) == 1 and common.reads == 0
