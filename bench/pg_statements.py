"""Time per statement of PostgreSQL searches: which SQL a search's time goes to (issue 33's split).

    python bench/pg_statements.py --url postgresql://.../postgres --size 1000000 [--queries 60] [--repeats 2]
                                  [--mode hybrid] [--tag t7]

Opens the bench's copy (bench/pg_store.py --reuse made it: database bench_synthetic_<size>) as `local-rag serve`
runs it (PgSearchEngine, long-running), warms it as pg_store.py does (20 hybrid queries), then times every statement
on both of its connections, per repeat, grouped by kind: count, total, p50/max, and the slowest queries' statements.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from query_latency import OUT, SyntheticQueryEmbedder, load, queries, real_embeddings  # noqa: E402

from rag_search.retrieval import Filters, SearchRequest, search_engine  # noqa: E402
from rag_search.store import open_store  # noqa: E402
from rag_search.store.pg.connection import PgConnection  # noqa: E402

KINDS = [("count", r"SELECT count\(\*\) FROM \(SELECT 1 FROM (\w+)"),
         ("rank", r"WITH cand AS .*? FROM (\w+) [cd] WHERE"),
         ("avg_size", r"avg\(pg_column_size"), ("exact_items", r"SELECT d.item_id FROM item_docs d WHERE"),
         ("best_chunks", r"DISTINCT ON \(c.item_id\)"), ("names", r"FROM item_names n"),
         ("stems", r"unnest\(to_tsvector"), ("word_stems", r"tsvector_to_array"), ("word_stats", r"FROM pg_stats"),
         ("knn_binary", r"binary_quantize"), ("knn_exact", r"FROM chunk_vec v.* ORDER BY d"),
         ("set_config", r"set_config"), ("count_rows", r"SELECT count\(\*\) FROM (chunks|items)\b"),
         ("facets", r"facet"), ("hydrate", r"FROM chunks c JOIN items"), ("items_of", r"SELECT id, item_id FROM chunks")]
LOG: list[tuple[str, float, str]] = []


def kind(sql: str, params=()) -> str:
    for name, pattern in KINDS:
        m = re.search(pattern, sql, re.S)
        if m:
            label = name + (f":{m.group(1)}" if m.groups() else "")
            if name == "count":  # a word's count, or an AND / OR of several
                label += ":and" if " & " in str(params[:1]) else ":or" if " | " in str(params[:1]) else ":word"
            return label
    return "other:" + " ".join(sql.split())[:60]


def timed(orig):
    def execute(self, sql, params=()):
        t0 = time.perf_counter()
        cur = orig(self, sql, params)
        LOG.append((kind(sql, params), (time.perf_counter() - t0) * 1000, str(params[:1])[:80] if params else ""))
        return cur
    return execute


def held_words(engine) -> str:
    """Waits for a server engine's common words in RAM (pg/common_words.py; none in code from before them)."""
    common, t0 = getattr(engine, "common_words", None), time.perf_counter()
    if common is None or not common.wait():
        return "no common words in RAM"
    return f"common words read into RAM in {time.perf_counter() - t0:.1f} s ({common.size()})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True)
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--mode", default="hybrid")
    ap.add_argument("--tag", help="a tag filter (the bench's is t7)")
    args = ap.parse_args()
    _, held_out = real_embeddings(OUT)
    store = open_store(args.url.rsplit("/", 1)[0] + f"/bench_synthetic_{args.size}")
    engine = search_engine(store, SyntheticQueryEmbedder(held_out), bits_in_ram=True)
    print(held_words(engine))
    qs = queries(args.queries)
    for q in qs[:20]:
        engine.search(SearchRequest(q))
    PgConnection.execute = timed(PgConnection.execute)
    filters = Filters(tags=(args.tag,)) if args.tag else Filters()
    print(f"{args.size:,} chunks, {args.mode}, {filters}; {load()}")
    for rep in range(args.repeats):
        per_kind, per_query = defaultdict(list), []
        for q in qs:
            LOG.clear()
            t0 = time.perf_counter()
            result = engine.search(SearchRequest(q, top_k=10, mode=args.mode, filters=filters))
            total = (time.perf_counter() - t0) * 1000
            for k, ms, _ in LOG:
                per_kind[k].append(ms)
            per_query.append((total, q, list(LOG), result.timings_ms))
        totals = sorted(t for t, *_ in per_query)
        p95 = totals[int(0.95 * len(totals)) - 1]
        print(f"\nrepeat {rep + 1}: p50 {statistics.median(totals):.0f} ms, p95 {p95:.0f} ms; {load()}\n| statement | n | total ms | p50 | max |\n|---|---|---|---|---|")
        for k, v in sorted(per_kind.items(), key=lambda kv: -sum(kv[1])):
            print(f"| {k} | {len(v)} | {sum(v):.0f} | {statistics.median(v):.1f} | {max(v):.1f} |")
        print("slowest queries:")
        for total, q, log, stages in sorted(per_query, reverse=True)[:4]:
            print(f"  {total:.0f} ms {q!r} stages {stages}")
            for k, ms, p in sorted(log, key=lambda x: -x[1])[:5]:
                print(f"      {ms:7.1f} {k} {p}")
    store.close()


if __name__ == "__main__":
    main()
