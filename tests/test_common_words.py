"""The most common words' rows held in RAM (retrieval/common_words.py): their rankings are FTS5's own, row for row
and score for score, on a real index with deleted and rewritten items; they are dropped on any write; and a
server's keyword search of common words ranks nothing through FTS5 while returning what the one-shot CLI returns."""

from __future__ import annotations

import dataclasses
import itertools
import random

import numpy as np

import pytest

from rag_search.records import Chunk, Fingerprint, ItemRef
from rag_search.retrieval import Filters, SearchEngine, SearchRequest, keyword
from rag_search.retrieval.common_words import CommonWords
from rag_search.retrieval.filters import SqlFilter
from rag_search.store import Store, writes
from rag_search.store.item_writer import ParsedItem, write_items

# the first words end up in most chunks (Zipf-like), some with stems that differ from the word (running -> run)
WORDS = ("running budget meeting harbour ferries printer garden travel zebra quokka kernel proxy invoice draft "
         "review release planning design notes summary client contract payment server backup storage").split()
EVERYWHERE = Filters()


def _text(rng: random.Random, n: int) -> str:
    return " ".join(WORDS[min(int(rng.paretovariate(0.8)) - 1, len(WORDS) - 1)] for _ in range(n))


def _items(rng: random.Random, start: int, n: int, coll: str = "notes") -> list[ParsedItem]:
    out = []
    for k in range(start, start + n):
        title = " ".join(rng.sample(WORDS[:8], rng.randint(0, 2))).title()  # some titles hold common words
        chunks = [Chunk(i, _text(rng, rng.randint(3, 60)), title=title,
                        keywords=_text(rng, 3) if k % 4 == 0 else "")  # the keywords column (weight 0.5) too
                  for i in range(rng.randint(1, 4))]
        ref = ItemRef(coll, f"item{k:04}.md", f"/data/{coll}/item{k:04}.md", "markdown")
        out.append(ParsedItem(ref, Fingerprint(1, 1, "x"), title, chunks))
    return out


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    from fakes import HashEmbedder

    embedder = HashEmbedder()
    store = Store.open(tmp_path_factory.mktemp("common-words") / "rag.db")
    writes.ensure_collection(store, "notes")
    rng = random.Random(7)
    write_items(store, embedder, _items(rng, 0, 260))
    writes.delete_items(store, "notes", [f"item{k:04}.md" for k in range(0, 260, 9)])  # FTS5 delete markers
    write_items(store, embedder, _items(rng, 100, 30))  # rewritten: their old rows deleted, new ones added
    yield store, embedder
    store.close()


def _fts5(conn, table: str, terms: list[keyword.Term], anded: bool, limit: int) -> list[tuple[int, float]]:
    expression = (" AND " if anded else " OR ").join(t.fts() for t in terms)
    rows = conn.execute(keyword.keyword_sql(SqlFilter("1", ()), table), (expression, limit)).fetchall()
    return [tuple(r) for r in rows]


def test_rankings_from_ram_are_fts5s_row_for_row_and_score_for_score(index):
    store, _ = index
    held = CommonWords(store, min_docs=40)
    held.ready()
    assert held.wait(60)
    common = [w for w in WORDS if held.rank(keyword.CHUNKS, keyword.parse_terms(w), True, 1) is not None]
    assert len(common) >= 5, common  # a test that holds nothing proves nothing
    compared = 0
    for n in (1, 2, 3):
        for words in itertools.combinations(common[:7], n):
            terms = keyword.parse_terms(" ".join(words))
            for table, anded, limit in itertools.product((keyword.CHUNKS, keyword.ITEMS), (True, False), (1, 10, 1000)):
                got = held.rank(table, terms, anded, limit)
                if got is None:  # a word common among chunks may not be among items
                    continue
                assert got == _fts5(store.conn, table, terms, anded, limit), (table, words, anded, limit)
                assert held.count(table, terms, anded) == len(_fts5(store.conn, table, terms, anded, 10**6))
                compared += 1
    assert compared > 100


def test_a_rarer_word_is_read_once_when_asked_for_and_ranked_as_fts5_ranks_it(index):
    """A word in fewer rows than those held is read by one small statement the first time a query asks for it and
    kept; alone or beside held words, its rankings are FTS5's. Phrases and a word left out by the budget (in more rows
    than the floor) still go to FTS5."""
    store, _ = index
    held = CommonWords(store, min_docs=100)
    held.ready()
    assert held.wait(60)
    rows = {w: len(_fts5(store.conn, keyword.CHUNKS, keyword.parse_terms(w), True, 10**6)) for w in WORDS}
    rarer = sorted((w for w in WORDS if 0 < rows[w] <= 100), key=rows.get)
    common = [w for w in WORDS if rows[w] > 100]
    assert len(rarer) >= 3 and common, rows
    statements: list[str] = []
    stamp = held.stamp()
    store.conn.set_trace_callback(statements.append)
    try:
        for table in (keyword.CHUNKS, keyword.ITEMS):
            for w in rarer:
                terms = keyword.parse_terms(w)
                assert held.rank(table, terms, True, 10) == _fts5(store.conn, table, terms, True, 10), (table, w)
        del statements[:]
        for table, w, anded in itertools.product((keyword.CHUNKS, keyword.ITEMS), rarer, (True, False)):
            terms = keyword.parse_terms(f"{w} {common[0]} {rarer[0]}")
            got = held.rank(table, terms, anded, 50)
            assert got is not None
            assert got == _fts5(store.conn, table, terms, anded, 50), (table, w, anded)
        assert not [s for s in statements if "instances" in s and not s.startswith("--")]  # each read once
    finally:
        store.conn.set_trace_callback(None)
    # reading them (fts5vocab tables in TEMP on the index's connection) is no change of the index: nothing is re-read
    assert held.stamp() == stamp and held.ready()
    assert held.rank(keyword.CHUNKS, keyword.parse_terms(f'{common[0]} "budget meeting"'), True, 10) is None
    for anded in (True, False):  # a word in no row, alone or ORed with held ones
        for query in ("xylophonezz", f"xylophonezz {common[0]}"):
            terms = keyword.parse_terms(query)
            assert held.rank(keyword.CHUNKS, terms, anded, 10) == _fts5(store.conn, keyword.CHUNKS, terms, anded, 10)
    small = CommonWords(store, min_docs=100, budget=rows[common[0]] - 1)  # the most common word does not fit
    small.ready()
    assert small.wait(60)
    most = max(WORDS, key=rows.get)
    assert small.rank(keyword.CHUNKS, keyword.parse_terms(most), True, 10) is None


def test_what_is_held_is_dropped_on_a_write_and_read_again_once_writes_settle(index, tmp_path):
    from fakes import HashEmbedder

    store = Store.open(tmp_path / "rag.db")
    writes.ensure_collection(store, "notes")
    rng = random.Random(8)
    write_items(store, HashEmbedder(), _items(rng, 0, 120))
    held = CommonWords(store, min_docs=20)
    held.ready()
    assert held.wait(60)
    terms = keyword.parse_terms("running")
    before = held.count(keyword.CHUNKS, terms, True)
    loads = []
    load = held._load
    held._load = lambda stamp: loads.append(stamp) or load(stamp)
    write_items(store, HashEmbedder(), _items(rng, 500, 40))
    assert not held.ready()  # the index changed: FTS5 answers until it is read again,
    assert not held._loading and not loads  # once the index has been left alone for `quiet` seconds
    held.quiet = 0.5
    assert held.wait(60)
    assert len(loads) == 1
    assert held.count(keyword.CHUNKS, terms, True) == len(_fts5(store.conn, keyword.CHUNKS, terms, True, 10**6)) > before
    store.close()


def test_a_servers_keyword_search_of_common_words_ranks_nothing_through_fts5(index, monkeypatch):
    """Same hits as the one-shot engine; no bm25() of the passages or items on either connection (the names list
    ranks its own small table)."""
    store, embedder = index
    monkeypatch.setattr(keyword, "COMMON_MIN_DOCS", 300)  # this index's common words, as at 100k chunks
    server = SearchEngine(store, embedder, bits_in_ram=True)
    server.search(SearchRequest("budget", mode="keyword"))
    assert server.common_words.wait(60) and server.bit_matrix.wait(60)
    # a rarer word (in more than a fifth of the common-word threshold's rows) kept beside dropped common ones
    rows = {w: len(_fts5(store.conn, keyword.CHUNKS, keyword.parse_terms(w), True, 10**6)) for w in WORDS}
    rarer = next(w for w in WORDS if 60 < rows[w] <= 300)
    one_shot = SearchEngine(store, embedder)
    statements: list[str] = []
    for conn in (store.conn, server.second.connection):
        if conn is not None:
            conn.set_trace_callback(statements.append)
    try:
        for query in ("running budget", "meeting", "budget meeting harbour", f"running {rarer} budget"):
            fast = server.search(SearchRequest(query, mode="keyword", top_k=20))
            assert fast.hits, query
            statements_then = len(statements)
            slow = one_shot.search(SearchRequest(query, mode="keyword", top_k=20))
            del statements[statements_then:]  # the one-shot engine's own statements are not the server's
            assert [(h.chunk_id, h.score) for h in fast.hits] == [(h.chunk_id, h.score) for h in slow.hits], query
    finally:
        store.conn.set_trace_callback(None)
        if server.second.connection is not None:
            server.second.connection.set_trace_callback(None)
    ranked = [s for s in statements if "bm25(chunks_fts" in s or "bm25(items_fts" in s]
    assert not ranked, ranked


DAY = 86_400
T0 = 1_600_000_000
TAGS = ("red", "proj", "proj/a", "proj/b")


@pytest.fixture(scope="module")
def dated(tmp_path_factory):
    """Chunks with times (some undated) in two collections, with deleted and rewritten items."""
    from fakes import HashEmbedder

    embedder = HashEmbedder()
    store = Store.open(tmp_path_factory.mktemp("common-words-dated") / "rag.db")
    rng = random.Random(11)
    for coll in ("notes", "mail"):
        writes.ensure_collection(store, coll)
    for start, coll in ((0, "notes"), (200, "mail")):
        items = [dataclasses.replace(item, chunks=[
            dataclasses.replace(c, ts=None if rng.random() < 0.15 else T0 + rng.randint(0, 400) * DAY,
                                tags=tuple(t for t in TAGS if rng.random() < 0.3),
                                metadata={"kind": rng.choice(["memo", "log", "plan"])})
            for c in item.chunks]) for item in _items(rng, start, 150, coll)]
        write_items(store, embedder, items)
    writes.delete_items(store, "notes", [f"item{k:04}.md" for k in range(0, 150, 7)])
    yield store, embedder
    store.close()


DATE_FILTERS = (Filters(date_from=T0 + 200 * DAY), Filters(date_to=T0 + 100 * DAY),
                Filters(date_from=T0 + 50 * DAY, date_to=T0 + 300 * DAY),
                Filters(date_from=T0 + 350 * DAY, include_undated=True), Filters(date_from=T0 + 399 * DAY),
                Filters(collections=("mail",)), Filters(collections=("notes", "mail")),
                Filters(collections=("notes",), date_from=T0 + 200 * DAY),
                # facets (tags, nested tags, metadata), alone and with dates and collections: their chunks listed once
                Filters(tags=("red",)), Filters(tags=("#proj",)), Filters(tags=("red", "proj/a")),
                Filters(metadata={"kind": ["memo", "plan"]}), Filters(tags=("red",), date_from=T0 + 200 * DAY),
                Filters(collections=("mail",), tags=("proj",), metadata={"kind": "log"}))


def test_rankings_under_a_date_collection_or_facet_filter_from_ram_are_fts5s_with_the_filter(dated):
    """The filter's rowids come from the chunks' times and collections held with the bits and the chunks its facets
    list; the ranking equals FTS5's with the filter in its WHERE, row for row and score for score, for chunks and for
    items (an item passes by its collection, or when one of its chunks passes)."""
    from rag_search.retrieval.bit_matrix import BitMatrix
    from rag_search.retrieval.filters import build_where

    store, _ = dated
    held, bits = CommonWords(store, min_docs=40), BitMatrix(store)
    held.ready(), bits.ready()
    assert held.wait(60) and bits.wait(60)
    common = [w for w in WORDS if held.rank(keyword.CHUNKS, keyword.parse_terms(w), True, 1) is not None]
    assert len(common) >= 5, common
    compared = 0
    for filters in DATE_FILTERS:
        coll_ids = tuple(store.conn.execute("SELECT id FROM collections WHERE name = ?", (name,)).fetchone()[0]
                         for name in filters.collections)
        facets = build_where(Filters(tags=filters.tags, metadata=filters.metadata))
        passing = bits.rows_passing(filters, coll_ids, lambda: np.array(
            [r[0] for r in store.conn.execute(facets.ids_sql, facets.params)], dtype=np.int64))
        assert passing is not None, filters
        where = build_where(filters, coll_ids)
        for n in (1, 2):
            for words in itertools.combinations(common[:6], n):
                terms = keyword.parse_terms(" ".join(words))
                for table, anded, limit in itertools.product((keyword.CHUNKS, keyword.ITEMS), (True, False), (1, 10, 1000)):
                    got = held.rank(table, terms, anded, limit, passing)
                    if got is None:
                        continue
                    expression = (" AND " if anded else " OR ").join(t.fts() for t in terms)
                    want = store.conn.execute(keyword.keyword_sql(where, table),
                                              (expression, *where.params, limit)).fetchall()
                    assert got == [tuple(r) for r in want], (filters, table, words, anded, limit)
                    compared += bool(want)
    assert compared > 100


def test_a_servers_filtered_search_of_common_words_ranks_nothing_through_fts5(dated, monkeypatch):
    """Keyword and hybrid searches under a date, collection or facet filter: the server's hits are the one-shot engine's,
    and the server sends no bm25() ranking of passages or items (on common words FTS5 took 30+ ms at 100k chunks
    under a date filter, 35-38 ms under a 2% tag)."""
    store, embedder = dated
    monkeypatch.setattr(keyword, "COMMON_MIN_DOCS", 200)
    server = SearchEngine(store, embedder, bits_in_ram=True)
    server.search(SearchRequest("budget", mode="keyword"))
    assert server.common_words.wait(60) and server.bit_matrix.wait(60)
    one_shot = SearchEngine(store, embedder)
    statements: list[str] = []
    for conn in (store.conn, server.second.connection):
        if conn is not None:
            conn.set_trace_callback(statements.append)
    compared = 0
    try:
        for filters, query, mode in itertools.product(DATE_FILTERS, ("running budget", "meeting", "budget harbour"),
                                                      ("keyword", "hybrid")):
            fast = server.search(SearchRequest(query, mode=mode, top_k=20, filters=filters))
            statements_then = len(statements)
            slow = one_shot.search(SearchRequest(query, mode=mode, top_k=20, filters=filters))
            del statements[statements_then:]
            assert [(h.chunk_id, h.score) for h in fast.hits] == [(h.chunk_id, h.score) for h in slow.hits], \
                (filters, query, mode)
            compared += len(fast.hits)
    finally:
        store.conn.set_trace_callback(None)
        if server.second.connection is not None:
            server.second.connection.set_trace_callback(None)
    assert compared > 100
    ranked = [s for s in statements if "bm25(chunks_fts" in s or "bm25(items_fts" in s]
    assert not ranked, ranked[:3]


def test_the_rarer_words_kept_are_bounded_by_their_rows(index, monkeypatch):
    """A long-running server forgets the rarer words it read once they hold more rows than the bound (then reads them
    again when asked), and ranks as FTS5 throughout."""
    from rag_search.retrieval import common_words

    store, _ = index
    held = CommonWords(store, min_docs=100)
    held.ready()
    assert held.wait(60)
    rows = {w: len(_fts5(store.conn, keyword.CHUNKS, keyword.parse_terms(w), True, 10**6)) for w in WORDS}
    rarer = [w for w in WORDS if 0 < rows[w] <= 100]
    monkeypatch.setattr(common_words, "FETCHED_ROWS_MAX", min(rows[w] for w in rarer))
    table = held._tables[keyword.CHUNKS]
    for w in rarer * 2:
        terms = keyword.parse_terms(w)
        assert held.rank(keyword.CHUNKS, terms, True, 10) == _fts5(store.conn, keyword.CHUNKS, terms, True, 10), w
        assert table.fetched_rows <= 2 * max(rows[x] for x in rarer)  # cleared before it grows past the bound
    assert len(table.fetched) < len(rarer)
