"""A deterministic small embedder for storage and filter tests (the real model is used end to end)."""

from __future__ import annotations

import hashlib
import re

import numpy as np

from rag_search.embedders.base import l2_normalise


class HashEmbedder:
    """Bag of words hashed into `dimensions` buckets: texts sharing words are near each other."""

    max_input_tokens = 256

    def __init__(self, dimensions: int = 64, name: str = "hash"):
        self.dimensions = dimensions
        self.id = f"test/{name}-{dimensions}"
        self.calls: list[int] = []  # batch sizes the model was asked for

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def _vector(self, text: str) -> np.ndarray:
        v = np.zeros(self.dimensions, dtype=np.float32)
        for word in re.findall(r"\w+", text.lower()):
            h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
            v[h % self.dimensions] += 1.0 if (h >> 32) & 1 else -1.0
        if not v.any():
            v[0] = 1.0
        return v

    def embed_documents(self, texts, progress=None):
        self.calls.append(len(texts))
        if progress:
            progress(len(texts))
        return l2_normalise(np.stack([self._vector(t) for t in texts])) if texts else np.zeros((0, self.dimensions), np.float32)

    def embed_query(self, text):
        return l2_normalise(self._vector(text)[None, :])[0]
