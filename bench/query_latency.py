"""Hybrid query latency p50/p95 at 10k and 100k chunks (synthetic text and vectors, real query embedder).

    python bench/query_latency.py [--sizes 10000 100000 1000000] [--queries 200] [--repeats 3]

Each size is measured twice: binary candidates from sqlite-vec's KNN (a one-shot CLI process) and from the sign
bits held in RAM (what `local-rag serve` does), with semantic recall@10 against exact float KNN.

Builds (and reuses) bench/out/synthetic-N.db. Prints p50/p95 per mode and per filter shape, warm.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
from synthetic import build, queries

from rag_search.embedders.builtin import BuiltinEmbedder
from rag_search.retrieval import Filters, SearchEngine, SearchRequest
from rag_search.store import Store

OUT = Path(__file__).parent / "out"


class SyntheticQueryEmbedder:
    """The real builtin model embeds the query (its cost is real); the id matches the synthetic index."""

    id = "bench/synthetic"
    dimensions = 384

    def __init__(self):
        self.model = BuiltinEmbedder()

    def embed_query(self, text):
        return self.model.embed_query(text)


def open_db(n: int) -> Store:
    OUT.mkdir(exist_ok=True)
    path = OUT / f"synthetic-{n}.db"
    fresh = not path.exists()
    store = Store.open(path)
    if fresh:
        t0 = time.perf_counter()
        build(store, n)
        store.conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('optimize')")
        print(f"  built {n} chunks in {time.perf_counter() - t0:.0f}s")
    return store


def percentiles(samples: list[float]) -> tuple[float, float]:
    arr = np.array(samples)
    return float(np.percentile(arr, 50)), float(np.percentile(arr, 95))


def run(engine: SearchEngine, qs: list[str], mode: str, filters: Filters, repeats: int) -> tuple[float, float]:
    p50s, p95s = [], []
    for _ in range(repeats):
        times = []
        for q in qs:
            t0 = time.perf_counter()
            engine.search(SearchRequest(q, top_k=10, mode=mode, filters=filters))
            times.append((time.perf_counter() - t0) * 1000)
        p50, p95 = percentiles(times)
        p50s.append(p50)
        p95s.append(p95)
    return statistics.median(p50s), statistics.median(p95s)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    embedder = SyntheticQueryEmbedder()
    qs = queries(args.queries)
    cases = [
        ("hybrid", Filters()),
        ("keyword", Filters()),
        ("semantic", Filters()),
        ("hybrid", Filters(collections=("notes",))),
        ("hybrid", Filters(tags=("t7",))),
        ("hybrid", Filters(date_from=1_600_000_000)),
    ]
    for n in args.sizes:
        store = open_db(n)
        t0 = time.perf_counter()
        ram = SearchEngine(store, embedder, bits_in_ram=True)
        ram.bit_matrix.wait()
        print(f"\n{n:,} chunks ({args.queries} queries x {args.repeats} repeats, median of per-repeat percentiles); "
              f"sign bits read into RAM in {time.perf_counter() - t0:.1f} s")
        for label, engine in (("sqlite-vec binary KNN (CLI)", SearchEngine(store, embedder)),
                              ("bits in RAM (local-rag serve)", ram)):
            for q in qs[:20]:  # warm caches and the model
                engine.search(SearchRequest(q))
            print(f" candidates from {label}")
            for mode, filters in cases:
                p50, p95 = run(engine, qs, mode, filters, args.repeats)
                what = ", ".join(f"{k}={v}" for k, v in filters.__dict__.items() if v not in ((), None, {}, True))
                print(f"  {mode:<8} {what or 'no filter':<28} p50 {p50:6.1f} ms   p95 {p95:6.1f} ms", flush=True)
        print(f"  semantic recall@10 of chunks vs exact float KNN: {recall(store, embedder, ram, qs[:50]):.3f}")
        store.close()


def recall(store: Store, embedder, engine: SearchEngine, qs: list[str]) -> float:
    """Share of the exact top-10 chunks (float KNN over every vector) that binary candidates + rescoring find."""
    from rag_search.retrieval import vector
    from rag_search.store.vectors import as_blob

    found = 0
    for q in qs:
        qvec = embedder.embed_query(q)
        exact = {r[0] for r in store.conn.execute(
            "SELECT chunk_id FROM chunk_vec WHERE embedding MATCH ? AND k = 10", (as_blob(qvec),))}
        k = max(150 * vector.COARSE_FACTOR, vector.COARSE_MIN)  # what the engine asks for (50 items x 3 chunks)
        got = vector.rescore(store.conn, qvec, engine.bit_matrix.nearest(vector.query_bits(store.conn, qvec), k), 10)
        found += len(exact & {cid for cid, _ in got})
    return found / (10 * len(qs))


if __name__ == "__main__":
    main()
