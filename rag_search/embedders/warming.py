"""An embedder whose model loads in a background thread: a server answers its handshake without waiting for it."""

from __future__ import annotations

import threading

from rag_search.embedders.base import Embedder


class Warming:
    """An embedder whose model loads in a background thread; whatever uses it first waits for the load."""

    def __init__(self, embedder: Embedder):
        self._embedder, self._loaded = embedder, threading.Event()
        threading.Thread(target=self._load, name="model-load", daemon=True).start()

    def _load(self) -> None:
        try:
            self._embedder.embed_query("warm up")
        except Exception:  # noqa: BLE001 - the first search raises the same error, with its message
            pass
        finally:
            self._loaded.set()

    def finish_loading(self) -> None:
        """Wait for the load (a process must not end while onnxruntime is building its session: it aborts)."""
        self._loaded.wait()

    def __getattr__(self, name: str):
        self._loaded.wait()
        return getattr(self._embedder, name)
