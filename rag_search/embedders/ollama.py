"""The Ollama embedder: a local Ollama server's `/api/embed` through the official `ollama` client.

Default model bge-m3 (1024 dims, 8k-token input). Batches of 32 texts, a timeout per batch, and
errors that say what to run when Ollama is not running or the model is not pulled.
"""

from __future__ import annotations

from functools import cached_property
from typing import Sequence

import numpy as np

from rag_search.embedders.base import Progress, batched, l2_normalise
from rag_search.errors import EmbedderError, EmbedderUnavailable

DEFAULT_MODEL = "bge-m3"
DEFAULT_BATCH = 32
# Known models: (dimensions, input window in tokens). Others are probed once.
KNOWN_MODELS = {
    "bge-m3": (1024, 8192),
    "nomic-embed-text": (768, 8192),
    "mxbai-embed-large": (1024, 512),
    "all-minilm": (384, 256),
    "snowflake-arctic-embed": (1024, 512),
}
CHARS_PER_TOKEN_LOWER_BOUND = 3  # no tokenizer is local; over-estimate tokens so chunks fit


class OllamaEmbedder:
    def __init__(
        self,
        host: str,
        model: str | None = None,
        batch_size: int | None = None,
        timeout_seconds: float = 120.0,
    ):
        self.host = host
        self.model = model or DEFAULT_MODEL
        self.batch_size = batch_size or DEFAULT_BATCH
        self.timeout_seconds = timeout_seconds

    @property
    def id(self) -> str:
        return f"ollama/{self.model}"

    @cached_property
    def _client(self):
        import ollama

        return ollama.Client(host=self.host, timeout=self.timeout_seconds)

    @cached_property
    def dimensions(self) -> int:
        base = self.model.split(":")[0]
        if base in KNOWN_MODELS:
            return KNOWN_MODELS[base][0]
        return int(self._embed_batch(["dimension probe"]).shape[1])

    @property
    def max_input_tokens(self) -> int:
        return KNOWN_MODELS.get(self.model.split(":")[0], (0, 512))[1]

    def count_tokens(self, text: str) -> int:
        return -(-len(text) // CHARS_PER_TOKEN_LOWER_BOUND)

    def embed_query(self, text: str) -> np.ndarray:
        return self._embed_batch([text])[0]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Several queries in one call: this model reads a query as it reads a passage (no prefix)."""
        return self.embed_documents(texts)

    def embed_documents(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for start, batch in batched(list(texts), self.batch_size):
            out[start : start + len(batch)] = self._embed_batch(batch)
            if progress:
                progress(len(batch))
        return out

    def ping(self) -> list[str]:
        """The models the server has pulled; raises EmbedderUnavailable if it is not reachable."""
        try:
            listed = self._client.list()
        except Exception as exc:
            raise self._translate(exc) from exc
        return [m.model for m in listed.models]

    def _embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        try:
            response = self._client.embed(model=self.model, input=list(texts), truncate=True)
        except Exception as exc:
            raise self._translate(exc) from exc
        vectors = np.asarray(response.embeddings, dtype=np.float32)
        if vectors.ndim != 2 or len(vectors) != len(texts):
            raise EmbedderError(
                f"Ollama at {self.host} returned {len(vectors)} embeddings for {len(texts)} texts. "
                f"Check the model '{self.model}' is an embedding model (`ollama show {self.model}`)."
            )
        return l2_normalise(vectors)

    def _translate(self, exc: Exception) -> EmbedderError:
        import httpx
        import ollama

        if isinstance(exc, ollama.ResponseError) and (
            exc.status_code == 404 or "not found" in str(exc.error).lower()
        ):
            return EmbedderUnavailable(
                f"Ollama at {self.host} does not have the model '{self.model}'. Pull it: `ollama pull {self.model}`."
            )
        if isinstance(exc, (ConnectionError, httpx.ConnectError)):
            return EmbedderUnavailable(
                f"Ollama is not running at {self.host}. Start it (`ollama serve`, or open the Ollama app), "
                f"or set OLLAMA_HOST to where it runs."
            )
        if isinstance(exc, httpx.TimeoutException):
            return EmbedderError(
                f"Ollama at {self.host} took longer than {self.timeout_seconds:g}s for one batch of "
                f"{self.batch_size} texts. Raise embedder.timeout_seconds or lower embedder.batch_size."
            )
        if isinstance(exc, ollama.ResponseError):
            return EmbedderError(f"Ollama at {self.host} answered an error: {exc.error} (HTTP {exc.status_code}).")
        return EmbedderError(f"Embedding with Ollama at {self.host} failed: {exc!r}. Run `local-rag doctor`.")
