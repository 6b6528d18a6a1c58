"""The Embedder protocol every provider implements, and the helpers they share."""

from __future__ import annotations

from typing import Callable, Protocol, Sequence, runtime_checkable

import numpy as np

Progress = Callable[[int], None]  # called with how many more texts are done


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension."""

    @property
    def id(self) -> str:
        """Stable identity of model + preprocessing; recorded in the index and the embedding cache."""

    @property
    def dimensions(self) -> int: ...

    @property
    def max_input_tokens(self) -> int:
        """Tokens the model reads; text beyond is cut, so chunks must stay below it."""

    def count_tokens(self, text: str) -> int:
        """Tokens of a text as this model counts them (an upper estimate where no tokenizer is local)."""

    def embed_documents(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        """Vectors for texts to be stored: shape (len(texts), dimensions)."""

    def embed_query(self, text: str) -> np.ndarray:
        """The vector of one search query: shape (dimensions,)."""


def reads_script_of(embedder: object, text: str) -> bool:
    """Whether the embedder was trained on the text's script: an English-only model (`languages = "en"`) does not
    read Chinese or Japanese, whose vectors are then noise. Providers without `languages` are taken as multilingual."""
    from rag_search import cjk

    return getattr(embedder, "languages", "multi") != "en" or not cjk.has_cjk(text)


def embed_queries(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Vectors of several search queries from one call: the provider's `embed_queries` where it has one, else one
    `embed_query` each. Never `embed_documents`: a model trained with prefixes (e5: "query: " / "passage: ") reads a
    query given as a passage as another text (a Russian question over English notes then finds nothing)."""
    batch = getattr(embedder, "embed_queries", None)
    if batch is not None:
        return batch(list(texts))
    return np.vstack([embedder.embed_query(t) for t in texts]) if texts else np.zeros((0, embedder.dimensions), np.float32)


def l2_normalise(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (matrix / norms).astype(np.float32, copy=False)


def batched(items: Sequence, size: int):
    for start in range(0, len(items), size):
        yield start, items[start : start + size]
