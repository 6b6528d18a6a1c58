"""SciFact train nDCG@10 of the PostgreSQL server engine (long-running, as `local-rag serve` runs it), per cv fold.

    LOCAL_RAG_EVAL=/path/to/eval python bench/pg_quality.py --url postgresql://.../postgres --db RAG_DB
                                                              [--modes keyword,hybrid] [--out scores.json]

Copies the SciFact rag.db (bench/quality_sets.py's index; `--db` one made already) into database bench_scifact once
(migrate-store), waits for the engine's common words in RAM when the code has them (pg/common_words.py), then runs
every train query and prints nDCG@10 per fold (bench/cv.py's fold_of: a hash of the query id) and over all, with
the share of queries whose top 10 documents equal those in `--compare` (an earlier run's --out, e.g. the code
before a change, chosen with PYTHONPATH).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

import quality_sets as qs  # noqa: E402
from cv import FOLDS, fold_of  # noqa: E402
from pg_statements import held_words  # noqa: E402
from pg_store import copy_into  # noqa: E402
from query_latency import load  # noqa: E402

from rag_search.retrieval import SearchRequest, search_engine  # noqa: E402
from rag_search.store import open_store  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True)
    ap.add_argument("--db", type=Path, required=True, help="the SciFact train rag.db (bench/quality.py indexes it)")
    ap.add_argument("--modes", default="keyword,hybrid")
    ap.add_argument("--out", help="write the top 10 document ids per mode and query here (JSON)")
    ap.add_argument("--compare", help="an earlier --out: say how many top 10s are the same")
    args = ap.parse_args()
    import quality as q

    bench = qs.load("scifact", "/work/.mirror")
    sqlite = q.engine_for(args.db.parent)
    store = open_store(copy_into(args.url, args.db, "bench_scifact", reuse=True))
    engine = search_engine(store, sqlite.embedder, sqlite.settings, bits_in_ram=True)
    print(f"SciFact train, {len(bench.queries)} queries; PostgreSQL server engine; {held_words(engine)}; {load()}")
    saved = json.loads(Path(args.compare).read_text()) if args.compare else {}
    tops: dict[str, dict[str, list[str]]] = {}
    print("| mode | " + " | ".join(f"fold {f}" for f in range(FOLDS)) + " | all | same top 10 |\n|---|"
          + "---|" * (FOLDS + 2))
    for mode in args.modes.split(","):
        run = {}
        for qid, text in bench.queries.items():
            result = engine.search(SearchRequest(text, top_k=100, mode=mode))
            run[qid] = list(dict.fromkeys(d for d in (bench.doc_of(h.uri) for h in result.hits) if d))
        tops[mode] = {qid: docs[:10] for qid, docs in run.items()}
        folds = [bench.score({k: v for k, v in run.items() if fold_of(k) == f})["all"]["ndcg@10"] for f in range(FOLDS)]
        same = ""
        if mode in saved:
            same = f"{sum(saved[mode].get(k) == v for k, v in tops[mode].items())}/{len(run)}"
        print(f"| {mode} | " + " | ".join(f"{s:.4f}" for s in folds)
              + f" | {bench.score(run)['all']['ndcg@10']:.4f} | {same} |", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(tops))
    print(load())
    store.close()


if __name__ == "__main__":
    main()
