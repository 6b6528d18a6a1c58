"""Word statistics over the caller's collections (retrieval/corpus.py): a scope's BM25 is the score FTS5 gives on an
index of only those collections, and a search with a scope answers the same whether other collections exist or not
(hits, order, scores, relevance, counts); the owner's search (no scope) keeps the whole index's figures."""

from __future__ import annotations

import math
import random
import shutil
from dataclasses import asdict

import pytest
from conftest import add_doc
from fakes import HashEmbedder

from rag_search.retrieval import SearchEngine, SearchRequest
from rag_search.retrieval.corpus import Corpus, bm25_idf, varints
from rag_search.retrieval.filters import Filters, build_where
from rag_search.retrieval.keyword import CHUNKS, ITEMS, match_expression, parse_terms
from rag_search.retrieval.relevance import search_with_relevance
from rag_search.store import Store, writes

VOCAB = [f"w{n:02d}" for n in range(40)] + ["lanternfish", "tomato", "harbour", "ledger"]
MINE, THEIRS = ("mine", "shared"), "theirs"


def _text(rng: random.Random, heavy: str | None = None) -> str:
    words = [rng.choice(VOCAB[: rng.randint(6, len(VOCAB))]) for _ in range(rng.randint(4, 70))]
    return " ".join(words + ([heavy] * rng.randint(1, 6) if heavy else []))


def _fill(store: Store, embedder, with_theirs: bool) -> None:
    rng = random.Random(7)  # the same items for both stores, in the same order
    for n in range(60):
        coll = (MINE[n % 2], THEIRS)[n % 3 == 0]
        text = _text(rng, "tomato" if coll == THEIRS else None)  # their notes are full of tomatoes
        title = f"note {n} " + rng.choice(VOCAB)
        if coll != THEIRS or with_theirs:
            add_doc(store, embedder, coll, f"{coll}/n{n}.md", text, title=title)
    if with_theirs:
        add_doc(store, embedder, THEIRS, "theirs/oncologist.md", "The oncologist visit about the lanternfish study")


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """rag.db with every collection, the same file with theirs deleted, and an index built without theirs."""
    folder, embedder = tmp_path_factory.mktemp("corpus"), HashEmbedder()
    full = Store.open(folder / "full.db")
    _fill(full, embedder, with_theirs=True)
    full.close()
    shutil.copy(folder / "full.db", folder / "deleted.db")
    deleted = Store.open(folder / "deleted.db")
    writes.delete_collection(deleted, THEIRS)
    only = Store.open(folder / "only.db")
    _fill(only, embedder, with_theirs=False)
    out = {"full": Store.open(folder / "full.db"), "deleted": deleted, "only": only}
    yield out, embedder
    for s in out.values():
        s.close()


def _ids(store: Store) -> tuple[int, ...]:
    return tuple(r[0] for r in store.conn.execute(f"SELECT id FROM collections WHERE name IN {MINE!r}"))


@pytest.mark.parametrize("table", [CHUNKS, ITEMS])
def test_a_scopes_bm25_is_what_fts5_gives_on_an_index_of_only_its_collections(stores, table):
    s, _ = stores
    full, only = s["full"], s["only"]
    corpus = Corpus(full.conn, _ids(full))
    expression = match_expression(parse_terms('tomato harbour w03 "w01 w02" ledg*'))
    ranked = corpus.ranked(table, expression, build_where(Filters(collections=MINE), _ids(full)), 1000)
    # the same rows by key in the index without their collection, ranked by FTS5 itself
    own = {k: v for k, v in only.conn.execute(
        f"SELECT rowid, rank FROM {table} WHERE {table} MATCH ? ORDER BY rank", (expression,))}
    key_of = _keys(full, table)
    key_of_only = _keys(only, table)
    mine = {key_of[i]: score for i, score in ranked}
    theirs = {key_of_only[i]: score for i, score in own.items()}
    assert mine.keys() == theirs.keys() and len(mine) > 10
    assert max(abs(mine[k] - theirs[k]) for k in mine) < 1e-9
    rounded = [round(score, 9) for _, score in ranked]
    assert rounded == sorted(round(v, 9) for v in theirs.values())  # the same order (up to equal scores)
    assert corpus.rows(table) == only.conn.execute(f"SELECT count(*) FROM {table}_docsize").fetchone()[0]


def _keys(store: Store, table: str) -> dict[int, str]:
    if table == ITEMS:
        return dict(store.conn.execute("SELECT id, key FROM items"))
    return dict(store.conn.execute("SELECT c.id, i.key || '#' || c.idx FROM chunks c JOIN items i ON i.id = c.item_id"))


QUERIES = ["tomato harbour", "lanternfish oncologist", "lanternfish oncologst", "w05 w17 tomato", "note 12",
           "ledger", '"w01 w02" tomato', "w3*"]


@pytest.mark.parametrize("mode", ["keyword", "hybrid", "semantic"])
def test_a_scoped_search_answers_the_same_with_or_without_other_collections(stores, mode):
    s, embedder = stores
    full, deleted = (SearchEngine(s[k], embedder) for k in ("full", "deleted"))
    relevant = 0
    for query in QUERIES:
        for chunks in (False, True):
            request = SearchRequest(query, top_k=20, mode=mode, filters=Filters(collections=MINE), chunks=chunks,
                                    scope=MINE)
            a, b = search_with_relevance(full, request), search_with_relevance(deleted, request)
            assert [_hit(h) for h in a.hits] == [_hit(h) for h in b.hits], (query, mode, chunks)
            assert a.chunks_in_index == b.chunks_in_index and a.keyword_dropped == b.keyword_dropped
            relevant += sum(bool(h.relevance) for h in a.hits)
    assert relevant > 20  # the probe compared real scores


def _hit(hit) -> dict:
    d = asdict(hit)
    return {k: d[k] for k in ("key", "chunk_index", "score", "relevance", "snippet", "item_ranks", "rerank_score")}


def test_a_word_only_another_users_notes_hold_weighs_nothing_in_relevance(stores):
    """The issue's probe: B's keyword query holding a word only A's private notes hold (oncologist) answers as the
    same query with that word misspelled (oncologst), whatever min_score."""
    s, embedder = stores
    engine = SearchEngine(s["full"], embedder)

    def answer(q):
        r = search_with_relevance(engine, SearchRequest(q, mode="keyword", filters=Filters(collections=MINE),
                                                        scope=MINE))
        return [(h.key, round(h.score, 9), h.relevance) for h in r.hits]

    assert answer("lanternfish oncologist") == answer("lanternfish oncologst") != []
    owner = search_with_relevance(engine, SearchRequest("lanternfish oncologist", mode="keyword",
                                                        filters=Filters(collections=MINE)))
    # the owner's figures are the whole index's: there the word is known, and it weighs
    assert [h.relevance for h in owner.hits] != [r for *_, r in answer("lanternfish oncologist")]


def test_the_owners_search_keeps_fts5s_own_ranking(stores):
    s, embedder = stores
    engine = SearchEngine(s["full"], embedder)
    result = engine.search(SearchRequest("tomato harbour", mode="keyword", top_k=50))
    assert result.corpus is None
    expression = match_expression(parse_terms("tomato harbour"))
    fts = [r[0] for r in s["full"].conn.execute("SELECT rowid FROM items_fts WHERE items_fts MATCH ? ORDER BY rank "
                                                "LIMIT 50", (expression,))]
    assert [h.item_id for h in result.hits][:10] == fts[:10] or result.hits[0].item_ranks.get("keyword") == 1


def test_fts5_figures_are_read_as_written():
    assert varints(bytes([0x05, 0x81, 0x00, 0x7F])) == [5, 128, 127]
    assert bm25_idf(10, 9) == 1e-6 and bm25_idf(10, 1) == pytest.approx(math.log(9.5 / 1.5))
