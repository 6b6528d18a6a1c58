"""The item writer embeds a group on its own thread while the caller parses and writes: real store, the
hashing embedder made to wait (what is being tested is when the writer waits, not the model)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from fakes import HashEmbedder

from rag_search.store.item_writer import ItemWriter, ParsedItem
from rag_search.records import Chunk, Fingerprint, ItemRef
from rag_search.store import reads, writes
from rag_search.store.vectors import fetch_vectors


class GatedEmbedder(HashEmbedder):
    """Each call waits until the test opens its gate (or `auto` is set); records the thread it ran on."""

    def __init__(self):
        super().__init__()
        self.gates: list[threading.Event] = []
        self.started = threading.Semaphore(0)
        self.threads: set[str] = set()
        self.auto = False
        self.fail_on: int | None = None

    def embed_documents(self, texts, progress=None):
        call = len(self.gates)
        gate = threading.Event()
        self.gates.append(gate)
        self.threads.add(threading.current_thread().name)
        self.started.release()
        if not self.auto:
            assert gate.wait(10), "the test never opened this call's gate"
        if call == self.fail_on:
            raise RuntimeError("the embedder went away")
        return super().embed_documents(texts, progress)


def item(i: int, chunks: int = 2) -> ParsedItem:
    texts = [f"note {i} part {j}: the heron waits by pool {i * 10 + j}" for j in range(chunks)]
    return ParsedItem(ItemRef("notes", f"n{i}.md", f"/notes/n{i}.md", "markdown"), Fingerprint(1, 1, f"h{i}"),
                      f"Note {i}", [Chunk(index=j, text=t) for j, t in enumerate(texts)])


def written(store) -> set[str]:
    return {k for k, s in reads.item_states(store, "notes").items() if s.status == "indexed"}


def test_the_next_items_are_added_while_a_group_is_embedded(store):
    writes.ensure_collection(store, "notes")
    emb = GatedEmbedder()
    done: list[str] = []
    writer = ItemWriter(store, emb, on_written=lambda it: done.append(it.ref.key), group_chunks=4)
    writer.add(item(0))
    writer.add(item(1))  # 4 chunks: the first group goes to the embedding thread
    assert emb.started.acquire(timeout=10)
    writer.add(item(2))  # returns while the first group is still being embedded: parsing goes on meanwhile
    assert done == [] and not emb.gates[0].is_set()
    emb.gates[0].set()
    writer.add(item(3))  # the second group starts; the first is written while it embeds
    assert done == ["n0.md", "n1.md"]
    emb.auto = True
    for gate in emb.gates:
        gate.set()
    writer.add(item(4))
    writer.flush()
    assert done == [f"n{i}.md" for i in range(5)] and written(store) == set(done)
    assert threading.current_thread().name not in emb.threads
    ids = dict(store.conn.execute("SELECT text, id FROM chunks"))
    stored = fetch_vectors(store.conn, list(ids.values()))
    for text, chunk_id in ids.items():  # each chunk got its own vector, whichever group it was in
        assert np.allclose(stored[chunk_id], emb.embed_query(text), atol=1e-6)


def test_an_embedder_error_surfaces_and_what_was_embedded_stays_written(store):
    writes.ensure_collection(store, "notes")
    emb = GatedEmbedder()
    emb.auto, emb.fail_on = True, 1
    writer = ItemWriter(store, emb, group_chunks=4)
    for i in range(4):
        writer.add(item(i))  # two groups: the second one fails on the embedding thread
    with pytest.raises(RuntimeError, match="went away"):
        writer.flush()
    assert written(store) == {"n0.md", "n1.md"}
    assert writer._thread is None  # the embedding thread was let go
