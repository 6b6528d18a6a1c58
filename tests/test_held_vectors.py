"""A server's float vectors held in RAM (retrieval/held_vectors.py): each is the index's vector; searches read none
from the index and find what a server that reads them finds; past the budget none are held, and a write is held once
the server reads the index again. Real SQLite with sqlite-vec and the bundled model's vectors."""

from __future__ import annotations

import random

import numpy as np
import pytest
from conftest import add_doc

from rag_search.config import SearchSettings
from rag_search.retrieval import Filters, SearchEngine, SearchRequest, vector
from rag_search.retrieval import engine as engine_mod
from rag_search.retrieval.bit_matrix import BitMatrix
from rag_search.store.vectors import fetch_vectors

WORDS = ("harbour ferry timetable lentil soup bread recipe router firmware printer driver garden compost budget "
         "invoice travel visa kernel proxy upgrade backup storage meeting notes release planning").split()
DAY = 86_400


@pytest.fixture
def index(store, builtin_embedder, monkeypatch):
    monkeypatch.setattr(vector, "EXACT_SCOPE_LIMIT", 10)  # binary candidates and rescoring, as at scale
    monkeypatch.setattr(engine_mod, "RAM_EXACT_LIMIT", 10)
    rng = random.Random(17)
    for n in range(120):
        add_doc(store, builtin_embedder, ("notes", "mail")[n % 2], f"doc{n:03}.md",
                " ".join(rng.choice(WORDS) for _ in range(10)), ts=1_600_000_000 + n * DAY, tags=(f"t{n % 3}",))
    return store


def _reads(engine, request) -> tuple[list, list[str]]:
    """The hits of a search and the statements on both of the engine's connections that read float vectors."""
    statements: list[str] = []
    conns = [engine.store.conn] + ([engine.second.connection] if engine.second.available() else [])
    for conn in conns:
        conn.set_trace_callback(statements.append)
    try:
        hits = engine.search(request).hits
    finally:
        for conn in conns:
            conn.set_trace_callback(None)
    return [(h.key, h.score) for h in hits], [s for s in statements if "embedding_cache" in s or "embedding FROM" in s]


def test_held_vectors_are_the_indexs(index, builtin_embedder):
    ram = SearchEngine(index, builtin_embedder, bits_in_ram=True)
    assert ram.bit_matrix.wait(60) and ram.bit_matrix.vectors_held
    ids = [r[0] for r in index.conn.execute("SELECT id FROM chunks")] + [10**9]  # and one that is not there
    held = ram.bit_matrix.vectors_of(ids)
    stored = fetch_vectors(index.conn, [], None, ram.bit_matrix.cache_rows(ids))
    assert held.keys() == stored.keys() and len(held) == len(ids) - 1
    for cid, v in stored.items():
        assert held[cid].dtype == np.float32 and np.array_equal(held[cid], v), cid


@pytest.mark.parametrize("mode", ["hybrid", "semantic"])
def test_a_server_holding_the_vectors_reads_none_and_finds_what_reading_them_finds(index, builtin_embedder, mode):
    held = SearchEngine(index, builtin_embedder, bits_in_ram=True)
    reading = SearchEngine(index, builtin_embedder, SearchSettings(vectors_in_ram_mb=0), bits_in_ram=True)
    assert held.bit_matrix.wait(60) and reading.bit_matrix.wait(60)
    assert held.bit_matrix.vectors_held and not reading.bit_matrix.vectors_held
    for query in ("ferry timetable for the harbour", "lentil soup recipe", "router firmware upgrade", "visa"):
        for filters in (Filters(), Filters(collections=("mail",)), Filters(tags=("t1",)),
                        Filters(date_from=1_600_000_000 + 60 * DAY)):
            request = SearchRequest(query, mode=mode, filters=filters, top_k=15)
            hits, reads = _reads(held, request)
            want, their_reads = _reads(reading, request)
            assert hits == want and hits, (query, filters)
            assert not reads and their_reads, (query, filters)  # the other server reads them from the index


def test_vectors_past_the_budget_are_not_held_and_a_write_is_held_once_read_again(index, builtin_embedder):
    ram = BitMatrix(index, 1)
    assert ram.wait(60)
    need = ram.vectors_held
    assert need > 0
    for mb, held in ((need * 0.99 / 2**20, False), (need * 1.01 / 2**20, True)):
        matrix = BitMatrix(index, mb)
        assert matrix.wait(60)
        assert bool(matrix.vectors_held) == held and bool(matrix.vectors_of([1])) == held, mb
    add_doc(index, builtin_embedder, "notes", "new.md", "a ferry to the harbour at dawn")
    new = index.conn.execute("SELECT max(id) FROM chunks").fetchone()[0]
    with index.lock:
        assert not ram.ready()
    assert ram.wait(60) and new in ram.vectors_of([new])
