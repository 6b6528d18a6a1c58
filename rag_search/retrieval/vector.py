"""Vector retrieval with sqlite-vec: exact float KNN on small scopes, binary KNN + float rescoring on large.

Filters run inside the KNN: a collection filter selects vec0 partitions; every other filter becomes a
`chunk_id IN (SELECT ...)` constraint that vec0 applies while it scans, so a filtered search finds
matches that lie far outside the unfiltered top-k.

Exact float KNN over 100k x 384 takes ~100 ms here; Hamming KNN over the sign bits takes a fraction
of that, and rescoring a few hundred candidates with their float vectors restores the ranking.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rag_search.retrieval.filters import SqlFilter
from rag_search.store.vectors import as_blob, bits_centre, bits_input, fetch_vectors, ranking_query

EXACT_SCOPE_LIMIT = 20_000  # up to this many chunks in scope, KNN is exact over float vectors
COARSE_FACTOR = 2  # binary candidates per wanted result, before rescoring (see bench/vector_recall.py)
COARSE_MIN = 100
MAX_K = 4096  # sqlite-vec's largest k


@dataclass(frozen=True)
class VectorPlan:
    sql: str
    params: tuple[Any, ...]
    exact: bool
    k: int


def plan(query: np.ndarray, limit: int, scope_size: int, collection_ids: tuple[int, ...], rest: SqlFilter,
         overfetch: int = 1, k: int | None = None, exact_limit: int | None = None) -> VectorPlan:
    """The KNN statement for a query vector: which column, how many neighbours, which constraints.

    `overfetch` widens an exact search; a binary search already returns all its coarse candidates rescored.
    `exact_limit`: the largest scope searched exactly (default EXACT_SCOPE_LIMIT; smaller with the bits in RAM).
    A binary plan's first parameter is the query as given; run() centres it as the index's sign bits are.
    """
    exact = scope_size <= (EXACT_SCOPE_LIMIT if exact_limit is None else exact_limit)
    k = min(k or (limit * overfetch if exact else max(limit * COARSE_FACTOR, COARSE_MIN)), MAX_K)
    blob = as_blob(query)
    if exact:
        match, params = "v.embedding MATCH ?", [blob]
    else:
        match, params = "v.embedding_bits MATCH vec_quantize_binary(?)", [blob]
    parts = [match, "k = ?"]
    params.append(k)
    if collection_ids:
        parts.append(f"v.collection_id IN ({','.join('?' * len(collection_ids))})")
        params.extend(collection_ids)
    if not rest.empty:
        parts.append(
            f"v.chunk_id IN (SELECT c.id FROM chunks c JOIN items i ON i.id = c.item_id WHERE {rest.sql})"
        )
        params.extend(rest.params)
    sql = f"SELECT v.chunk_id, v.distance FROM chunk_vec v WHERE {' AND '.join(parts)}"
    return VectorPlan(sql, tuple(params), exact, k)


def run(conn: Any, query: np.ndarray, vplan: VectorPlan, limit: int,
        embedder_id: str | None = None) -> list[tuple[int, float]]:
    """(chunk_id, cosine distance) nearest first, at most `limit`; around the index's centre if it records one
    (store.vectors.ranking_query)."""
    centre = bits_centre(conn)
    first = as_blob(ranking_query(query, centre)) if vplan.exact else bits_input(query, centre)
    params = (first, *vplan.params[1:])
    rows = conn.execute(vplan.sql, params).fetchall()
    if vplan.exact:
        rows.sort(key=lambda r: r[1])  # several partitions each return their own k
        return [(int(cid), float(d)) for cid, d in rows[:limit]]
    return rescore(conn, query, rows, limit, embedder_id, centre=centre)


READ = object()


def query_bits(conn: Any, query: np.ndarray, centre: Any = READ) -> bytes:
    """The query's sign bits exactly as sqlite-vec quantises stored vectors (centred as they are; `centre`: the
    index's, when the caller has it)."""
    centre = bits_centre(conn) if centre is READ else centre
    return conn.execute("SELECT vec_quantize_binary(?)", (bits_input(query, centre),)).fetchone()[0]


def rescore(conn: Any, query: np.ndarray, rows: list, limit: int, embedder_id: str | None = None,
            cache_rows: dict[int, int] | None = None, keep: dict | None = None,
            centre: Any = READ) -> list[tuple[int, float]]:
    """Binary candidates re-ranked by their float vectors' cosine distance (around the index's centre if it records
    one), at most `limit`.

    cache_rows: see fetch_vectors; keep: a dict of vectors read already (only the others are read) that those read
    are added to; centre: the index's, when the caller has it."""
    centre = bits_centre(conn) if centre is READ else centre
    kept = keep or {}
    candidates = {cid: kept[cid] for cid, _ in rows if cid in kept}
    missing = [cid for cid, _ in rows if cid not in candidates]
    if missing:
        wanted = {c: r for c, r in cache_rows.items() if c not in candidates} if cache_rows and candidates \
            else cache_rows
        read = fetch_vectors(conn, missing, embedder_id, wanted)
        candidates.update(read)
        if keep is not None:
            keep.update(read)
    if not candidates:
        return []
    ids = sorted(candidates)
    return nearest_of(ids, np.stack([candidates[i] for i in ids]), ranking_query(query, centre), limit)


def nearest_of(ids: list[int], vectors: np.ndarray, query: np.ndarray, limit: int) -> list[tuple[int, float]]:
    """(chunk id, cosine distance) of the `limit` rows of `vectors` (one per id, ids ascending) most similar to the
    ranking query; equal similarity: the lower chunk id first. Rescoring from SQLite and from the vectors a server
    holds (BitMatrix.rescore) both end here, so they agree to the bit."""
    sims = vectors @ query.astype(np.float32)
    best = np.argsort(-sims, kind="stable")[:limit]
    return [(ids[j], float(1.0 - sims[j])) for j in best]
