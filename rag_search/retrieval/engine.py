"""The hybrid query engine: keyword (FTS5 BM25) + vector (sqlite-vec) retrieval, fused with RRF."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Literal

from rag_search.config import SearchSettings
from rag_search.embedders.base import Embedder
from rag_search.errors import QueryError
from rag_search.records import Hit, chunk_body
from rag_search.retrieval import keyword, vector
from rag_search.retrieval.filters import Filters, SqlFilter, build_where, passing
from rag_search.retrieval.fusion import rrf
from rag_search.retrieval.snippets import snippet, term_pattern
from rag_search.store import Store
from rag_search.store.vectors import check_embedder, recorded_embedder

Mode = Literal["hybrid", "keyword", "semantic"]
MODES: tuple[str, ...] = ("hybrid", "keyword", "semantic")
NO_FILTER = SqlFilter("1", ())
# Filters are tried first on this many times the wanted candidates of the unfiltered retriever: when
# enough pass, they are exactly the filtered top candidates (scores do not depend on filters); when
# too few pass (a selective filter), the filter goes into the retriever's own query instead.
OVERFETCH = 4
KEYWORD_OVERFETCH = 20  # FTS5 ranks every match whatever the LIMIT, so a wide over-fetch costs little
MIN_PASS_RATE = 0.1  # below this share passing, the filter goes into the KNN instead of widening it


@dataclass(frozen=True)
class SearchRequest:
    query: str
    top_k: int | None = None
    mode: Mode = "hybrid"
    filters: Filters = field(default_factory=Filters)


@dataclass
class SearchResult:
    hits: list[Hit]
    request: SearchRequest
    keyword_expression: str | None = None
    keyword_dropped: list[str] = field(default_factory=list)  # common words left out of the MATCH
    vector_plan: str | None = None  # "exact" or "binary+rescore"
    chunks_in_index: int = 0
    timings_ms: dict[str, float] = field(default_factory=dict)


class SearchEngine:
    """Answers SearchRequests against one Store with one Embedder (loaded lazily by the embedder)."""

    def __init__(self, store: Store, embedder: Embedder | None, settings: SearchSettings | None = None):
        self.store = store
        self.embedder = embedder
        self.settings = settings or SearchSettings()
        self._df_cache: dict[str, int] = {}
        self._df_cache_size = -1

    def search(self, request: SearchRequest) -> SearchResult:
        if request.mode not in MODES:
            raise QueryError(f"Unknown mode '{request.mode}'. Use one of: {', '.join(MODES)}.")
        if not request.query.strip():
            raise QueryError("The query is empty. Say what to search for.")
        top_k = request.top_k or self.settings.top_k
        if not 1 <= top_k <= 200:
            raise QueryError(f"top_k must be between 1 and 200 (got {top_k}).")
        limit = max(self.settings.candidates, top_k)
        result = SearchResult([], request)
        with self.store.lock:
            coll_ids = self._collection_ids(request.filters.collections)
            result.chunks_in_index = self._scope_size(coll_ids)
            if result.chunks_in_index == 0:
                return result
            rankings: dict[str, list[int]] = {}
            terms = keyword.parse_terms(request.query)
            if request.mode in ("hybrid", "keyword"):
                rankings["keyword"] = self._keyword(terms, request.filters, coll_ids, limit, result)
            if request.mode in ("hybrid", "semantic"):
                rankings["vector"] = self._vector(request.query, request.filters, coll_ids, limit, result)
            t0 = time.perf_counter()
            weights = {"vector": self.settings.vector_weight, "keyword": self.settings.keyword_weight}
            fused = rrf(rankings, weights, self.settings.rrf_k)[:top_k]
            pattern = term_pattern([w for t in terms for w in t.text.split()])
            result.hits = self._hydrate(fused, pattern)
            result.timings_ms["fuse_and_fetch"] = _ms(t0)
        return result

    def _collection_ids(self, names: tuple[str, ...]) -> tuple[int, ...]:
        ids = []
        for name in names:
            row = self.store.conn.execute("SELECT id FROM collections WHERE name = ?", (name,)).fetchone()
            if row is None:
                raise QueryError(f"No collection named '{name}'. {self.store.known_collections_hint()}")
            ids.append(row[0])
        return tuple(ids)

    def _scope_size(self, coll_ids: tuple[int, ...]) -> int:
        if not coll_ids:
            return self.store.conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        marks = ",".join("?" * len(coll_ids))
        sql = f"SELECT count(*) FROM chunks WHERE collection_id IN ({marks})"
        return self.store.conn.execute(sql, coll_ids).fetchone()[0]

    def _keyword(self, terms, filters: Filters, coll_ids, limit: int, result: SearchResult) -> list[int]:
        mode = result.request.mode
        t0 = time.perf_counter()
        n_total = result.chunks_in_index if not coll_ids else self._scope_size(())
        if n_total != self._df_cache_size:  # document frequencies are only valid for one index state
            self._df_cache, self._df_cache_size = {}, n_total
        where = build_where(filters, coll_ids)
        conn = self.store.conn
        hybrid = mode == "hybrid"
        wanted = limit if where.empty else limit * KEYWORD_OVERFETCH
        run = keyword.search(conn, terms, NO_FILTER, wanted, n_total, self._df_cache, may_skip=hybrid)
        if not where.empty:
            passed = passing(conn, run.ids, where)
            if len(passed) >= limit or len(run.ids) < wanted:
                run.ids = [i for i in run.ids if i in passed]
            else:  # too few of the unfiltered best pass: filter inside the FTS query itself
                run = keyword.search(conn, terms, where, limit, n_total, self._df_cache, may_skip=hybrid)
        result.keyword_expression, result.keyword_dropped = run.expression, run.dropped
        result.timings_ms["keyword"] = _ms(t0)
        return run.ids[:limit]

    def _vector(self, query: str, filters: Filters, coll_ids, limit: int, result: SearchResult) -> list[int]:
        recorded = recorded_embedder(self.store.conn)
        if recorded is None or self.embedder is None:
            return []
        check_embedder(self.store.conn, self.embedder.id, self.embedder.dimensions, self.store.path)
        t0 = time.perf_counter()
        qvec = self.embedder.embed_query(query)
        result.timings_ms["embed_query"] = _ms(t0)
        t0 = time.perf_counter()
        conn, scope = self.store.conn, result.chunks_in_index
        rest = build_where(filters.without_collections())
        vplan = vector.plan(qvec, limit, scope, coll_ids, NO_FILTER, overfetch=1 if rest.empty else OVERFETCH)
        rows = vector.run(conn, qvec, vplan, vplan.k if not rest.empty else limit)
        ids = [cid for cid, _ in rows]
        if not rest.empty:
            ok = passing(conn, ids, rest)
            ids = [i for i in ids if i in ok]
            rate = len(ids) / max(len(rows), 1)
            if len(ids) < limit and len(rows) >= vplan.k and rate >= MIN_PASS_RATE:
                # a fair share passes: a wider unfiltered KNN sized by that share usually suffices
                vplan = vector.plan(qvec, limit, scope, coll_ids, NO_FILTER, k=int(vplan.k * limit / max(len(ids), 1) * 1.5))
                rows = vector.run(conn, qvec, vplan, vplan.k)
                wider = [cid for cid, _ in rows]
                ok = passing(conn, wider, rest)
                ids = [i for i in wider if i in ok]
            if len(ids) < limit and len(rows) >= vplan.k:  # too few pass: filter inside the KNN itself
                vplan = vector.plan(qvec, limit, scope, coll_ids, rest)
                ids = [cid for cid, _ in vector.run(conn, qvec, vplan, limit)]
        result.vector_plan = "exact" if vplan.exact else "binary+rescore"
        result.timings_ms["vector"] = _ms(t0)
        return ids[:limit]

    def _hydrate(self, fused, pattern) -> list[Hit]:
        if not fused:
            return []
        ids = [f.chunk_id for f in fused]
        marks = ",".join("?" * len(ids))
        rows = self.store.conn.execute(
            "SELECT c.id, c.item_id, coll.name, i.source_type, i.key, i.uri, c.title, c.text, c.idx, "
            "c.heading_path, c.page, c.ts, c.author, c.tags, c.metadata FROM chunks c "
            "JOIN items i ON i.id = c.item_id JOIN collections coll ON coll.id = c.collection_id "
            f"WHERE c.id IN ({marks})",
            ids,
        ).fetchall()
        by_id = {r[0]: r for r in rows}
        hits = []
        for f in fused:
            r = by_id.get(f.chunk_id)
            if r is None:  # deleted between retrieval and fetch
                continue
            hits.append(
                Hit(
                    chunk_id=r[0], item_id=r[1], collection=r[2], source_type=r[3], key=r[4], uri=r[5],
                    title=r[6], text=r[7], snippet=snippet(chunk_body(r[7], r[6]), pattern), chunk_index=r[8],
                    heading_path=tuple(json.loads(r[9])), page=r[10], ts=r[11], author=r[12],
                    tags=tuple(json.loads(r[13])), metadata=json.loads(r[14]), score=f.score,
                    vector_rank=f.ranks.get("vector"), keyword_rank=f.ranks.get("keyword"),
                )
            )
        return hits


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 2)
