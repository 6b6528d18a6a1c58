"""Switching embedders: refused until re-embedded; re-embedding uses stored chunks and the cache."""

from __future__ import annotations

import pytest
from fakes import HashEmbedder

from rag_search.embedders.reembed import reembed
from rag_search.errors import EmbedderMismatch
from rag_search.retrieval import SearchEngine, SearchRequest


def test_reembed_switches_the_index_atomically_and_reuses_the_cache(store, add):
    add("n", "a.md", "apples and pears")
    add("n", "b.md", "boats and harbours")
    add("n", "c.md", "apples and pears")  # same text: embedded once
    new = HashEmbedder(dimensions=32, name="new")
    with pytest.raises(EmbedderMismatch, match="local-rag reembed"):
        SearchEngine(store, new).search(SearchRequest("apples", mode="semantic"))

    stats = reembed(store, new)
    assert stats == {"texts": 2, "embedded": 2, "reused": 0, "vectors": 3}
    assert store.embedder == (new.id, 32)
    hits = SearchEngine(store, new).search(SearchRequest("harbours boats", mode="semantic")).hits
    assert hits[0].key == "b.md"

    back = HashEmbedder()  # the original embedder: its vectors are still cached
    again = reembed(store, back)
    assert again["embedded"] == 0 and again["reused"] == 2 and back.calls == []
