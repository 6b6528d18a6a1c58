"""Hybrid query latency p50/p95 at 10k, 100k and 1M chunks (synthetic text, real-like vectors, real query model).

    python bench/query_latency.py [--sizes 10000 100000 1000000] [--queries 200] [--repeats 3]

Each size is measured twice: binary candidates from sqlite-vec's KNN (a one-shot CLI process) and from the sign
bits held in RAM (what `local-rag serve` does), with semantic recall@10 against exact float KNN beside it.

Builds once and reuses bench/out/synthetic-v3-N.db (1M: ~4 GB). Text is Zipf-distributed words; vectors are
noisy copies of real embeddings (see synthetic.py); each query's text is embedded by the real model (its cost is
counted) and its vector is a real held-out embedding. Prints p50/p95 per mode and per filter shape, warm, with the
p50/p95 of each stage (SearchResult.timings_ms) and the load average beside each line. --hits / --compare: whether
other code (another checkout, run with PYTHONPATH) returns the same top 10s on the same index.
Indexes live in bench/out, or in $LOCAL_RAG_BENCH_OUT.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import zlib
import time
from pathlib import Path

from dataclasses import dataclass

import numpy as np
from synthetic import build, queries, real_embeddings

from rag_search.embedders.builtin import BuiltinEmbedder
from rag_search.retrieval import Filters, SearchEngine, SearchRequest
from rag_search.store import Store

OUT = Path(os.environ.get("LOCAL_RAG_BENCH_OUT") or Path(__file__).parent / "out")  # where the built indexes live


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


def vectors_held(engine: SearchEngine) -> str:
    """', float vectors (N MB)' when the server holds them too (search.vectors_in_ram_mb)."""
    held = getattr(engine.bit_matrix, "vectors_held", 0)  # 0: none, or code from before held_vectors.py (--compare)
    return f" and float vectors ({held / 2**20:.0f} MB)" if held else ""


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


@dataclass
class Timing:
    """A case's totals (median over repeats of each repeat's p50 / p95) and its stages (SearchResult.timings_ms,
    p50 / p95 over every query of every repeat), and the top hits per query (the last repeat's)."""

    p50: float
    p95: float
    stages: dict[str, tuple[float, float]]
    hits: dict[str, list[int]]
    first_p95: float = 0.0  # the first repeat's p95: the one that meets every word new (caches help the others)

    def __iter__(self):  # p50, p95 = run(...)
        return iter((self.p50, self.p95))

    def stage_line(self) -> str:
        return "  ".join(f"{STAGE_NAMES.get(k, k)} {a:.1f}/{b:.1f}" for k, (a, b) in self.stages.items())


STAGE_NAMES = {"embed_query": "embed", "fuse_and_fetch": "fetch"}


def run(engine: SearchEngine, qs: list[str], mode: str, filters: Filters, repeats: int) -> Timing:
    p50s, p95s, stages, hits = [], [], {}, {}
    for _ in range(repeats):
        times = []
        for q in qs:
            t0 = time.perf_counter()
            result = engine.search(SearchRequest(q, top_k=10, mode=mode, filters=filters))
            times.append((time.perf_counter() - t0) * 1000)
            for name, ms in result.timings_ms.items():
                stages.setdefault(name, []).append(ms)
            hits[q] = [h.chunk_id for h in result.hits]
        p50, p95 = percentiles(times)
        p50s.append(p50)
        p95s.append(p95)
    return Timing(statistics.median(p50s), statistics.median(p95s),
                  {k: percentiles(v) for k, v in stages.items()}, hits, p95s[0])


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def describe(mode: str, filters: Filters) -> str:
    what = ", ".join(f"{k}={v}" for k, v in filters.__dict__.items() if v not in ((), None, {}, True))
    return f"{mode} {what or 'no filter'}"


def same_hits(now: dict, before: dict) -> str:
    """How many queries' top 10 (chunk ids, in order) equal an earlier run's (--hits of another checkout)."""
    pairs = [(now[k], before[k]) for k in now if k in before]
    same = sum(a == b for a, b in pairs)
    top1 = sum(a[:1] == b[:1] for a, b in pairs)
    return f"top 10 identical for {same}/{len(pairs)} queries, top hit for {top1}/{len(pairs)}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--build-only", action="store_true", help="build the indexes and stop")
    ap.add_argument("--hits", help="write each query's top 10 chunk ids per case to this JSON file")
    ap.add_argument("--compare", help="say per case how many top 10s equal those in this file (--hits of a run "
                                      "of other code on the same index)")
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
    saved = json.loads(Path(args.compare).read_text()) if args.compare else {}
    record: dict[str, list[int]] = {}
    for n in args.sizes:
        store = open_db(n, base)
        if args.build_only:
            continue
        t0 = time.perf_counter()
        ram = SearchEngine(store, embedder, bits_in_ram=True)
        ram.bit_matrix.wait()
        bits_s, t0 = time.perf_counter() - t0, time.perf_counter()
        common = getattr(ram, "common_words", None)  # None: code from before retrieval/common_words.py (--compare)
        held = f"common words read into RAM in {time.perf_counter() - t0:.1f} s ({common.size()}); " \
            if common is not None and common.wait() else ""
        print(f"\n{n:,} chunks ({args.queries} queries x {args.repeats} repeats, median of per-repeat percentiles); "
              f"sign bits{vectors_held(ram)} read into RAM in {bits_s:.1f} s; {held}{load()}")
        engines = {"sqlite": ("sqlite-vec binary KNN (CLI)", SearchEngine(store, embedder)),
                   "ram": ("bits in RAM (local-rag serve)", ram)}
        for path in args.paths:
            label, engine = engines[path]
            print(f" candidates from {label}: semantic recall@10 of chunks vs exact float KNN "
                  f"{recall(store, engine, held_out[:50]):.3f}", flush=True)
            for q in qs[:20]:  # warm caches and the model
                engine.search(SearchRequest(q))
            print(f" candidates from {label}; per stage p50/p95 ms")
            for mode, filters in cases:
                t = run(engine, qs, mode, filters, args.repeats)
                key = f"{n} {path} {describe(mode, filters)}"
                record.update({f"{key} | {q}": ids for q, ids in t.hits.items()})
                same = f"   [{same_hits({k: v for k, v in record.items() if k.startswith(key)}, saved)}]" \
                    if saved else ""
                print(f"  {describe(mode, filters):<36} p50 {t.p50:6.1f} ms   p95 {t.p95:6.1f} ms   {t.stage_line()}"
                      f"   ({load()}){same}", flush=True)
        store.close()
    if args.hits:
        Path(args.hits).write_text(json.dumps(record))


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
