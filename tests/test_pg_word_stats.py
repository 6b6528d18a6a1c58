"""The PostgreSQL keyword side tells common words from rare ones by the columns' statistics (pg/word_stats.py), not
by counting their rows, and keeps those statistics across writes; statements are planned for their parameters.

Scaled down as test_pg_keyword.py does: 5 rows make a word common. "alpha" is in all 40 notes, "beta" in 30,
"zeta" in 2. Work is counted as statements (no timings): which words a search counts, what it looks up."""

from __future__ import annotations

import uuid

import pytest
from conftest import add_doc
from postgres_server import fresh_database

from rag_search.retrieval import SearchRequest, search_engine
from rag_search.retrieval.pg import keyword as pg_keyword
from rag_search.store import open_store
from rag_search.store.pg.connection import PgConnection

pytestmark = pytest.mark.postgres


@pytest.fixture
def scaled(monkeypatch):
    monkeypatch.setattr(pg_keyword, "COMMON_MIN_DOCS", 5)
    monkeypatch.setattr(pg_keyword, "RANK_BUDGET", 8)


def _store(postgres_url, fake_embedder, analyze: bool):
    store = open_store(fresh_database(postgres_url, f"t_{uuid.uuid4().hex[:12]}"))
    for n in range(40):
        words = "alpha" + (" beta" if n < 30 else "") + (" zeta" if n < 2 else "")
        add_doc(store, fake_embedder, "notes", f"n{n:02}.md", f"{words} note {n}")
    if analyze:
        store.conn.execute("ANALYZE chunks, item_docs")
    return store


@pytest.fixture
def statements(monkeypatch):
    """Every statement's text and first parameter, as the store's connections send them."""
    seen: list[tuple[str, str]] = []
    execute = PgConnection.execute

    def logged(self, sql, params=()):
        seen.append((sql, str(params[0]) if params else ""))
        return execute(self, sql, params)

    monkeypatch.setattr(PgConnection, "execute", logged)
    return seen


def counted_words(seen: list[tuple[str, str]]) -> list[str]:
    """The tsquery texts that were counted (pg_keyword.count)."""
    return [p for sql, p in seen if sql.startswith("SELECT count(*) FROM (SELECT 1 FROM")]


def test_a_common_word_is_known_from_the_statistics_without_counting_its_rows(postgres_url, fake_embedder, scaled,
                                                                               statements):
    with _store(postgres_url, fake_embedder, analyze=True) as store:
        engine = search_engine(store, fake_embedder)
        statements.clear()
        result = engine.search(SearchRequest("alpha zeta", mode="hybrid"))
        assert result.keyword_dropped == ["alpha"]  # common, as a count would say: only "zeta" is ranked
        assert result.keyword_expression == "'zeta'"
        counted = counted_words(statements)
        assert "'alpha'" not in counted and "'zeta'" in counted  # the rare word's exact count feeds BM25's idf
        statements.clear()
        engine.search(SearchRequest("alpha zeta", mode="hybrid"))
        assert counted_words(statements) == []  # the same words again: nothing counted


def test_a_store_without_statistics_counts_and_decides_alike(postgres_url, fake_embedder, scaled, statements):
    with _store(postgres_url, fake_embedder, analyze=False) as plain, \
            _store(postgres_url, fake_embedder, analyze=True) as analyzed:
        assert pg_keyword.word_stats.read_stats(plain.conn, "chunks") is None  # autovacuum has not sampled it
        answers = []
        for store in (plain, analyzed):
            engine = search_engine(store, fake_embedder)
            statements.clear()
            answers.append([(r.keyword_expression, r.keyword_dropped, [h.item_id for h in r.hits])
                            for r in (engine.search(SearchRequest(q, mode=m)) for q, m in
                                      [("alpha zeta", "hybrid"), ("alpha beta", "hybrid"), ("alpha beta", "keyword")])])
            if store is plain:
                assert "'alpha'" in counted_words(statements)
        assert answers[0] == answers[1]


def test_a_write_keeps_the_word_statistics(postgres_url, fake_embedder, scaled, statements):
    with _store(postgres_url, fake_embedder, analyze=True) as store:
        engine = search_engine(store, fake_embedder)
        engine.search(SearchRequest("alpha beta zeta", mode="hybrid"))
        add_doc(store, fake_embedder, "notes", "late.md", "alpha beta written later")
        statements.clear()
        result = engine.search(SearchRequest("alpha beta zeta", mode="hybrid"))
        assert result.keyword_dropped == ["alpha", "beta"]
        counted = counted_words(statements)
        assert "'alpha'" not in counted and "'beta'" not in counted  # still known common after the write
        assert not any("pg_stats" in sql for sql, _ in statements)  # not read again either


def test_an_or_of_common_words_is_not_counted_when_one_word_alone_is_over_the_budget(postgres_url, fake_embedder,
                                                                                    scaled, statements, monkeypatch):
    """keyword mode: the AND of "alpha beta" (30 rows) fills fewer than `limit` hits, so the OR is ranked only if it
    matches at most RANK_BUDGET x 5 = 35 rows; alpha alone is in 40 (statistics): over, uncounted."""
    monkeypatch.setattr(pg_keyword, "RANK_BUDGET", 7)
    with _store(postgres_url, fake_embedder, analyze=True) as store:
        engine = search_engine(store, fake_embedder)
        statements.clear()
        result = engine.search(SearchRequest("alpha beta", mode="keyword", top_k=50))
        assert result.keyword_expression == "'alpha' & 'beta'"  # the AND stays; the OR was not ranked
        assert not any(" | " in p for p in counted_words(statements))


def test_exact_items_skips_a_word_already_counted_in_more_items(postgres_url, fake_embedder, scaled, statements):
    """exact_max_items 1: "zeta" (2 items) and "alpha" (40) pin nothing; neither is looked up among items again once
    the item ranking counted them."""
    with _store(postgres_url, fake_embedder, analyze=False) as store:
        engine = search_engine(store, fake_embedder)
        statements.clear()
        result = engine.search(SearchRequest("alpha zeta", mode="hybrid"))
        assert result.exact_terms == []
        assert not any(sql.startswith("SELECT d.item_id FROM item_docs d") for sql, _ in statements)


def test_statements_are_planned_for_their_parameters(postgres_url, fake_embedder):
    """psycopg prepares a statement run 5 times; a generic plan for `tsv @@ $1` guesses a word's rows and ANDs its
    whole GIN bitmap in (the connection's docstring): each statement is planned for its own parameters instead."""
    with _store(postgres_url, fake_embedder, analyze=False) as store:
        assert store.conn.execute("SHOW plan_cache_mode").fetchone()[0] == "force_custom_plan"


@pytest.mark.parametrize("mode", ["hybrid", "keyword", "semantic"])
def test_a_tag_filter_is_listed_once_per_search_and_finds_what_the_facet_sql_finds(postgres_url, fake_embedder,
                                                                                  statements, monkeypatch, mode):
    """A facet-only filter goes to every statement as the chunk ids holding it (PgSearchEngine._listed: the planner
    cannot size `c.id IN (SELECT ... UNION ALL ...)`), read once per search; the hits are those of the facet SQL."""
    from rag_search.retrieval import Filters
    from rag_search.retrieval.pg import engine as pg_engine

    with open_store(fresh_database(postgres_url, f"t_{uuid.uuid4().hex[:12]}")) as store:
        for n in range(30):
            add_doc(store, fake_embedder, "notes", f"n{n:02}.md", f"river delta note {n}" + " rare" * (n == 4),
                    tags=("t7",) if n % 3 == 0 else ("other", "t7/sub") if n % 3 == 1 else ())
        request = SearchRequest("river rare", mode=mode, filters=Filters(tags=("t7",)), top_k=50)
        engine = search_engine(store, fake_embedder)
        statements.clear()
        listed = engine.search(request)
        lists = [sql for sql, _ in statements if sql.startswith("SELECT * FROM (SELECT f.chunk_id FROM chunk_facets")]
        assert len(lists) == 1
        facet_sql = [sql for sql, _ in statements if "FROM chunk_facets f WHERE f.name = 'tag'" in sql]
        assert all(sql in lists or " item_names n " in sql for sql in facet_sql)  # the names. lookup: its own
        monkeypatch.setattr(pg_engine, "FACET_IDS_MAX", 0)  # too many to list: the facet SQL in each statement
        plain = search_engine(store, fake_embedder).search(request)
        assert [h.chunk_id for h in listed.hits] == [h.chunk_id for h in plain.hits]
        assert len(listed.hits) == 20  # tagged t7 or t7/...


def test_a_migrated_store_has_its_word_statistics_at_once(postgres_url, fake_embedder, tmp_path):
    """migrate-store analyzes the copy: its first searches need not count common words' rows."""
    from rag_search.store.pg.migrate import migrate_store

    with open_store(str(tmp_path / "rag.db")) as store:
        for n in range(30):
            add_doc(store, fake_embedder, "notes", f"n{n:02}.md", f"alpha note {n}")
    url = fresh_database(postgres_url, f"t_{uuid.uuid4().hex[:12]}")
    migrate_store(tmp_path / "rag.db", url)
    with open_store(url) as store:
        stats = pg_keyword.word_stats.read_stats(store.conn, "chunks")
        assert stats is not None and stats.shares["alpha"] == 1.0
