"""Keyword cost bounds on large indexes (thresholds scaled down so a small real index shows them): common words
leave the OR, an all-common query is skipped in hybrid when its AND would rank too many rows, and an item's best
chunk is found by probing its chunks with the same BM25 as ranking the whole index."""

from __future__ import annotations

import pytest
from conftest import add_doc

from rag_search.retrieval import SearchEngine, SearchRequest, keyword
from rag_search.retrieval.filters import SqlFilter

EVERY = SqlFilter("1", ())


@pytest.fixture
def index(store, fake_embedder, monkeypatch):
    monkeypatch.setattr(keyword, "COMMON_MIN_DOCS", 20)
    for n in range(60):
        words = ["alpha"] + (["beta"] if n % 2 else []) + (["gamma"] if n % 3 == 0 else []) + (["zircon"] if n == 7 else [])
        add_doc(store, fake_embedder, "notes", f"n{n:02}.md", " ".join(words + [f"filler{n}"]))
    return store


def run(store, query, may_skip=False, limit=10):
    n = store.conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    return keyword.search(store.conn, keyword.parse_terms(query), EVERY, limit, n, {}, may_skip=may_skip)


def test_common_words_leave_the_or_when_a_rarer_word_is_there(index):
    got = run(index, "alpha beta zircon")
    assert got.expression == '"zircon"' and sorted(got.dropped) == ["alpha", "beta"] and got.rare
    assert not run(index, "alpha beta").rare and not run(index, '"alpha filler7" zircon').rare
    assert got.ids == [index.conn.execute("SELECT c.id FROM chunks c JOIN items i ON i.id = c.item_id "
                                          "WHERE i.key = 'n07.md'").fetchone()[0]]


def test_all_common_words_are_ranked_together_or_skipped_in_hybrid_past_the_budget(index, monkeypatch):
    got = run(index, "alpha beta", limit=5)
    assert got.expression == '"alpha" AND "beta"' and len(got.ids) == 5
    monkeypatch.setattr(keyword, "UNRANKABLE_FRACTION", 0.9)
    assert run(index, "alpha beta", may_skip=True).ids  # 30 of 60 rows: under both limits, ranked
    monkeypatch.setattr(keyword, "RANK_BUDGET", 10)
    skipped = run(index, "alpha beta", may_skip=True)
    assert skipped.ids == [] and skipped.expression is None and sorted(skipped.dropped) == ["alpha", "beta"]


def test_the_or_fallback_is_left_out_when_it_would_rank_most_of_the_index(index, monkeypatch):
    assert len(run(index, "alpha beta", limit=50).ids) == 50  # the AND finds 30: the OR adds the rest
    monkeypatch.setattr(keyword, "RANK_BUDGET", 5)
    got = run(index, "alpha beta", limit=50)
    assert got.expression == '"alpha" AND "beta"' and len(got.ids) == 30


def test_probing_an_items_chunks_picks_the_same_chunk_as_ranking_the_index(store, fake_embedder, monkeypatch):
    from rag_search.store.item_writer import ParsedItem, write_items
    from rag_search.records import Chunk, Fingerprint, ItemRef
    from rag_search.store import writes

    writes.ensure_collection(store, "c")
    items = []
    for n in range(12):
        texts = [f"part one of {n} about ferries", f"harbour ferry timetable {n} ferry ferry", f"lentils {n}"]
        items.append(ParsedItem(ItemRef("c", f"i{n}.md", f"/c/i{n}.md", "markdown"), Fingerprint(1, 1, str(n)),
                                f"I{n}", [Chunk(j, t) for j, t in enumerate(texts)]))
    write_items(store, fake_embedder, items)
    ids = [r[0] for r in store.conn.execute("SELECT id FROM items ORDER BY id")]
    terms = keyword.parse_terms("ferry timetable")
    expr = keyword.match_expression(terms)
    probed = keyword.best_chunks(store.conn, ids, expr, EVERY, probe=True)
    monkeypatch.setattr(keyword, "PROBE_MAX", 0)  # too many chunks to probe: their matches ranked in the index
    ranked = keyword.best_chunks(store.conn, ids, expr, EVERY, probe=True)
    covering = keyword.best_chunks(store.conn, ids, expr, EVERY, probe=False, terms=terms)  # a common word in it
    assert probed == ranked == covering and len(probed) == 12
    idx = dict(store.conn.execute("SELECT id, idx FROM chunks"))
    assert {idx[c] for c in probed.values()} == {1}


def test_with_a_common_word_the_chunk_holding_the_rarer_word_is_chosen_without_ranking(store, fake_embedder,
                                                                                       monkeypatch):
    from rag_search.store.item_writer import ParsedItem, write_items
    from rag_search.records import Chunk, Fingerprint, ItemRef
    from rag_search.store import writes

    monkeypatch.setattr(keyword, "COMMON_MIN_DOCS", 5)  # "report" is in 31 chunks: common; "quarterly" in 1
    writes.ensure_collection(store, "c")
    items = [ParsedItem(ItemRef("c", f"f{n}.md", f"/c/f{n}.md", "markdown"), Fingerprint(1, 1, str(n)), f"F{n}",
                        [Chunk(0, f"report report report {n}")]) for n in range(30)]
    items.append(ParsedItem(ItemRef("c", "q.md", "/c/q.md", "markdown"), Fingerprint(1, 1, "q"), "Q",
                            [Chunk(0, "report report report report on the weather"), Chunk(1, "lunch plans"),
                             Chunk(2, "the quarterly report")]))
    write_items(store, fake_embedder, items)
    q = store.conn.execute("SELECT id FROM items WHERE key = 'q.md'").fetchone()[0]
    terms = keyword.parse_terms("quarterly report")
    calls = []
    store.conn.set_trace_callback(calls.append)
    try:
        best = keyword.best_chunks(store.conn, [q], keyword.match_expression(terms), EVERY, probe=False, terms=terms)
    finally:
        store.conn.set_trace_callback(None)
    idx = dict(store.conn.execute("SELECT id, idx FROM chunks"))
    assert idx[best[q]] == 2  # BM25 of "report" alone would pick chunk 0; the rare word decides
    assert any("MATCH" in c for c in calls) and not any("rank" in c.lower() for c in calls)  # no statement ranks a common word's whole doclist


def test_a_hybrid_search_with_only_common_words_still_answers_from_the_vector_side(index, fake_embedder, monkeypatch):
    monkeypatch.setattr(keyword, "RANK_BUDGET", 5)
    result = SearchEngine(index, fake_embedder).search(SearchRequest("alpha beta", mode="hybrid"))
    assert result.hits and sorted(result.keyword_dropped) == ["alpha", "beta"]


def test_in_hybrid_a_word_in_very_many_rows_leaves_an_all_common_and(index, monkeypatch):
    monkeypatch.setattr(keyword, "AND_MAX_DOCS", 40)  # alpha: 60 rows, beta: 30
    monkeypatch.setattr(keyword, "UNRANKABLE_FRACTION", 0.9)
    monkeypatch.setattr(keyword, "RANK_BUDGET", 50)
    got = run(index, "alpha beta", may_skip=True)
    assert got.expression == '"beta"' and got.dropped == ["alpha"] and len(got.ids) == 10
    assert run(index, "alpha beta").expression == '"alpha" AND "beta"'  # keyword mode ranks every word
    assert run(index, "alpha", may_skip=True).ids == []  # nothing rarer left: the vector side carries it


def test_ranking_by_the_bm25_call_equals_fts5s_own_rank_order(store, fake_embedder):
    """keyword_sql orders by the tables' BM25 called in the statement (cheaper than ORDER BY rank, which sorts every
    match): the same ids in the same order as FTS5's configured rank, ties (equal texts) by rowid, filtered or not."""
    from rag_search.retrieval.filters import Filters, build_where

    for n in range(80):
        words = ["alpha"] * (1 + n % 3) + (["beta"] if n % 2 else []) + ["filler"] * (n % 4)
        add_doc(store, fake_embedder, ("notes", "mail")[n % 2], f"n{n:02}.md", " ".join(words), tags=(f"t{n % 3}",),
                title="Alpha" if n % 5 == 0 else "note", ts=None if n % 4 == 0 else 1_600_000_000 + n)
    conn = store.conn
    for table in (keyword.CHUNKS, keyword.ITEMS):
        configured = conn.execute(f"SELECT v FROM {table}_config WHERE k = 'rank'").fetchone()[0]
        assert keyword.BM25[table] == configured.replace("bm25(", f"bm25({table}, ")
    for where in (EVERY, build_where(Filters(tags=("t1",))), build_where(Filters(date_from=1_600_000_020, include_undated=False))):
        for table, limit in ((keyword.CHUNKS, 30), (keyword.ITEMS, 12)):
            for expression in ('"alpha"', '"alpha" OR "beta"', '"alpha" AND "beta"', '"filler"'):
                got = conn.execute(keyword.keyword_sql(where, table), (expression, *where.params, limit)).fetchall()
                fts5 = keyword_by_rank(conn, table, where, expression, limit)
                assert [r[0] for r in got] == [r[0] for r in fts5] and len(got) > 2, (table, expression, where)
                assert len({r[1] for r in fts5}) < len(fts5)  # ties are there to be broken


def keyword_by_rank(conn, table, where, expression, limit):
    """The statement as it was: FTS5's ORDER BY rank (its configured BM25) with the LIMIT."""
    sql = (keyword.keyword_sql(where, table).replace(f"{keyword.BM25[table]} AS score", f"{table}.rank")
           .replace(f"ORDER BY score, {table}.rowid", f"ORDER BY {table}.rank"))
    return conn.execute(sql, (expression, *where.params, limit)).fetchall()


def test_a_ranking_in_two_halves_at_once_equals_the_whole_statement(store, fake_embedder):
    """SplitRanker (a server's keyword-only rankings of very common words) returns exactly the statement's rows:
    the same ids, scores and order, ties included, filtered or not, for chunks and items."""
    from rag_search.retrieval.filters import Filters, build_where
    from rag_search.retrieval.parallel import SecondConnection, SplitRanker

    for n in range(80):
        words = ["alpha"] * (1 + n % 3) + (["beta"] if n % 2 else []) + ["filler"] * (n % 4)
        add_doc(store, fake_embedder, ("notes", "mail")[n % 2], f"n{n:02}.md", " ".join(words), tags=(f"t{n % 3}",))
    split = SplitRanker(SecondConnection(store))
    for where in (EVERY, build_where(Filters(tags=("t1",)))):
        for table, limit in ((keyword.CHUNKS, 30), (keyword.ITEMS, 12), (keyword.CHUNKS, 500)):
            for expression in ('"alpha"', '"alpha" OR "beta"', '"alpha" AND "beta"', '"nothing"'):
                whole = store.conn.execute(keyword.keyword_sql(where, table), (expression, *where.params, limit))
                assert split(table, where, expression, limit) == whole.fetchall(), (table, expression, where)
    assert split.second.connection is not None and not split.second.failed
