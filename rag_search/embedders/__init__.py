"""Embedders behind one Protocol: `builtin` (bundled ONNX models: MiniLM, the default, or multilingual-e5-small)
and `ollama`."""

from __future__ import annotations

from rag_search.config import EmbedderSettings, Paths
from rag_search.embedders.base import Embedder


def load_embedder(settings: EmbedderSettings, paths: Paths | None = None) -> Embedder:
    """The embedder the settings choose; nothing heavy is loaded until it is first used."""
    if settings.provider == "ollama":
        from rag_search.embedders.ollama import OllamaEmbedder

        host = (paths or Paths.from_env()).ollama_host
        return OllamaEmbedder(host, settings.model, settings.batch_size, settings.timeout_seconds)
    if settings.model == "multilingual-e5-small":
        from rag_search.embedders.multilingual import MultilingualEmbedder

        return MultilingualEmbedder(batch_size=settings.batch_size, threads=settings.threads)
    from rag_search.embedders.builtin import BuiltinEmbedder

    return BuiltinEmbedder(batch_size=settings.batch_size, threads=settings.threads)


__all__ = ["Embedder", "load_embedder"]
