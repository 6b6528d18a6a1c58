"""A server's float vectors in RAM when they fit its budget (`search.vectors_in_ram_mb`).

Rescoring a query's binary candidates and the reranker's distances then read no vector from the index: 300 vectors
by their embedding-cache rows took ~2.5 ms of SQLite at 100k chunks (more on the queries that widen); rescored from
RAM (BitMatrix.rescore) ~0.7-1 ms with the query's bits. Read with the sign bits and the facts (bit_matrix.py), from
the same snapshot, and valid while they are.

They are the index's float32 vectors, unrounded, so a server ranks exactly as the CLI does (its output is compared
byte for byte: tests/test_cli_server.py). 384 dimensions take 1,536 bytes a chunk, 147 MB at 100k chunks; an index
larger than the budget keeps reading them from SQLite. (int16 steps of each vector's largest component would halve
that, but a cosine then moves by ~1e-6 and scores printed to 6 decimals differ between the server and the CLI.)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

BATCH = 4096  # rows decoded at once while reading


@dataclass
class HeldVectors:
    index: np.ndarray  # per chunk (bit_matrix._Facts order): its row in `matrix`, -1: not held
    matrix: np.ndarray  # float32 [distinct cached vectors, dims]

    @property
    def nbytes(self) -> int:
        return self.index.nbytes + self.matrix.nbytes

    def of(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(which of the chunks at these facts positions are held, their vectors)."""
        at = self.index[positions]
        held = np.flatnonzero(at >= 0)
        return held, self.matrix[at[held]]


def read(conn: Any, cache_rows: np.ndarray, budget_bytes: int) -> HeldVectors | None:
    """The vectors at those embedding-cache rows (per chunk; -1: none), or None when they would take more than the
    budget (or their sizes differ: not one embedder's)."""
    per_chunk = cache_rows >= 0
    rows, index = np.unique(cache_rows[per_chunk], return_inverse=True)
    if budget_bytes <= 0 or not len(rows):
        return None
    first = conn.execute("SELECT length(vector) FROM embedding_cache WHERE id = ?", (int(rows[0]),)).fetchone()
    dims = (first[0] or 0) // 4 if first else 0
    if not dims or len(rows) * dims * 4 + len(cache_rows) * 4 > budget_bytes:
        return None
    matrix = np.zeros((len(rows), dims), dtype=np.float32)
    found = np.zeros(len(rows), dtype=bool)
    cursor = conn.execute("SELECT id, vector FROM embedding_cache WHERE id IN (SELECT value FROM json_each(?))",
                          (json.dumps(rows.tolist()),))
    while batch := cursor.fetchmany(BATCH):
        if any(len(v) != dims * 4 for _, v in batch):
            return None
        at = np.searchsorted(rows, np.fromiter((r[0] for r in batch), dtype=np.int64, count=len(batch)))
        matrix[at] = np.frombuffer(b"".join(v for _, v in batch), dtype=np.float32).reshape(len(batch), dims)
        found[at] = True
    held = np.full(len(cache_rows), -1, dtype=np.int32)
    held[per_chunk] = np.where(found[index], index, -1)
    return HeldVectors(held, matrix)
