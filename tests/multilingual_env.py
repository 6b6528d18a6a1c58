"""The multilingual embedder for tests: its model derived once per test run into a temporary model cache."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def e5_cache(tmp_path_factory):
    """(model cache folder, a loaded MultilingualEmbedder using it). The run's derived MiniLM model is linked in
    beside it, as in a user's cache, so a CLI test that switches back to MiniLM does not derive it again."""
    from rag_search.embedders.builtin import MODEL_SHA256
    from rag_search.embedders.derived_model import derived_path
    from rag_search.embedders.multilingual import MultilingualEmbedder

    cache = tmp_path_factory.mktemp("e5-models")
    minilm = derived_path(MODEL_SHA256)  # built by conftest.pytest_configure
    (cache / minilm.name).symlink_to(minilm)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LOCAL_RAG_MODEL_CACHE", str(cache))
        embedder = MultilingualEmbedder()
        embedder._session  # derived here, once (~2 s)
    return cache, embedder


@pytest.fixture(scope="session")
def e5(e5_cache):
    return e5_cache[1]
