"""The sign bits of every chunk vector held in RAM by a long-running server, for Hamming candidate generation.

sqlite-vec's binary KNN costs grow with k (100k chunks here: 11 ms at k=100, 36 ms at k=300, 145 ms at k=900);
XOR + popcount over the same bits in a numpy matrix takes ~9 ms at 100k for any k (48 bytes a chunk: 48 MB at
1M chunks). Loading reads every row of the vector table (about 1 s per 100k chunks), so only processes that
answer many queries use it (`local-rag serve`, the search socket), loading in a background thread while
queries keep using sqlite-vec.

The matrix is never served stale: it is valid only while the database is unchanged since it was read — PRAGMA
data_version (commits by other connections) and the connection's own total_changes are compared on every query;
after any write queries go back to sqlite-vec and the matrix is read again in the background.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class _Bits:
    ids: np.ndarray  # chunk ids
    collections: np.ndarray  # collection id per row
    words: np.ndarray  # uint64 [rows, dims / 64], the sign bits as sqlite-vec stores them


class BitMatrix:
    def __init__(self, store: Any):
        self.store = store
        self._bits: _Bits | None = None
        self._stamp: tuple[int, int] | None = None
        self._loading = False
        self._lock = threading.Lock()

    def stamp(self) -> tuple[int, int]:
        conn = self.store.conn
        return conn.execute("PRAGMA data_version").fetchone()[0], conn.total_changes

    def ready(self) -> bool:
        """True when the matrix matches the database now; otherwise starts a (re)load and returns False."""
        stamp = self.stamp()
        if self._bits is not None and stamp == self._stamp:
            return True
        with self._lock:
            if not self._loading:
                self._loading = True
                threading.Thread(target=self._load, args=(stamp,), name="bit-matrix", daemon=True).start()
        return False

    def wait(self, timeout: float = 600.0) -> bool:
        """Block until the matrix is current (benchmarks, tests)."""
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.store.lock:
                if self.ready():
                    return True
            time.sleep(0.05)
        return False

    def nearest(self, query_bits: bytes, k: int, collection_ids: tuple[int, ...] = ()) -> list[tuple[int, int]]:
        """(chunk id, Hamming distance) of the k nearest rows (in the collections, if given), nearest first."""
        bits = self._bits
        assert bits is not None
        q = np.frombuffer(query_bits, dtype=np.uint8).view(np.uint64)
        dist = np.bitwise_count(np.bitwise_xor(bits.words, q)).sum(axis=1, dtype=np.int32)
        rows = np.arange(len(dist))
        if collection_ids:
            rows = np.flatnonzero(np.isin(bits.collections, collection_ids))
            dist = dist[rows]
        if len(dist) > k:
            part = np.argpartition(dist, k)[:k]
        else:
            part = np.arange(len(dist))
        order = part[np.argsort(dist[part], kind="stable")]
        return [(int(bits.ids[rows[j]]), int(dist[j])) for j in order]

    def _load(self, stamp: tuple[int, int]) -> None:
        from rag_search.store.connection import connect

        try:
            conn = connect(str(self.store.path), readonly=True)
            try:
                rows = conn.execute("SELECT chunk_id, collection_id, embedding_bits FROM chunk_vec").fetchall()
            finally:
                conn.close()
            n = len(rows)
            ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=n)
            colls = np.fromiter((r[1] for r in rows), dtype=np.int64, count=n)
            raw = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.uint8)
            words = raw.reshape(n, -1).view(np.uint64) if n else np.zeros((0, 1), dtype=np.uint64)
            with self.store.lock:
                if self.stamp() == stamp:  # nothing was written while reading: the matrix is current
                    self._bits, self._stamp = _Bits(ids, colls, words), stamp
        except Exception:  # the database is busy or gone: queries keep using sqlite-vec
            pass
        finally:
            with self._lock:
                self._loading = False
