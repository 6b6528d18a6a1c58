"""The query's vector, embedded on another core while the keyword side runs (hybrid search).

The model (onnxruntime) and SQLite both let go of the GIL, so on a machine with a free core a hybrid query's
critical path is max(embedding, keyword side) instead of their sum: the embedding (~6 ms for the builtin model)
no longer adds to it.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="query-embed")
        return _pool


# How long the caller waits for the model's thread to begin (~0.1-0.4 ms). Without the wait that thread needed the
# GIL while the keyword side held it (Python between SQLite calls), and the model started ~0.4 ms late and was held
# up again between its steps: 100k bench, alternating rounds in one process: hybrid p50 25.8 -> 24.8 ms, p95 33.0 ->
# 32.2 (bench/RESULTS.md). On a corpus whose keyword side is the critical path (SciFact) it changed nothing.
START_WAIT_S = 0.001


class QueryVector:
    """The vector of `text`: the one the caller gave, or embedded from construction on in another thread
    (`beside`: something else runs meanwhile), else when asked for."""

    def __init__(self, embedder: Any, text: str, given: np.ndarray | None = None, beside: bool = True):
        self.ms = 0.0  # the model's own time
        self._given, self._embedder, self._text = given, embedder, text
        self._future: Future | None = None
        self._started = threading.Event()
        if given is None and beside:
            self._future = _executor().submit(self._embed, embedder, text)
            self._started.wait(START_WAIT_S)  # the model's thread takes the GIL now, not when we next let go of it

    def _embed(self, embedder: Any, text: str) -> np.ndarray:
        t0 = time.perf_counter()
        self._started.set()
        try:
            return embedder.embed_query(text)
        finally:
            self.ms = round((time.perf_counter() - t0) * 1000, 2)

    def get(self) -> np.ndarray:
        """The vector (waits for the model; its errors are raised here)."""
        if self._future is not None:
            return self._future.result()
        if self._given is None:
            self._given = self._embed(self._embedder, self._text)
        return self._given
