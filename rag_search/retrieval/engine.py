"""The hybrid query engine: keyword (FTS5 BM25 over chunks and whole items) + vector (sqlite-vec), fused
with RRF into distinct items (or chunks on request), optionally reranked.

Stages, each visible in `--explain`: retrieve (each retriever's candidates) → fuse (RRF over item
rankings; the best chunk of each item is what the user sees) → pin exact rare-term matches → rerank the
fused top N (if configured) → hydrate the top k.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import wait
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from rag_search.retrieval.bounds import MAX_TOP_K
from rag_search.config import SearchSettings
from rag_search.embedders.base import Embedder, reads_script_of
from rag_search.errors import QueryError
from rag_search.records import Hit, chunk_body
from rag_search.retrieval import chunk_rows, keyword, titles, unmatched, vector
from rag_search.retrieval.bit_matrix import BitMatrix
from rag_search.retrieval.common_words import CommonWords
from rag_search.retrieval.corpus import Corpus
from rag_search.retrieval.filters import Filters, SqlFilter, build_where, passing
from rag_search.retrieval.fusion import FusedItem, Fused, Retrieved, fuse_chunks, fuse_items, item_ranking
from rag_search.retrieval.parallel import SecondConnection, SplitRanker
from rag_search.retrieval.query_vector import QueryVector
from rag_search.retrieval.rerank import (Candidate, FeatureReranker, Reranker, apply_rerank, load_reranker,
                                         query_idf)
from rag_search.retrieval.snippets import snippet, term_pattern
from rag_search.retrieval.titles import NameMatch
from rag_search.store import Store
from rag_search.store.vectors import check_embedder, fetch_vectors, ranking_query, recorded_embedder

Mode = Literal["hybrid", "keyword", "semantic"]
MODES: tuple[str, ...] = ("hybrid", "keyword", "semantic")
NO_FILTER = SqlFilter("1", ())
# Filters are tried first on this many times the wanted candidates of the unfiltered retriever: when
# enough pass, they are exactly the filtered top candidates (scores do not depend on filters); when
# too few pass (a selective filter), the filter goes into the retriever's own query instead.
OVERFETCH = 4
MIN_PASS_RATE = 0.1  # below this share passing, the filter goes into the KNN instead of widening it
CHUNK_DEPTH = 3  # chunk candidates per wanted item, so the fused top k is full of distinct items
MAX_SECTIONS = 5  # other matching chunks listed per item hit
RERANK_SECTIONS = 3  # chunks of an item a reranker reads: its best and the next matching ones
MAX_CHUNK_CANDIDATES = 2000  # the vector side widens up to this many chunks to find enough distinct items
WIDEN_MARGIN = 1.3  # widening asks for this much more than the items found so far per chunk suggest
# With the sign bits in RAM, candidates cost the same for any k, so on large scopes twice as many are rescored with
# their float vectors (real-like vectors, recall@10 vs exact after the asymmetric step: 1M chunks 300 rescored
# 0.945, 600 0.972; 100k: 300 already 0.99). Reading 300 more float vectors costs ~4 ms.
RAM_RESCORE_FACTOR = 2
RAM_RESCORE_WIDE_FROM = 300_000  # chunks in scope
# With the sign bits in RAM, exact float KNN (sqlite-vec reads every vector in scope: ~1.5 us a chunk, 30 ms for
# 20k) only for scopes this small; above it the bits and rescoring take ~5 ms (recall@10 ~0.99+).
RAM_EXACT_LIMIT = 4_000
FACET_IDS_MAX = 50_000  # a facet-only filter holding up to this many chunks is searched among them directly


@dataclass(frozen=True)
class SearchRequest:
    query: str
    top_k: int | None = None
    mode: Mode = "hybrid"
    filters: Filters = field(default_factory=Filters)
    chunks: bool = False  # chunk-level hits (several per item) instead of one hit per item
    rerank: bool | None = None  # None: as configured (search.reranker); False: never; True: the configured one
    # the query's vector when the caller embedded it already (a batch of queries embedded at once): not embedded again
    query_vector: np.ndarray | None = field(default=None, compare=False, repr=False)
    # the collections the caller may see: word statistics are theirs only (retrieval/corpus.py); None: the owner's
    # whole index
    scope: tuple[str, ...] | None = None


@dataclass
class SearchResult:
    hits: list[Hit]
    request: SearchRequest
    keyword_expression: str | None = None
    keyword_dropped: list[str] = field(default_factory=list)  # common words left out of the MATCH
    keyword_rare: bool = False  # the MATCH holds rare words only (cheap to evaluate row by row)
    vector_plan: str | None = None  # "exact" or "binary+rescore"
    chunks_in_index: int = 0
    reranker: str | None = None  # the reranker that ordered the top, if one ran
    rerank_note: str | None = None  # why reranking stopped early or was skipped
    exact_terms: list[str] = field(default_factory=list)  # rare terms whose items were put first
    timings_ms: dict[str, float] = field(default_factory=dict)
    corpus: Any = field(default=None, repr=False, compare=False)  # the scope's word statistics (request.scope)


class SearchEngine:
    """Answers SearchRequests against one Store with one Embedder (loaded lazily by the embedder)."""

    name_lookups = None  # titles.search's backend: rag.db's FTS5 tables
    scoped_stats = True  # word statistics over a request's scope (retrieval/corpus.py); PostgreSQL: not yet

    def __init__(self, store: Store, embedder: Embedder | None, settings: SearchSettings | None = None,
                 reranker: Reranker | None = None, bits_in_ram: bool = False):
        """bits_in_ram: keep every vector's sign bits in RAM for candidate generation (long-running servers)."""
        self.store = store
        self.settings = settings or SearchSettings()
        self.bit_matrix = BitMatrix(store, self.settings.vectors_in_ram_mb) if bits_in_ram else None
        self.second = SecondConnection(store) if bits_in_ram else None  # work beside the index's connection
        self.split = SplitRanker(self.second) if bits_in_ram else None  # large keyword-only rankings in two halves
        self.common_words = CommonWords(store) if bits_in_ram else None  # the most common words' rows, in RAM
        self._held: CommonWords | None = None  # during retrieve: common_words, when current
        self._passing: dict | None = None  # during retrieve: a date/collection filter's rowid flags (_held_passing)
        self._beside = threading.local()  # .conn: the connection of work running beside the keyword side
        self.embedder = embedder
        self.reranker = reranker if reranker is not None else load_reranker(self.settings)
        self._df_cache: dict[str, int] = {}
        self._df_cache_size = -1
        self._counts: dict[tuple[int, ...] | str, Any] = {}  # chunks per scope, "items", "embedder"
        self._ram: bool | None = None  # during retrieve: whether the bits in RAM are current
        self._now: tuple[int, int] | None = None  # during retrieve: the index's state (_stamp)
        self._counts_stamp: tuple[int, int] | None = None
        self._corpora: dict[tuple[int, ...], Corpus] = {}  # per scope, for one index state (_counts_stamp)

    @property
    def weights(self) -> dict[str, float]:
        s = self.settings
        return {"vector": s.vector_weight, "keyword": s.keyword_weight, "keyword_chunks": s.keyword_chunk_weight,
                "title": s.title_weight}

    @property
    def chunk_weights(self) -> dict[str, float]:
        """Which chunk of an item is shown: vector and chunk BM25, weighted like the item's two sides."""
        s = self.settings
        return {"vector": s.vector_weight, "keyword_chunks": s.keyword_weight + s.keyword_chunk_weight}

    def search(self, request: SearchRequest) -> SearchResult:
        if request.mode not in MODES:
            raise QueryError(f"Unknown mode '{request.mode}'. Use one of: {', '.join(MODES)}.")
        if not request.query.strip():
            raise QueryError("The query is empty. Say what to search for.")
        top_k = request.top_k or self.settings.top_k
        if not 1 <= top_k <= MAX_TOP_K:
            raise QueryError(f"top_k must be between 1 and {MAX_TOP_K} (got {top_k}).")
        result = SearchResult([], request)
        with self.store.lock:
            self._now = None
            self._now = self._stamp()  # a search writes nothing: the index's state is read once
            try:
                self._answer(request, top_k, result)
            finally:
                self._now = None
        return result

    def _answer(self, request: SearchRequest, top_k: int, result: SearchResult) -> None:
        got = self.retrieve(request, result)
        if got is None:
            return
        t0 = time.perf_counter()
        terms = got.terms
        pattern = term_pattern([w for t in terms for w in t.text.split()])
        if request.chunks:
            fused = fuse_chunks(got.chunk_rankings, got.item_rankings, got.item_of, self.weights,
                                self.settings.rrf_k)[:top_k]
            result.hits = self._chunk_hits(fused, got, pattern)
        else:
            items = self.fuse(got, result)
            items = keep_pinned_first(self._rerank(request, items, got, result), got)[:top_k]
            self._choose_chunks(items, terms, request.filters, result)
            result.hits = self._item_hits(items, pattern, got)
        result.timings_ms["fuse_and_fetch"] = round(_ms(t0) - result.timings_ms.get("rerank", 0.0), 2)

    # -- retrieve -----------------------------------------------------------------------------

    def retrieve(self, request: SearchRequest, result: SearchResult) -> Retrieved | None:
        """Each retriever's candidates (None: nothing indexed in scope). Call with the store lock held."""
        top_k = request.top_k or self.settings.top_k
        limit = max(self.settings.candidates, top_k)  # items wanted from each retriever
        coll_ids = self._collection_ids(request.filters.collections, request.scope)
        result.chunks_in_index = self._scope_size(coll_ids)
        if result.chunks_in_index == 0:
            return None
        result.corpus = self.corpus(request.scope)
        got = Retrieved()
        terms = got.terms = keyword.parse_terms(request.query)  # parsed once a search (~0.1 ms each time)
        self._ram = self.bit_matrix is not None and self.bit_matrix.ready(self._now)  # the bits in RAM serve it
        self._held = self._common_words_now()
        try:
            vector_side = request.mode == "semantic" or (request.mode == "hybrid"
                                                         and self._reads(request.query, result))
            qvec = self._query_vector(request) if vector_side else None  # embedded beside the keyword side
            beside = None
            if qvec is not None and request.mode == "hybrid" and self._beside_ok():
                self._checked()  # the vector side's SQL goes to the second connection, beside the keyword side's
                beside = self.second.submit(self._vector_beside, qvec, request.filters, coll_ids, limit, result, got)
            try:
                if request.mode in ("hybrid", "keyword"):
                    self._keyword(terms, request.filters, coll_ids, limit, result, got)
            finally:
                if beside is not None:
                    wait([beside])  # done before anything else touches the engine, whatever the keyword side did
            if beside is not None:
                beside.result()
            elif qvec is not None:
                self._vector(qvec, request.filters, coll_ids, limit, result, got)
            # each chunk's item (the vector side's rounds looked up theirs already)
            got.item_of.update(self._items_of([c for ids in got.chunk_rankings.values() for c in ids
                                               if c not in got.item_of]))
        finally:
            self._ram = self._held = self._passing = None
        for name, ids in got.chunk_rankings.items():
            got.item_rankings[name] = item_ranking(ids, got.item_of)[:limit]
        return got

    def _common_words_now(self) -> CommonWords | None:
        """The common words held in RAM, when they match the index now (a server's)."""
        held = self.common_words
        return held if held is not None and held.ready(self._now) else None

    def _beside_ok(self) -> bool:
        """The vector side may run on the second connection (a server's, once its bits are in RAM)."""
        return self.second is not None and bool(self._ram) and self.second.available()

    def _vector_beside(self, conn, *args) -> None:
        self._beside.conn = conn
        try:
            self._vector(*args)
        finally:
            self._beside.conn = None

    @property
    def _vconn(self):
        """The connection this thread's vector-side statements go to."""
        return getattr(self._beside, "conn", None) or self.store.conn

    def _checked(self) -> None:
        """The configured embedder is the index's (checked once per index state; a mismatch raises every time)."""
        if "checked" not in self._counts:
            check_embedder(self.store.conn, self.embedder.id, self.embedder.dimensions, self.store.path)
            self._counts["checked"] = True

    def _query_vector(self, request: SearchRequest) -> QueryVector | None:
        """The query's vector, being embedded (None: no vector side: no embedder, or nothing embedded yet)."""
        if self.embedder is None or self._recorded() is None:
            return None
        return QueryVector(self.embedder, request.query, request.query_vector, beside=request.mode == "hybrid")

    def _recorded(self) -> tuple[str, int] | None:
        """The index's embedder, read once per database state (with the counts: _scope_size)."""
        self._scope_size(())
        if "embedder" not in self._counts:
            self._counts["embedder"] = recorded_embedder(self.store.conn)
        return self._counts["embedder"]

    def _reads(self, query: str, result: SearchResult) -> bool:
        """Hybrid: the vector side runs unless the embedder does not read the query's script (then it says so)."""
        if self.embedder is None or reads_script_of(self.embedder, query):
            return True
        result.vector_plan = "skipped: the embedder reads English, not the query's script (keywords answer it)"
        return False

    def fuse(self, got: Retrieved, result: SearchResult | None = None) -> list[FusedItem]:
        """Distinct items by RRF, exact rare-term matches first."""
        pinned = pinned_items(got)
        if result is not None:
            result.exact_terms = sorted({t for ts in got.exact.values() for t in ts})
        strengths = {"title": {i: m.score for i, m in got.names.items()}} if got.names else None
        weights, chunk_weights = (unmatched.scaled(w, got.found_share) for w in (self.weights, self.chunk_weights))
        return fuse_items(got.item_rankings, got.chunk_rankings, got.item_of, weights, chunk_weights,
                          self.settings.rrf_k, pinned, strengths)

    def _collection_ids(self, names: tuple[str, ...], scope: tuple[str, ...] | None = None) -> tuple[int, ...]:
        """The collections' ids; QueryError for a name not in the index, naming the known ones (of `scope` only)."""
        ids = []
        for name in dict.fromkeys(names):
            row = self.store.conn.execute("SELECT id FROM collections WHERE name = ?", (name,)).fetchone()
            if row is None or (scope is not None and name not in scope):
                known = self.store.known_collections_hint() if scope is None else \
                    "Collections you can read: " + (", ".join(sorted(scope)) or "none yet") + "."
                raise QueryError(f"No collection named '{name[:200]}'. {known}")
            ids.append(row[0])
        return tuple(ids)

    def _scope_size(self, coll_ids: tuple[int, ...]) -> int:
        """Chunks in scope, counted once per database state (a count(*) costs ~11 ms at 1M chunks)."""
        conn = self.store.conn
        stamp = self._stamp()
        if self._counts_stamp != stamp:
            self._counts, self._counts_stamp, self._corpora = {}, stamp, {}
        if coll_ids not in self._counts:
            if not coll_ids:
                n = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
            else:
                sql = f"SELECT count(*) FROM chunks WHERE collection_id IN ({','.join('?' * len(coll_ids))})"
                n = conn.execute(sql, coll_ids).fetchone()[0]
            self._counts[coll_ids] = n
        return self._counts[coll_ids]

    def corpus(self, scope: tuple[str, ...] | None) -> Corpus | None:
        """The word statistics of the collections `scope` names (those that exist), kept while the index does not
        change; None for the whole index (no scope, or a store without scoped statistics). Call with the lock held."""
        if scope is None or not self.scoped_stats:
            return None
        self._scope_size(())  # resets the cached figures when the index changed
        marks = ",".join("?" * len(scope)) or "NULL"
        ids = tuple(sorted(r[0] for r in self.store.conn.execute(
            f"SELECT id FROM collections WHERE name IN ({marks})", tuple(scope))))
        if ids not in self._corpora:
            self._corpora[ids] = Corpus(self.store.conn, ids)
        return self._corpora[ids]

    def _stamp(self) -> tuple[int, int]:
        """Changes whenever the index does (commits by other connections, and this connection's own writes)."""
        if self._now is not None:  # read at the start of this search
            return self._now
        conn = self.store.conn
        return conn.execute("PRAGMA data_version").fetchone()[0], conn.total_changes

    def _items_count(self) -> int:
        """Items in the index, counted once per database state (with the chunks in scope: _scope_size)."""
        self._scope_size(())  # resets the counts when the index changed
        if "items" not in self._counts:
            self._counts["items"] = self.store.conn.execute("SELECT count(*) FROM items").fetchone()[0]
        return self._counts["items"]

    def _items_of(self, chunk_ids: list[int]) -> dict[int, int]:
        if not chunk_ids:
            return {}
        if self._ram:
            return self.bit_matrix.items_of(list(set(chunk_ids)))
        rows = self._vconn.execute("SELECT id, item_id FROM chunks WHERE id IN (SELECT value FROM json_each(?))",
                                       (json.dumps(list(set(chunk_ids))),))
        return dict(rows.fetchall())

    def _keyword(self, terms, filters: Filters, coll_ids, limit: int, result: SearchResult, got: Retrieved) -> None:
        t0 = time.perf_counter()
        conn, corpus = self.store.conn, result.corpus
        n_chunks = result.chunks_in_index if not coll_ids else self._scope_size(())
        if n_chunks != self._df_cache_size:  # document frequencies are only valid for one index state
            self._df_cache, self._df_cache_size = {}, n_chunks
        where = build_where(filters, coll_ids)
        hybrid = result.request.mode == "hybrid"
        n_items = self._items_count() if corpus is None else corpus.rows(keyword.ITEMS)
        self._passing = self._held_passing(filters, coll_ids) if corpus is None else None  # a scope ranks its own
        beside = self._items_beside(terms, where, limit, n_items, hybrid) if corpus is None else None
        run = self._keyword_chunks(terms, where, limit * CHUNK_DEPTH, n_chunks, hybrid, corpus=corpus)
        result.keyword_expression, result.keyword_dropped, result.keyword_rare = run.expression, run.dropped, run.rare
        got.chunk_rankings["keyword_chunks"] = run.ids
        items = (beside.result() if beside is not None
                 else self._keyword_items(terms, where, limit, n_items, hybrid, corpus=corpus))
        got.item_rankings["keyword"] = items.ids
        got.item_bm25 = dict(zip(items.ids, items.scores))
        item_df = self.item_df if corpus is None else (lambda t: corpus.df(t, keyword.ITEMS, 0))  # the scope's
        got.found_share = unmatched.found_share(terms, item_df, self.embedder) if hybrid else 1.0
        pins = got.found_share >= unmatched.PIN_MIN_SHARE
        if self.settings.exact_max_items and hybrid and pins:  # keyword mode: BM25 already puts rare terms first
            got.exact = self._exact_items(terms, where)
        result.timings_ms["keyword"] = _ms(t0)
        if self.settings.title_weight > 0:
            t0 = time.perf_counter()
            matches = titles.search(conn, result.request.query, terms, where, limit, n_items, self._df_cache,
                                    self.name_lookups if corpus is None else _ScopedNames(corpus))
            got.item_rankings["title"] = [m.item_id for m in matches]
            got.names = {m.item_id: m for m in matches}
            result.timings_ms["title"] = _ms(t0)

    def _held_passing(self, filters: Filters, coll_ids) -> dict | None:
        """A filter of dates, collections and facets (tags, metadata) only as the rowids it lets through (from the
        chunks' times and collections held with the bits, and the facet's chunks listed once per filter), so that
        common words held in RAM are ranked there under it too (100k chunks, the keyword stage's p95: a date filter's
        46-50 -> 8 ms, a 2% tag's 30-35 -> 10-11 ms); None for any other filter, or without both in RAM."""
        if self._held is None or not self._ram:
            return None
        facets = None
        if filters.tags or filters.metadata:
            def facets() -> np.ndarray:  # facet-only: its chunk ids straight from the facet index (once per filter)
                where = build_where(Filters(tags=filters.tags, metadata=filters.metadata))
                return np.fromiter((r[0] for r in self.store.conn.execute(where.ids_sql, where.params)), dtype=np.int64)
        return self.bit_matrix.rows_passing(filters, coll_ids, facets)

    def item_df(self, term: keyword.Term) -> int:
        """Items holding the term (cached per index state)."""
        return keyword._df(self.store.conn, term, self._df_cache, keyword.ITEMS)

    def _keyword_chunks(self, terms, where: SqlFilter, limit: int, n_total: int, hybrid: bool,
                        corpus: Corpus | None = None) -> keyword.KeywordRun:
        """The filter goes inside the FTS query: FTS5 ranks every match whatever the LIMIT, so ranking the unfiltered
        matches first and filtering them after costs a second ranking whenever too few pass (100k chunks, tag filter:
        keyword p95 45 -> 23 ms; at 1M no filter shape got slower)."""
        run = keyword.search(self.store.conn, terms, where, limit, n_total, self._df_cache, may_skip=hybrid,
                             split=None if hybrid else self.split, corpus=corpus, held=self._held,
                             passing=self._passing)
        run.ids = run.ids[:limit]
        return run

    def _items_beside(self, terms, where: SqlFilter, limit: int, n_items: int, hybrid: bool):
        """The whole-item ranking started on the second connection (a Future), or None: it runs after the chunks'.
        rag.db ranks a keyword-only search's large rankings in halves instead (SplitRanker)."""
        return None

    def _keyword_items(self, terms, where: SqlFilter, limit: int, n_items: int, hybrid: bool,
                       corpus: Corpus | None = None) -> keyword.KeywordRun:
        """Items by BM25 over their whole text (items_fts)."""
        return keyword.search(self.store.conn, terms, where, limit, n_items, self._df_cache, may_skip=hybrid,
                              table=keyword.ITEMS, split=None if hybrid else self.split, corpus=corpus,
                              held=self._held, passing=self._passing)

    def _exact_items(self, terms, where: SqlFilter) -> dict[int, list[str]]:
        return keyword.exact_items(self.store.conn, terms, where, self.settings.exact_max_items)

    def _vector(self, pending: QueryVector, filters: Filters, coll_ids, limit: int, result: SearchResult,
                got: Retrieved) -> None:
        """The nearest chunks, widened until they cover `limit` distinct items (or the scope runs out)."""
        recorded = self._recorded()
        self._checked()
        t0 = time.perf_counter()
        qvec = got.query_vector = pending.get()
        got.embedder_id = recorded[0]
        result.timings_ms["embed_query"] = pending.ms  # the model's time; in hybrid it ran beside the keyword side
        if _ms(t0) >= 0.1:
            result.timings_ms["embed_wait"] = _ms(t0)  # what the vector side waited for it
        t0 = time.perf_counter()
        depth = limit * CHUNK_DEPTH
        memo: dict = {}  # what a wider round may reuse (the bits in RAM: distances, sign scores)
        while True:
            rows, exact = self._knn(qvec, filters, coll_ids, depth, result.chunks_in_index, recorded[0], got.vectors,
                                    memo=memo)
            if len(rows) < depth or depth >= MAX_CHUNK_CANDIDATES:
                break
            got.item_of.update(self._items_of([cid for cid, _ in rows if cid not in got.item_of]))  # kept for fusion
            found = len({got.item_of[cid] for cid, _ in rows if cid in got.item_of})
            if found >= limit:
                break
            # chunks of few items crowd the list: look further, as far as the items found so far suggest (a fixed
            # 3x rescored 900 candidates where ~450 sufficed: 150 chunks held 36-48 of 50 items in the bench)
            depth = min(max(int(depth * limit / max(found, 1) * WIDEN_MARGIN), depth * 3 // 2), MAX_CHUNK_CANDIDATES)
        got.chunk_rankings["vector"] = [cid for cid, _ in rows]
        got.chunk_distance = dict(rows)
        result.vector_plan = "exact" if exact else "binary+rescore"
        result.timings_ms["vector"] = _ms(t0)

    def _knn(self, qvec, filters: Filters, coll_ids, limit: int, scope: int, eid: str | None = None,
             vectors: dict | None = None, memo: dict | None = None) -> tuple[list[tuple[int, float]], bool]:
        """(chunk id, distance) of the `limit` nearest chunks passing the filters, and whether the KNN was exact.

        eid: the embedder id the index records (its embedding cache holds the float vectors for rescoring);
        vectors: where the float vectors read for rescoring are kept (the reranker reads some of them again; a
        wider round reads only those it lacks); memo: kept by the caller for one query (BitMatrix.nearest's)."""
        conn = self._vconn
        rest = build_where(filters.without_collections())
        in_ram = self._ram if self._ram is not None else self.bit_matrix is not None and self.bit_matrix.ready()
        vplan = vector.plan(qvec, limit, scope, coll_ids, NO_FILTER, overfetch=1 if rest.empty else OVERFETCH,
                            exact_limit=min(RAM_EXACT_LIMIT, vector.EXACT_SCOPE_LIMIT) if in_ram else None)
        if not vplan.exact and in_ram:
            return self._knn_bits(qvec, rest, coll_ids, limit, vplan.k, eid, scope, vectors, filters, memo), False
        rows = vector.run(conn, qvec, vplan, vplan.k if not rest.empty else limit, eid)
        if not rest.empty:
            ok = passing(conn, [cid for cid, _ in rows], rest)
            kept = [r for r in rows if r[0] in ok]
            rate = len(kept) / max(len(rows), 1)
            if len(kept) < limit and len(rows) >= vplan.k and rate >= MIN_PASS_RATE:
                # a fair share passes: a wider unfiltered KNN sized by that share usually suffices
                k = min(int(vplan.k * limit / max(len(kept), 1) * 1.5), vector.MAX_K)
                vplan = vector.plan(qvec, limit, scope, coll_ids, NO_FILTER, k=k)
                rows = vector.run(conn, qvec, vplan, vplan.k, eid)
                ok = passing(conn, [cid for cid, _ in rows], rest)
                kept = [r for r in rows if r[0] in ok]
            if len(kept) < limit and len(rows) >= vplan.k:  # too few pass: filter inside the KNN itself
                vplan = vector.plan(qvec, limit, scope, coll_ids, rest)
                kept = vector.run(conn, qvec, vplan, limit, eid)
            rows = kept
        return rows[:limit], vplan.exact

    def _knn_bits(self, qvec, rest: SqlFilter, coll_ids, limit: int, k: int, eid: str | None,
                  scope: int, vectors: dict | None = None, filters: Filters | None = None,
                  memo: dict | None = None) -> list[tuple[int, float]]:
        """Binary candidates from the sign bits in RAM (any k costs the same), rescored. A filter is tried on the
        unfiltered nearest first; when too few of those pass (a selective filter), on the filter's own chunks.
        A filter of dates only is tested on the chunks' times held with the bits."""
        conn, bits = self._vconn, self.bit_matrix
        dates = bits.date_test(filters) if filters is not None else None

        floats = vectors if vectors is not None else {}

        def rescore(rows: list) -> list[tuple[int, float]]:  # float vectors held in RAM, else read by their cache rows
            held = bits.rescore(rows, rqvec, limit)
            if held is not None:
                return held
            floats.update(bits.vectors_of([c for c, _ in rows if c not in floats]))
            missing = [c for c, _ in rows if c not in floats]
            return vector.rescore(conn, qvec, rows, limit, eid, bits.cache_rows(missing) if missing else None, floats,
                                  bits.centre_of())

        qbits = vector.query_bits(conn, qvec, bits.centre_of())
        rqvec = ranking_query(qvec, bits.centre_of())  # the signs' dot product with it ranks as rescoring will
        if scope >= RAM_RESCORE_WIDE_FROM:
            k *= RAM_RESCORE_FACTOR
        if rest.empty:
            return rescore(bits.nearest(qbits, k, coll_ids, query=rqvec, memo=memo))
        if rest.ids_sql is not None:  # facet-only (tags, metadata): listing a few of its chunks costs ~0.3 us each
            ids = [r[0] for r in conn.execute(f"{rest.ids_sql} LIMIT ?", (*rest.params, FACET_IDS_MAX + 1))]
            if len(ids) <= FACET_IDS_MAX:
                return rescore(bits.nearest(qbits, k, coll_ids, chunk_ids=np.array(ids, dtype=np.int64), query=rqvec))
        wide = k * OVERFETCH
        for _ in range(2):
            near = bits.nearest(qbits, wide, coll_ids, query=rqvec, memo=memo)
            ids = [cid for cid, _ in near]
            ok = dates.passing(ids) if dates else passing(conn, ids, rest)
            kept = [r for r in near if r[0] in ok]
            if len(kept) >= k or len(near) < wide:
                return rescore(kept[:k])
            if len(kept) < MIN_PASS_RATE * len(near):
                break
            wide = min(int(wide * k / max(len(kept), 1) * 1.5), 50 * k)  # a fair share passes: look further
        ids = dates.every() if dates else np.fromiter((r[0] for r in conn.execute(rest.ids_query(), rest.params)),
                                                      dtype=np.int64)
        return rescore(bits.nearest(qbits, k, coll_ids, chunk_ids=ids, query=rqvec))

    # -- rerank, chunks, hits -----------------------------------------------------------------

    def _rerank(self, request: SearchRequest, items: list[FusedItem], got: Retrieved,
                result: SearchResult) -> list[FusedItem]:
        reranker = self.reranker or (FeatureReranker() if request.rerank else None)  # --rerank with it off
        if reranker is None or request.rerank is False or request.mode != "hybrid" or not items:
            return items
        t0 = time.perf_counter()
        head = items[: self.settings.rerank_top]
        self._choose_chunks(head, got.terms, request.filters, result)
        candidates = self.candidates(request.query, head, got, result.corpus)
        self._read_vectors([c for cand in candidates for c in cand.chunks], got)
        order, scores, note = apply_rerank(reranker, request.query, candidates, got,
                                           self.settings.rerank_budget_ms / 1000, self.store)
        for item, score in zip(head, scores):
            item.rerank_score = score
        result.reranker, result.rerank_note = reranker.id, note
        reranked = [head[n] for n in order] + items[len(head):]
        result.timings_ms["rerank"] = _ms(t0)
        return reranked

    def _read_vectors(self, chunk_ids: list[int], got: Retrieved) -> None:
        """The float vectors the reranker compares (read by cache row with the bits in RAM) beside those rescored."""
        missing = [c for c in dict.fromkeys(chunk_ids) if c not in got.vectors]
        if self.bit_matrix is None or got.query_vector is None or not missing or not self.bit_matrix.ready(self._now):
            return
        got.vectors.update(self.bit_matrix.vectors_of(missing))
        missing = [c for c in missing if c not in got.vectors]
        if missing:
            got.vectors.update(fetch_vectors(self.store.conn, [], None, self.bit_matrix.cache_rows(missing)))

    def candidates(self, query: str, head: list[FusedItem], got: Retrieved,
                   corpus: Corpus | None = None) -> list[Candidate]:
        """The fused head as a reranker sees it (its chunks chosen first: `_choose_chunks`)."""
        idf = self._idf(query) if corpus is None else corpus.query_idf(query)
        candidates = [Candidate.of(i, got, t) for i, t in zip(head, self._item_texts(head, got))]
        for c in candidates:
            c.idf = idf
        return candidates

    def _idf(self, query: str) -> dict[str, float]:
        """The query's stems and their IDF over whole items (the reranker's weights)."""
        return query_idf(self.store.conn, query, self._items_count(), self._df_cache)

    def _item_texts(self, items: list[FusedItem], got: Retrieved) -> list[tuple[str, str, str]]:
        """(title, text, heading) per item as a reranker reads it: its best chunk, then its other matching chunks;
        the best chunk's heading path (the rows are kept for the hits: chunk_rows.py)."""
        wanted = {i.item_id: [c for c in [i.chunk_id, *i.others[:RERANK_SECTIONS - 1]] if c is not None] for i in items}
        rows = self._rows([c for cs in wanted.values() for c in cs], got)
        out = []
        for item in items:
            parts = [rows[c] for c in wanted[item.item_id] if c in rows]
            text = "\n\n".join(chunk_body(r[chunk_rows.TEXT], r[chunk_rows.TITLE]) for r in parts)
            out.append((parts[0][chunk_rows.TITLE], text, chunk_rows.heading(parts[0][chunk_rows.HEADING_PATH]))
                       if parts else ("", "", ""))
        return out

    def _choose_chunks(self, items: list[FusedItem], terms, filters: Filters, result: SearchResult) -> None:
        """A chunk for items that only the whole-item index found: their best matching chunk, else the first."""
        todo = [i for i in items if i.chunk_id is None]
        if not todo:
            return
        best = self._best_chunks([i.item_id for i in todo], terms, build_where(filters), result)
        for item in todo:
            item.chunk_id = best.get(item.item_id)

    def _best_chunks(self, item_ids: list[int], terms, where: SqlFilter, result: SearchResult) -> dict[int, int]:
        expr = result.keyword_expression or keyword.match_expression(terms)
        held = self._common_words_now()
        return keyword.best_chunks(self.store.conn, item_ids, expr, where, probe=result.keyword_rare, terms=terms,
                                   df_cache=self._df_cache, corpus=result.corpus, held=held)

    def _item_hits(self, items: list[FusedItem], pattern, got: Retrieved) -> list[Hit]:
        ids = [i.chunk_id for i in items if i.chunk_id is not None]
        others = {i.item_id: i.others[:MAX_SECTIONS] for i in items}
        rows = self._rows(ids + [c for cs in others.values() for c in cs], got)
        hits = []
        for item in items:
            r = rows.get(item.chunk_id)
            if r is None:  # deleted between retrieval and fetch
                continue
            sections = tuple(_section(rows[c]) for c in others[item.item_id] if c in rows)
            hits.append(_hit(r, pattern, item.score, item.chunk_ranks, item.ranks, sections, item.rerank_score))
        return hits

    def _chunk_hits(self, fused: list[Fused], got: Retrieved, pattern) -> list[Hit]:
        rows = self._rows([f.id for f in fused], got)
        item_rank = {name: {item: n for n, item in enumerate(ids, start=1)} for name, ids in got.item_rankings.items()}
        hits = []
        for f in fused:
            r = rows.get(f.id)
            if r is None:
                continue
            ranks = {name: ranks[r[1]] for name, ranks in item_rank.items() if r[1] in ranks}
            hits.append(_hit(r, pattern, f.score, f.ranks, ranks, (), None))
        return hits

    def _rows(self, chunk_ids: list[int], got: Retrieved) -> dict[int, tuple]:
        """The chunks' rows (chunk_rows.ROW_SQL), each read once per query."""
        return chunk_rows.rows(self.store.conn, chunk_ids, got.rows) if chunk_ids else {}


class _ScopedNames(titles._Fts5Lookups):
    """titles.search's lookups with the scope's document frequencies (rag.db's candidates and stems)."""

    def __init__(self, corpus: Corpus):
        self.corpus = corpus

    def df(self, conn, term, cache, table) -> int:
        return self.corpus.df(term, table)


def pinned_items(got: Retrieved) -> list[int]:
    """Items that go first whatever the fusion or a reranker says: a name the query equals (its title or an alias),
    then items holding a rare query term that only they hold (an identifier), most such terms first."""
    named = sorted((i for i, m in got.names.items() if m.exact), key=lambda i: -len(got.exact.get(i, ())))
    return named + [i for i in sorted(got.exact, key=lambda i: -len(got.exact[i])) if i not in named]


def keep_pinned_first(items: list[FusedItem], got: Retrieved) -> list[FusedItem]:
    """After reranking: pinned items back in front, exact names before identifiers, in the reranker's order within
    each group: a reranker never buries them."""
    named = {i for i, m in got.names.items() if m.exact}
    if not named and not got.exact:
        return items
    return sorted(items, key=lambda i: 0 if i.item_id in named else 1 if i.item_id in got.exact else 2)


def _hit(r: tuple, pattern, score: float, chunk_ranks: dict[str, int], item_ranks: dict[str, int],
         sections: tuple, rerank_score: float | None) -> Hit:
    return Hit(
        chunk_id=r[0], item_id=r[1], collection=r[2], source_type=r[3], key=r[4], uri=r[5],
        title=r[6], text=r[7], snippet=snippet(chunk_body(r[7], r[6]), pattern), chunk_index=r[8],
        heading_path=tuple(json.loads(r[9])), page=r[10], ts=r[11], author=r[12],
        tags=tuple(json.loads(r[13])), metadata=json.loads(r[14]), score=score,
        vector_rank=chunk_ranks.get("vector"), keyword_rank=chunk_ranks.get("keyword_chunks"),
        item_ranks=dict(item_ranks), sections=sections, rerank_score=rerank_score,
    )


def _section(r: tuple) -> dict:
    """A matching chunk named by its heading path, else by the first heading inside it (a chunk that joins the end
    of one section to the next has no common path), else None (then shown by its position)."""
    heading = " > ".join(json.loads(r[9])) or next(
        (line.lstrip("#").strip() for line in r[7].split("\n") if line.startswith("#") and line.lstrip("#")[:1] == " "),
        None)
    return {"chunk_index": r[8], "heading": heading, "page": r[10]}


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 2)

