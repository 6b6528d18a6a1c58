"""The item writer embeds one group ahead in a worker thread: same vectors, same order, errors surface, nothing
runs on after it stops."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from rag_search.indexing import ItemWriter, ParsedItem
from rag_search.records import Chunk, Fingerprint, ItemRef, text_hash
from rag_search.store import writes
from rag_search.store.cache import cached_vectors
from rag_search.store.vectors import from_blob


def _items(n: int, chunks_per_item: int = 3) -> list[ParsedItem]:
    out = []
    for i in range(n):
        chunks = [Chunk(j, f"note {i} part {j}: the {['heron', 'otter', 'lichen'][j % 3]} of pond {i}")
                  for j in range(chunks_per_item)]
        out.append(ParsedItem(ItemRef("c", f"n{i}.md", f"/v/n{i}.md", "markdown"), Fingerprint(1, 1, f"h{i}"),
                              f"Note {i}", chunks))
    return out


def _stored(store) -> dict[str, np.ndarray]:
    rows = store.conn.execute("SELECT i.key || '#' || c.idx, v.embedding FROM chunks c JOIN items i ON i.id = c.item_id "
                              "JOIN chunk_vec v ON v.chunk_id = c.id").fetchall()
    return {k: from_blob(b) for k, b in rows}


def test_ahead_writes_the_same_vectors_in_the_same_order_as_inline(tmp_path, builtin_embedder):
    from rag_search.store import Store

    results = {}
    for ahead in (False, True):
        store = Store.open(tmp_path / f"{ahead}.db")
        writes.ensure_collection(store, "c")
        order, threads = [], set()
        writer = ItemWriter(store, builtin_embedder, group_chunks=8, ahead=ahead,
                            on_written=lambda item: (order.append(item.ref.key), threads.add(threading.get_ident())))
        for item in _items(12):
            writer.add(item)
        writer.flush()
        assert order == [f"n{i}.md" for i in range(12)]  # every item, in the order added
        assert threads == {threading.get_ident()}  # listeners (Dagster events) run in the caller's thread
        assert writer.stats.items == 12 and writer.stats.chunks == 36 and writer.stats.embedded == 36
        results[ahead] = _stored(store)
        store.close()
    assert results[True].keys() == results[False].keys() and len(results[True]) == 36
    for k, v in results[False].items():
        assert float(v @ results[True][k]) > 0.9999, k


def test_the_model_runs_while_the_previous_group_is_written(store, fake_embedder):
    """While a listener is slow (Dagster's bookkeeping), the next group is being embedded, not waiting."""
    writes.ensure_collection(store, "c")
    spans: dict[str, list[float]] = {"embed": [], "listen": []}
    real = fake_embedder.embed_documents

    def slow_embed(texts, progress=None):
        t0 = time.perf_counter()
        time.sleep(0.15)
        out = real(texts, progress=progress)
        spans["embed"].append((t0, time.perf_counter()))
        return out

    def slow_listener(item):
        t0 = time.perf_counter()
        time.sleep(0.05)
        spans["listen"].append((t0, time.perf_counter()))

    fake_embedder.embed_documents = slow_embed
    writer = ItemWriter(store, fake_embedder, group_chunks=6, on_written=slow_listener, ahead=True)
    for item in _items(8):  # 4 groups of 2 items
        writer.add(item)
    writer.flush()
    overlapping = sum(1 for a0, a1 in spans["embed"] for b0, b1 in spans["listen"] if a0 < b1 and b0 < a1)
    assert overlapping >= 2, spans  # listeners of group N ran during the model's work on group N+1
    assert store.conn.execute("SELECT count(*) FROM items WHERE status = 'indexed'").fetchone()[0] == 8


def test_a_model_error_surfaces_and_the_groups_before_it_are_written(store, fake_embedder):
    writes.ensure_collection(store, "c")
    real, calls = fake_embedder.embed_documents, []

    def failing(texts, progress=None):
        calls.append(len(texts))
        if len(calls) == 3:
            raise RuntimeError("model crashed")
        return real(texts, progress=progress)

    fake_embedder.embed_documents = failing
    writer = ItemWriter(store, fake_embedder, group_chunks=6, ahead=True)
    with pytest.raises(RuntimeError, match="model crashed"):
        try:
            for item in _items(10):
                writer.add(item)
            writer.flush()
        finally:
            writer.close()
    assert writer._worker is None  # no thread left behind
    written = store.conn.execute("SELECT count(*) FROM items WHERE status = 'indexed'").fetchone()[0]
    assert written == 4  # the two groups embedded before the failure; the rest is not written half-way
    texts = [c.vector_text for item in _items(10)[:4] for c in item.chunks]
    assert len(cached_vectors(store, fake_embedder.id, [text_hash(t) for t in texts])) == 12


def test_cached_texts_never_reach_the_model(store, fake_embedder):
    writes.ensure_collection(store, "c")
    seen = []
    real = fake_embedder.embed_documents
    fake_embedder.embed_documents = lambda texts, progress=None: (seen.extend(texts), real(texts, progress=progress))[1]
    for _ in range(2):
        writer = ItemWriter(store, fake_embedder, group_chunks=4, ahead=True)
        for item in _items(5):
            writer.add(item)
        writer.flush()
    assert len(seen) == 15  # the second pass found every vector in the cache
