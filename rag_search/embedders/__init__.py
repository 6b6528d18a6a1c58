"""Embedders behind one Protocol: `builtin` (bundled ONNX MiniLM, the default) and `ollama`."""

from __future__ import annotations

from rag_search.config import EmbedderSettings, Paths
from rag_search.embedders.base import Embedder


def load_embedder(settings: EmbedderSettings, paths: Paths | None = None) -> Embedder:
    """The embedder the settings choose; nothing heavy is loaded until it is first used."""
    if settings.provider == "ollama":
        from rag_search.embedders.ollama import OllamaEmbedder

        host = (paths or Paths.from_env()).ollama_host
        return OllamaEmbedder(host, settings.model, settings.batch_size, settings.timeout_seconds)
    from rag_search.embedders.builtin import BuiltinEmbedder

    return BuiltinEmbedder(batch_size=settings.batch_size, threads=settings.threads)


__all__ = ["Embedder", "load_embedder"]
