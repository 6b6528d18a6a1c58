"""Retrieval quality in one command, through the product, on every judged set (bench/quality_sets.py).

    python bench/quality.py                     # held-out figures (bench/cv.py): every query ranked by fusion and
                                                #   reranker weights chosen without it, and the shipped defaults
    python bench/quality.py --fit               # the same, and the weights fitted on every training set (to ship)
    python bench/quality.py --defaults          # the product's defaults per mode (in-sample on the training sets)
    python bench/quality.py --defaults --set dendron --groups   # one set, every group (kinds, languages, forms)
    python bench/quality.py --sweep             # fusion variants over one retrieval pass per set, and their mean
    python bench/quality.py --fit-rerank        # fit the feature reranker on every set, 2-fold cross-validated
    python bench/quality.py --cli 40            # also score the first 40 queries of each set through the CLI

Sets: `scifact` (SciFact train split, 809 queries), `notes` (generated notes-like set), and the real-corpus sets
of bench/sets/ (`dendron`: a notes vault; `vue-zh`: Chinese docs). Each is indexed once with `local-rag index
project` in its own home under bench/out/ (`--rebuild` starts over; `--config FILE` indexes and searches with
another config.yaml, e.g. another embedder, in a home of its own named by `--variant`). Queries run in-process
through SearchEngine with the configured defaults, as `local-rag search` does. Headline metrics: nDCG@10 on the
BEIR-style sets; nDCG@5 and Hit@1 of the English questions (and nDCG@5 / Hit@3 of the other-language ones) on
the real-corpus sets.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

import quality_sets as qs
from beir import percentiles

MODES = ("keyword", "semantic", "hybrid")


def engine_for(home: Path, settings=None, reranker=None):
    from rag_search.config import load_settings
    from rag_search.embedders import load_embedder
    from rag_search.retrieval import SearchEngine
    from rag_search.config import Paths
    from rag_search.store import Store

    paths = Paths(home, home / "config.yaml", home / "rag.db", home / "dagster", Paths.from_env().ollama_host)
    configured = load_settings(paths.config)
    store = Store.open(paths.db)
    return SearchEngine(store, load_embedder(configured.embedder, paths), settings or configured.search,
                        **({"reranker": reranker} if reranker else {}))


def run_mode(engine, bench: qs.BenchSet, mode: str, top_k: int = 100) -> tuple[dict, dict]:
    from rag_search.retrieval import SearchRequest

    run, times = {}, []
    for qid, text in bench.queries.items():
        t0 = time.perf_counter()
        result = engine.search(SearchRequest(text, top_k=top_k, mode=mode))
        times.append(time.perf_counter() - t0)
        run[qid] = list(dict.fromkeys(d for d in (bench.doc_of(h.uri) for h in result.hits) if d))
    return run, percentiles(times)


def headline(bench: qs.BenchSet, scores: dict) -> list[float]:
    return [scores.get(group, {}).get(metric, 0.0) for _, group, metric in bench.headline]


def table(args, bench: qs.BenchSet, home: Path) -> dict:
    engine = engine_for(home)
    heads = " | ".join(label for label, _, _ in bench.headline)
    print(f"\n{bench.name}: {len(bench.queries)} queries, in-process, defaults\n"
          f"| mode | {heads} | p50 ms | p95 ms |\n|---|{'---|' * len(bench.headline)}---|---|")
    out = {}
    for mode in args.modes.split(","):
        run, lat = run_mode(engine, bench, mode)
        scores = out[mode] = bench.score(run)
        print(f"| {mode} | " + " | ".join(f"{v:.3f}" for v in headline(bench, scores))
              + f" | {lat['p50_ms']:.1f} | {lat['p95_ms']:.1f} |", flush=True)
    if args.groups:
        for mode, scores in out.items():
            for group, row in scores.items():
                print(f"|   {mode} {group} ({row['queries']}) | " + ", ".join(
                    f"{m} {row[m]:.3f}" for m in row if m != "queries"))
    if args.cli:
        cli_check(bench, home, args.cli)
    return out


def cli_check(bench: qs.BenchSet, home: Path, n: int) -> None:
    """The first n queries through `local-rag search --json --top 100`: the figures must agree with in-process."""
    env = {**os.environ, "LOCAL_RAG_HOME": str(home), "DAGSTER_HOME": str(home / "dagster"), "LOCAL_RAG_NO_SERVER": "1"}
    run = {}
    for qid, text in list(bench.queries.items())[:n]:
        out = subprocess.run([qs.EXE, "search", "--json", "--top", "100", "--", text], env=env, check=True,
                             capture_output=True, text=True).stdout
        run[qid] = list(dict.fromkeys(d for d in (bench.doc_of(h["uri"]) for h in json.loads(out)["hits"]) if d))
    print(f"| hybrid via CLI, first {n} queries | " + " | ".join(f"{v:.3f}" for v in headline(bench, bench.score(run))))


# -- fusion sweep over one retrieval pass ---------------------------------------------------------

def retrieve_all(engine, bench: qs.BenchSet) -> dict:
    from rag_search.retrieval import SearchRequest
    from rag_search.retrieval.engine import SearchResult

    out = {}
    with engine.store.lock:
        for qid, text in bench.queries.items():
            request = SearchRequest(text, top_k=100, mode="hybrid")
            out[qid] = engine.retrieve(request, SearchResult([], request))
    return out


def sweep_variants():
    """(name, SearchSettings overrides) of the fusion variants the sweep scores."""
    variants = [("defaults", {}), ("vector only", dict(keyword_weight=0, keyword_chunk_weight=0, title_weight=0)),
                ("keyword only (item + chunk BM25 + names)", dict(vector_weight=0)),
                ("no names list", dict(title_weight=0))]
    for wt in (0.25, 0.5, 1.0, 2.0, 3.0):
        variants.append((f"names weight {wt}", dict(title_weight=wt)))
    for k in (5, 10, 20, 60):
        for wv, wk in ((0.5, 0.5), (0.6, 0.4), (0.4, 0.6)):
            variants.append((f"k={k} vector {wv} / item BM25 {wk}", dict(rrf_k=k, vector_weight=wv, keyword_weight=wk)))
    return variants


def sweep(args, benches: list[tuple[qs.BenchSet, Path]]) -> None:
    from rag_search.config import SearchSettings
    from rag_search.retrieval import SearchEngine

    variants = sweep_variants()
    results: dict[str, list[float]] = {name: [] for name, _ in variants}
    for bench, home in benches:
        engine = engine_for(home, SearchSettings(candidates=100))
        got = retrieve_all(engine, bench)
        docs = {i: bench.doc_of(uri) for i, uri in engine.store.conn.execute("SELECT id, uri FROM items")}
        base = engine.settings.model_dump()
        for name, over in variants:
            settings = SearchSettings(**{**base, **over})
            fuser = SearchEngine(engine.store, None, settings)
            run = {q: [d for d in (docs.get(f.item_id) for f in fuser.fuse(g)) if d][:100] for q, g in got.items()}
            results[name].append(headline(bench, bench.score(run))[0])
    names = [b.name for b, _ in benches]
    print("\n| fusion (no reranker) | " + " | ".join(f"{n} {b.headline[0][0]}" for n, b in zip(names, [b for b, _ in benches]))
          + " | mean |\n|---|" + "---|" * (len(names) + 1))
    for name, vals in results.items():
        print(f"| {name} | " + " | ".join(f"{v:.4f}" for v in vals) + f" | {sum(vals) / len(vals):.4f} |")


def held_out_report(args, benches: list[tuple[qs.BenchSet, Path]]) -> None:
    """Each set's headline metrics: the procedure's within-set folds and leave-one-set-out, and the shipped defaults
    (held out only on cv.TEST_SETS)."""
    import cv

    pools = {b.name: cv.load_pool(b, h, engine_for) for b, h in benches}
    train = [n for n in pools if n not in cv.TEST_SETS]
    got = cv.held_out(pools, train)
    for bench, home in benches:
        shipped = run_mode(engine_for(home), bench, "hybrid")[0]
        where = "held out" if bench.name in cv.TEST_SETS else "IN-SAMPLE: fitted on this set"
        heads = " | ".join(label for label, _, _ in bench.headline)
        print(f"\n{bench.name}: {len(bench.queries)} queries\n| ranking | {heads} |\n|---|{'---|' * len(bench.headline)}")
        rows = [(f"held out: folds within the set ({cv.FOLDS})", got[bench.name].get("within")),
                ("held out: leave this set out", got[bench.name].get("loso")), (f"shipped defaults ({where})", shipped)]
        for label, run in rows:
            if run is not None:
                print(f"| {label} | " + " | ".join(f"{v:.3f}" for v in headline(bench, bench.score(run))) + " |")
        if args.groups:
            for label, run in rows:
                for group, row in (bench.score(run) if run else {}).items():
                    print(f"|   {label[:24]} {group} ({row['queries']}) | " + ", ".join(
                        f"{m} {row[m]:.3f}" for m in row if m != "queries"))
        print("  choices:", "; ".join(f"{f.fusion} reranker {'on' if f.weights is not None else 'off'}"
                                       for f in got[bench.name]["fits"]))
    if args.fit:
        fitted = cv.shipped_fit(pools, train)
        from rag_search.retrieval.rerank import FEATURES

        print(f"\nfitted on {', '.join(train)}: fusion {fitted.fusion}; reranker weights",
              None if fitted.weights is None else {n: round(float(v), 3) for n, v in zip(FEATURES, fitted.weights)})


LEVERS = ("centring",)  # issue 35's query-side changes that can be turned off to measure what they buy


def levers_off(names: list[str]) -> None:
    """Turn issue 35's query-side levers off in this process: `centring` (e5's float similarities around the raw
    query, not the query minus the centre)."""
    from rag_search.retrieval import vector
    from rag_search.store import vectors

    for name in names:
        if name == "centring":
            vector.ranking_query = vectors.ranking_query = lambda query, centre: query
        else:
            raise SystemExit(f"--lever-off {name}: unknown; use one of {', '.join(LEVERS)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", default="all", help=f"one of {', '.join(qs.all_set_names())}, or all")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--mirror", default="/work/.mirror", help="bare git mirrors of the bench/sets corpora")
    ap.add_argument("--groups", action="store_true", help="print every group's metrics (query kinds, languages)")
    ap.add_argument("--cli", type=int, default=0, help="also score the first N queries through the CLI")
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--fit-rerank", action="store_true")
    ap.add_argument("--defaults", action="store_true", help="the product's defaults per mode (not held out)")
    ap.add_argument("--fit", action="store_true", help="also print the weights fitted on every training set")
    ap.add_argument("--config", help="a config.yaml to index and search with (e.g. another embedder)")
    ap.add_argument("--variant", default="", help="name of the index built with --config (bench/out/<set>-<variant>)")
    ap.add_argument("--rebuild", action="store_true", help="index the sets again from scratch")
    ap.add_argument("--lever-off", default="", help=f"comma-separated levers to turn off: {', '.join(LEVERS)}")
    args = ap.parse_args()
    levers_off([n for n in args.lever_off.split(",") if n])
    import cv

    cv.LEVERS_OFF[:] = [n for n in args.lever_off.split(",") if n]
    names = qs.all_set_names() if args.set == "all" else args.set.split(",")
    config = Path(args.config).read_text(encoding="utf-8") if args.config else None
    benches = []
    for name in names:
        bench = qs.load(name, args.mirror)
        benches.append((bench, qs.ensure_index(bench, args.variant, config, args.rebuild)))
    if args.sweep:
        sweep(args, benches)
    elif args.fit_rerank:
        from rerank_fit import fit_rerank

        fit_rerank(benches, engine_for)
    elif args.defaults:
        for bench, home in benches:
            table(args, bench, home)
    else:
        held_out_report(args, benches)


if __name__ == "__main__":
    main()
