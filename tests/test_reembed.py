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
    assert stats == {"texts": 2, "embedded": 2, "reused": 0, "vectors": 3, "too_long": 0}
    assert store.embedder == (new.id, 32)
    hits = SearchEngine(store, new).search(SearchRequest("harbours boats", mode="semantic")).hits
    assert hits[0].key == "b.md"

    back = HashEmbedder()  # the original embedder: its vectors are still cached
    again = reembed(store, back)
    assert again["embedded"] == 0 and again["reused"] == 2 and back.calls == []


def test_chunks_too_long_for_the_new_window_are_chunked_again_at_the_next_sync(store, add):
    """A chunk cut for a wider window (multilingual-e5-small's 400 tokens) would lose its tail under a narrower one
    (MiniLM's 256): its item is marked changed, so the next sync chunks it again; the others stay as they are."""
    add("n", "long.md", " ".join(f"word{i}" for i in range(40)))
    add("n", "short.md", "apples and pears")
    narrow = HashEmbedder(dimensions=32, name="narrow")
    narrow.max_input_tokens = 20  # 18 tokens of text fit
    stats = reembed(store, narrow)
    assert stats["too_long"] == 1 and stats["vectors"] == 2
    stamps = dict(store.conn.execute("SELECT key, stamp FROM items").fetchall())
    assert stamps["long.md"] is None and stamps["short.md"] is not None
