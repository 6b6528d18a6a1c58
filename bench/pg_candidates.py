"""Recall@10 and latency of the PostgreSQL store's binary candidates + float rescoring, by candidate count.

    python bench/pg_candidates.py URL [--candidates 600 1000 2000 4000] [--queries 50]

URL: a database holding a copy of a synthetic rag.db (e.g. `bench/pg_store.py --sizes 1000000` makes one; or
`local-rag migrate-store`). The queries are bench/synthetic.py's held-out real embeddings; the truth is exact
cosine KNN over every vector. Each count is asked as a default search asks (150 rows), hnsw.ef_search at most 1000.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]

from synthetic import real_embeddings  # noqa: E402

from rag_search.retrieval.pg import vector as pg_vector  # noqa: E402
from rag_search.retrieval.filters import SqlFilter  # noqa: E402
from rag_search.store import open_store  # noqa: E402
from rag_search.store.pg.connection import vector_text  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("url")
    ap.add_argument("--candidates", type=int, nargs="+", default=[600, 1000, 2000, 4000])
    ap.add_argument("--queries", type=int, default=50)
    args = ap.parse_args()
    queries = real_embeddings(HERE / "out")[1][: args.queries]
    with open_store(args.url) as store:
        conn = store.conn
        truth = [{c for c, _ in pg_vector.knn(conn, q, 10, 0, (), SqlFilter("1", ()))[0]} for q in queries]
        sql = pg_vector.binary_sql("", queries.shape[1], None)
        for wide in args.candidates:
            found, times = 0, []
            for q, exact in zip(queries, truth):
                t0 = time.perf_counter()
                with conn.raw.transaction():
                    conn.execute("SELECT set_config('hnsw.ef_search', ?, true), set_config('hnsw.iterative_scan', "
                                 "'relaxed_order', true)", (str(min(wide, 1000)),))
                    rows = conn.execute(sql, (vector_text(q), vector_text(q), wide, 150)).fetchall()
                times.append(time.perf_counter() - t0)
                found += len(exact & {int(c) for c, _ in rows[:10]})
            print(f"{wide:>6} candidates: recall@10 {found / (10 * len(queries)):.3f}, "
                  f"p50 {1000 * statistics.median(times):.0f} ms", flush=True)


if __name__ == "__main__":
    main()
