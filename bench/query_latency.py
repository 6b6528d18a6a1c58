"""Hybrid query latency p50/p95 at 10k and 100k chunks (synthetic text and vectors, real query embedder).

    python bench/query_latency.py [--sizes 10000 100000] [--queries 200] [--repeats 3]

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
        engine = SearchEngine(store, embedder)
        for q in qs[:20]:  # warm caches and the model
            engine.search(SearchRequest(q))
        print(f"\n{n:,} chunks ({args.queries} queries x {args.repeats} repeats, median of per-repeat percentiles)")
        for mode, filters in cases:
            p50, p95 = run(engine, qs, mode, filters, args.repeats)
            label = ", ".join(f"{k}={v}" for k, v in filters.__dict__.items() if v not in ((), None, {}, True))
            print(f"  {mode:<8} {label or 'no filter':<28} p50 {p50:6.1f} ms   p95 {p95:6.1f} ms")
        store.close()


if __name__ == "__main__":
    main()
