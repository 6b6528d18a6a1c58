"""Hybrid query latency p50/p95 at 10k, 100k and 1M chunks (synthetic text, real-like vectors, real query model).

    python bench/query_latency.py [--sizes 10000 100000 1000000] [--queries 200] [--repeats 3]

Each size is measured twice: binary candidates from sqlite-vec's KNN (a one-shot CLI process) and from the sign
bits held in RAM (what `local-rag serve` does), with semantic recall@10 against exact float KNN beside it.

Builds once and reuses bench/out/synthetic-v3-N.db (1M: ~4 GB). Text is Zipf-distributed words; vectors are
noisy copies of real embeddings (see synthetic.py); each query's text is embedded by the real model (its cost is
counted) and its vector is a real held-out embedding. Prints p50/p95 per mode and per filter shape, warm.
"""

from __future__ import annotations

import argparse
import statistics
import zlib
import time
from pathlib import Path

import numpy as np
from synthetic import build, queries, real_embeddings

from rag_search.embedders.builtin import BuiltinEmbedder
from rag_search.retrieval import Filters, SearchEngine, SearchRequest
from rag_search.store import Store

OUT = Path(__file__).parent / "out"


class SyntheticQueryEmbedder:
    """The real builtin model embeds the query (its cost is real) and a held-out real embedding is returned (the
    index's vectors are real-like, the query text is Zipf words); the id matches the synthetic index."""

    id = "bench/synthetic"
    dimensions = 384

    def __init__(self, held_out: np.ndarray):
        self.model = BuiltinEmbedder()
        self.held_out = held_out

    def vector_of(self, text: str) -> np.ndarray:
        return self.held_out[zlib.crc32(text.encode()) % len(self.held_out)]

    def embed_query(self, text):
        self.model.embed_query(text)
        return self.vector_of(text)

    def embed_documents(self, texts):  # a query's vector before the search (the relevance of its hits needs it)
        return np.stack([self.embed_query(t) for t in texts])


def open_db(n: int, base: np.ndarray) -> Store:
    OUT.mkdir(exist_ok=True)
    path = OUT / f"synthetic-v3-{n}.db"
    building = OUT / f"synthetic-v3-{n}.building.db"
    if not path.exists():
        building.unlink(missing_ok=True)
        t0 = time.perf_counter()
        store = Store.open(building)
        build(store, n, base)
        for table in ("chunks_fts", "items_fts"):
            store.conn.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
        store.close()
        building.rename(path)  # an interrupted build is never reused
        print(f"  built {n:,} chunks in {time.perf_counter() - t0:.0f}s ({path.stat().st_size / 1e9:.1f} GB)")
    store = Store.open(path)
    fill_cache(store)
    return store


def fill_cache(store: Store) -> None:
    """Indexes built before the bench cached vectors get their embedding cache as indexing fills it."""
    if store.conn.execute("SELECT 1 FROM embedding_cache LIMIT 1").fetchone():
        return
    t0 = time.perf_counter()
    with store.transaction() as conn:
        conn.execute("INSERT OR IGNORE INTO embedding_cache(embedder_id, text_hash, vector) "
                     "SELECT ?, c.content_hash, v.embedding FROM chunk_vec v JOIN chunks c ON c.id = v.chunk_id",
                     (SyntheticQueryEmbedder.id,))
    print(f"  filled the embedding cache in {time.perf_counter() - t0:.0f}s")


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
    ap.add_argument("--build-only", action="store_true", help="build the indexes and stop")
    ap.add_argument("--paths", nargs="+", choices=("sqlite", "ram"), default=["sqlite", "ram"],
                    help="candidates from sqlite-vec (a one-shot CLI) and/or the bits in RAM (local-rag serve)")
    args = ap.parse_args()
    base, held_out = real_embeddings(OUT)
    embedder = SyntheticQueryEmbedder(held_out)
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
        store = open_db(n, base)
        if args.build_only:
            continue
        t0 = time.perf_counter()
        ram = SearchEngine(store, embedder, bits_in_ram=True)
        ram.bit_matrix.wait()
        print(f"\n{n:,} chunks ({args.queries} queries x {args.repeats} repeats, median of per-repeat percentiles); "
              f"sign bits read into RAM in {time.perf_counter() - t0:.1f} s")
        engines = {"sqlite": ("sqlite-vec binary KNN (CLI)", SearchEngine(store, embedder)),
                   "ram": ("bits in RAM (local-rag serve)", ram)}
        for label, engine in (engines[p] for p in args.paths):
            print(f" candidates from {label}: semantic recall@10 of chunks vs exact float KNN "
                  f"{recall(store, engine, held_out[:50]):.3f}", flush=True)
            for q in qs[:20]:  # warm caches and the model
                engine.search(SearchRequest(q))
            print(f" candidates from {label}")
            for mode, filters in cases:
                p50, p95 = run(engine, qs, mode, filters, args.repeats)
                what = ", ".join(f"{k}={v}" for k, v in filters.__dict__.items() if v not in ((), None, {}, True))
                print(f"  {mode:<8} {what or 'no filter':<28} p50 {p50:6.1f} ms   p95 {p95:6.1f} ms", flush=True)
        store.close()


def recall(store: Store, engine: SearchEngine, qvecs: np.ndarray) -> float:
    """Share of the exact top-10 chunks (float KNN over every vector) that the engine's vector side finds, asked
    for what a default search asks (50 items x 3 chunks)."""
    from rag_search.store.vectors import as_blob

    scope = store.conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    found = 0
    for qvec in qvecs:
        exact = {r[0] for r in store.conn.execute(
            "SELECT chunk_id FROM chunk_vec WHERE embedding MATCH ? AND k = 10", (as_blob(qvec),))}
        with store.lock:
            rows, _ = engine._knn(qvec, Filters(), (), 150, scope, SyntheticQueryEmbedder.id)
        found += len(exact & {cid for cid, _ in rows[:10]})
    return found / (10 * len(qvecs))


if __name__ == "__main__":
    main()
