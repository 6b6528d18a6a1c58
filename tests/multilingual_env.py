"""The multilingual embedder for tests: its model derived once per test session into a temporary model cache."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def e5_cache(tmp_path_factory):
    """(model cache folder, a loaded MultilingualEmbedder using it)."""
    from rag_search.embedders.multilingual import MultilingualEmbedder

    cache = tmp_path_factory.mktemp("e5-models")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LOCAL_RAG_MODEL_CACHE", str(cache))
        embedder = MultilingualEmbedder()
        embedder._session  # derived here, once (~2 s)
    return cache, embedder


@pytest.fixture(scope="session")
def e5(e5_cache):
    return e5_cache[1]
