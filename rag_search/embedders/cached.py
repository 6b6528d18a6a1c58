"""Embedding through the cache: only texts never embedded by this embedder reach the model."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from rag_search.embedders.base import Embedder, Progress
from rag_search.records import text_hash
from rag_search.store import Store
from rag_search.store.cache import cache_vectors, cached_vectors


def lookup(
    store: Store, embedder: Embedder, texts: Sequence[str], progress: Progress | None = None
) -> tuple[list[str], dict[str, np.ndarray], dict[str, str]]:
    """The texts' hashes, the vectors the cache holds for them, and the texts left for the model (by hash);
    those found count as progress."""
    hashes = [text_hash(t) for t in texts]
    have = cached_vectors(store, embedder.id, hashes)
    todo = {h: t for h, t in zip(hashes, texts) if h not in have}
    if progress and len(texts) - len(todo):
        progress(len(texts) - len(todo))
    return hashes, have, todo


def embed_texts(
    store: Store, embedder: Embedder, texts: Sequence[str], progress: Progress | None = None
) -> tuple[np.ndarray, int]:
    """Vectors for texts (in order) and how many were newly embedded; new vectors are cached."""
    if not texts:
        return np.zeros((0, embedder.dimensions), dtype=np.float32), 0
    hashes, have, todo = lookup(store, embedder, texts, progress)
    if todo:
        fresh = embedder.embed_documents(list(todo.values()), progress=progress)
        pairs = list(zip(todo.keys(), fresh))
        cache_vectors(store, embedder.id, pairs)
        have.update(pairs)
    return np.stack([have[h] for h in hashes]).astype(np.float32, copy=False), len(todo)
