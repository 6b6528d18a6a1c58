"""The vector table (sqlite-vec vec0) and the embedder identity recorded in the index.

chunk_vec holds, per chunk, the float vector (exact distances, rescoring) and its binary
quantisation (fast coarse KNN over large indexes). It is partitioned by collection so a search
in one collection scans only that collection's vectors.

Sign bits of an anisotropic embedder's vectors (all in one narrow cone: multilingual-e5-small's unrelated texts
are at cosine ~0.8) are nearly the same for every text, so the index records a centring vector with such an
embedder (meta 'bits_centre', from embedders/centres.py) and every sign bit — stored or of a query — is taken of
the vector minus it (bits_input). Embedders without one (MiniLM, Ollama's) take the signs of the vectors as they are.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Sequence

import numpy as np

from rag_search.errors import EmbedderMismatch

REEMBED_HINT = "local-rag reembed"
CENTRE_KEY = "bits_centre"


def as_blob(vector: np.ndarray) -> bytes:
    return np.ascontiguousarray(vector, dtype=np.float32).tobytes()


def from_blob(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype=np.float32)


def create_vector_table(conn: Any, dims: int) -> None:
    conn.execute(
        f"""CREATE VIRTUAL TABLE chunk_vec USING vec0(
            chunk_id integer primary key,
            collection_id integer partition key,
            embedding float[{dims}] distance_metric=cosine,
            embedding_bits bit[{dims}]
        )"""
    )
    conn.execute(
        """CREATE TRIGGER chunks_vec_delete AFTER DELETE ON chunks BEGIN
            DELETE FROM chunk_vec WHERE chunk_id = old.id;
        END"""
    )


def drop_vector_table(conn: Any) -> None:
    conn.execute("DROP TRIGGER IF EXISTS chunks_vec_delete")
    conn.execute("DROP TABLE IF EXISTS chunk_vec")


def has_vector_table(conn: Any) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'chunk_vec'").fetchone()
    return row is not None


def recorded_embedder(conn: Any) -> tuple[str, int] | None:
    rows = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('embedder_id', 'dimensions')").fetchall())
    if "embedder_id" not in rows:
        return None
    return rows["embedder_id"], int(rows["dimensions"])


def record_embedder(conn: Any, embedder_id: str, dims: int) -> None:
    """The index's embedder, and the centre its sign bits are taken from (if the embedder has one)."""
    from rag_search.embedders.centres import bits_centre_of

    conn.executemany(
        "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
        [("embedder_id", embedder_id), ("dimensions", str(dims))],
    )
    centre = bits_centre_of(embedder_id)
    if centre is None:
        conn.execute("DELETE FROM meta WHERE key = ?", (CENTRE_KEY,))
    else:
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (CENTRE_KEY, as_blob(centre)))


def bits_centre(conn: Any) -> np.ndarray | None:
    """The vector the index's sign bits are centred on, or None (signs of the vectors as they are)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (CENTRE_KEY,)).fetchone()
    return None if row is None else from_blob(row[0])


def bits_input(vector: np.ndarray, centre: np.ndarray | None) -> bytes:
    """What vec_quantize_binary takes the signs of: the vector itself, or the vector minus the index's centre."""
    return as_blob(vector if centre is None else np.asarray(vector, dtype=np.float32) - centre)


# Embedders whose vectors are interchangeable (measured cosine between their vectors of the same text), so an
# index built with one is searched and extended with the other without re-embedding:
# the builtin model's derived per-channel int8 form vs the shipped one: cosine mean 0.995, min 0.99
# (rag_search/embedders/derived_model.py, bench/embedder_speed.py). `local-rag reembed` still unifies them.
EQUIVALENT = {frozenset({"builtin/all-MiniLM-L6-v2-int8pc", "builtin/all-MiniLM-L6-v2-int8"})}


def ranking_query(query: np.ndarray, centre: np.ndarray | None) -> np.ndarray:
    """The query that float similarities are taken with. Around a recorded centre (an embedder whose vectors lie in a
    narrow cone, e5): the query minus the centre, unit length, so chunks rank by q.d - c.d: a chunk near the centre of
    all texts (markup, link lists, boilerplate: near every query, a hub) loses what being central gave it. Foam's
    questions in 8 languages over its English pages: Hit@3 0.50 -> 0.79 (docs/multilingual.md)."""
    if centre is None:
        return query
    moved = np.asarray(query, dtype=np.float32) - centre
    return moved / (np.linalg.norm(moved) or 1.0)


def same_vectors(a: str, b: str) -> bool:
    return a == b or any({a, b} <= group for group in EQUIVALENT)


def equal_ids(embedder_id: str) -> list[str]:
    """The id and those of embedders whose vectors are interchangeable with its own."""
    return [embedder_id, *sorted(i for group in EQUIVALENT if embedder_id in group for i in group if i != embedder_id)]


def check_embedder(conn: Any, embedder_id: str, dims: int, db_path: str) -> None:
    """Refuse an embedder other than the one the index was built with (or one whose vectors equal its own)."""
    recorded = recorded_embedder(conn)
    if recorded is None or (same_vectors(recorded[0], embedder_id) and recorded[1] == dims):
        return
    was_id, was_dims = recorded
    raise EmbedderMismatch(
        f"The index at {db_path} was built with embedder '{was_id}' ({was_dims} dims), but the configured "
        f"embedder is '{embedder_id}' ({dims} dims). Vectors of different models cannot be mixed. "
        f"Either run `{REEMBED_HINT}` to re-embed the stored chunks with the configured embedder "
        f"(sources are not re-read), or set the config's embedder back to the one the index was built with."
    )


def insert_vectors(conn: Any, rows: Iterable[tuple[int, int, np.ndarray]]) -> None:
    """rows: (chunk_id, collection_id, vector); the sign bits are centred as the index says."""
    centre = bits_centre(conn)
    conn.executemany(
        "INSERT INTO chunk_vec(chunk_id, collection_id, embedding, embedding_bits) "
        "VALUES (?, ?, ?, vec_quantize_binary(?))",
        ((cid, coll, as_blob(v), bits_input(v, centre)) for cid, coll, v in rows),
    )


def fetch_vectors(conn: Any, chunk_ids: Sequence[int], embedder_id: str | None = None,
                  cache_rows: dict[int, int] | None = None) -> dict[int, np.ndarray]:
    """Float vectors of some chunks.

    With the id the index records they are read from the embedding cache (under that id or an equivalent one) (a B-tree lookup by the chunk's content hash:
    ~10 us); the chunks it lacks (vectors of an equivalent embedder, a pruned cache) and every chunk when no id
    is given are read from vec0, whose point lookup walks the overflow pages of a 1,024-vector block (~0.15 ms
    each at 100k chunks, ~0.5 ms at 1M: 300 rescoring candidates cost 45-150 ms that way).
    cache_rows: chunk id -> its vector's rowid in embedding_cache where the caller knows it (the server's bits in
    RAM): read by rowid, without a lookup of the chunk's row.
    """
    out: dict[int, np.ndarray] = _by_cache_row(conn, cache_rows) if cache_rows else {}
    chunk_ids = [c for c in chunk_ids if c not in out]
    if embedder_id and chunk_ids:
        ids = equal_ids(embedder_id)
        rows = conn.execute(
            f"SELECT c.id, e.vector FROM chunks c JOIN embedding_cache e ON e.embedder_id IN ({','.join('?' * len(ids))}) "
            "AND e.text_hash = c.content_hash WHERE c.id IN (SELECT value FROM json_each(?))",
            (*ids, json.dumps([int(c) for c in chunk_ids])))
        out.update((cid, from_blob(v)) for cid, v in rows)
    for cid in chunk_ids:
        if cid in out:
            continue
        row = conn.execute("SELECT embedding FROM chunk_vec WHERE chunk_id = ?", (cid,)).fetchone()
        if row is not None:
            out[cid] = from_blob(row[0])
    return out


def _by_cache_row(conn: Any, cache_rows: dict[int, int]) -> dict[int, np.ndarray]:
    chunks_of: dict[int, list[int]] = {}
    for chunk, row in cache_rows.items():  # chunks of equal text share a cached vector
        chunks_of.setdefault(row, []).append(chunk)
    # in ascending order: the pages are then visited in file order (300 rows at 100k chunks: 1.7 -> 1.1 ms)
    rows = conn.execute("SELECT id, vector FROM embedding_cache WHERE id IN (SELECT value FROM json_each(?))",
                        (json.dumps(sorted(chunks_of)),)).fetchall()
    if not rows:
        return {}
    matrix = np.frombuffer(b"".join(v for _, v in rows), dtype=np.float32).reshape(len(rows), -1)  # one decode
    return {chunk: matrix[n] for n, (row, _) in enumerate(rows) for chunk in chunks_of[row]}
