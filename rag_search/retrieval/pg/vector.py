"""Vector retrieval on the PostgreSQL store (pgvector): exact cosine KNN on small scopes; on large ones the
nearest sign-bit codes by Hamming distance from an HNSW index, rescored by their float vectors in the same
statement. Filters go inside the statement (pgvector 0.8's iterative index scan keeps looking until enough
rows pass); when a selective filter still leaves too few, the KNN is exact over the rows that pass. A filter of
facets only comes listed as its chunk ids (pg/engine.py: PgSearchEngine._listed): the KNN is exact among them (a 2%
tag at 1M chunks: 88 ms, where the filtered HNSW scan walked 611).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rag_search.retrieval.filters import SqlFilter
from rag_search.retrieval.pg.keyword import LISTED_CHUNKS
from rag_search.retrieval.vector import EXACT_SCOPE_LIMIT
from rag_search.store.pg.connection import vector_text
from rag_search.store.pg.schema import bits_centre, bits_sql
from rag_search.store.vectors import ranking_query

# Hamming candidates per wanted row, rescored by their float vectors. At 1M chunks a default search (150 rows)
# finds 0.876 of the exact top 10 with 600 candidates, 0.952 with 2,000, 0.972 with 4,000 (p50 19 / 39 / 53 ms;
# bench/pg_candidates.py): ties in Hamming distance need many candidates.
COARSE_FACTOR = 16
COARSE_MIN = 1000


def knn(conn: Any, query: np.ndarray, limit: int, scope: int, collection_ids: tuple[int, ...],
        rest: SqlFilter) -> tuple[list[tuple[int, float]], bool]:
    """(chunk id, cosine distance) of the `limit` nearest chunks passing the filters, and whether it was exact; around
    the index's centre if it records one (store.vectors.ranking_query)."""
    where, params = _where(collection_ids, rest)
    if scope > EXACT_SCOPE_LIMIT:
        rows = _binary(conn, query, limit, where, params)
        if len(rows) >= limit:
            return rows, False
    q = vector_text(_ranked(query, bits_centre(conn)))
    rows = conn.execute(f"SELECT v.chunk_id, v.embedding <=> ?::vector AS d FROM chunk_vec v{where} "
                        "ORDER BY d, v.chunk_id LIMIT ?", (q, *params, limit)).fetchall()
    return [(int(c), float(d)) for c, d in rows], True


def _where(collection_ids: tuple[int, ...], rest: SqlFilter) -> tuple[str, list[Any]]:
    parts, params = [], []
    joins = ""
    if collection_ids:
        parts.append("v.collection_id = ANY(?)")
        params.append(list(collection_ids))
    if rest.sql == LISTED_CHUNKS:  # the chunk ids passing the filter (pg/engine.py: _listed)
        parts.append("v.chunk_id = ANY(?)")
        params.extend(rest.params)
    elif not rest.empty:
        joins = " JOIN chunks c ON c.id = v.chunk_id JOIN items i ON i.id = c.item_id"
        parts.append(rest.sql)
        params.extend(rest.params)
    return (joins + (" WHERE " + " AND ".join(parts) if parts else "")), params


def _ranked(query: np.ndarray, centre: str | None) -> np.ndarray:
    return ranking_query(query, None if centre is None else _parse(centre))


def _binary(conn: Any, query: np.ndarray, limit: int, where: str, params: list[Any]) -> list[tuple[int, float]]:
    """Hamming candidates from the HNSW index over the sign bits (the stored vectors' minus the centre), rescored by
    cosine distance to the ranking query (around the centre: its signs are the query's bits)."""
    wide, dims = max(limit * COARSE_FACTOR, COARSE_MIN), len(query)
    with conn.raw.transaction():
        centre = bits_centre(conn)
        q = coarse = vector_text(_ranked(query, centre))
        conn.execute("SELECT set_config('hnsw.ef_search', ?, true), set_config('hnsw.iterative_scan', "
                     "'relaxed_order', true)", (str(min(max(wide, 40), 1000)),))
        rows = conn.execute(binary_sql(where, dims, centre), (q, *params, coarse, wide, limit)).fetchall()
    return [(int(c), float(d)) for c, d in rows]


def binary_sql(where: str, dims: int, centre: str | None) -> str:
    """Candidates by Hamming distance (ordered by the index's own expression, or the planner cannot use it),
    rescored by cosine distance. Parameters: query, filters, the query's vector for the bits, candidates, limit."""
    bits = f"{bits_sql('v.embedding', dims, centre)} <~> binary_quantize(?::vector)"
    return (f"SELECT chunk_id, d FROM (SELECT v.chunk_id, v.embedding <=> ?::vector AS d FROM chunk_vec v{where} "
            f"ORDER BY {bits} LIMIT ?) s ORDER BY d, chunk_id LIMIT ?")


def _parse(text: str) -> np.ndarray:
    return np.asarray([float(x) for x in text.strip("[]").split(",")], dtype=np.float32)
