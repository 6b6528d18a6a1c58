"""Retrieval quality in one command: nDCG@10, Recall@100, MRR@10 per mode on a judged set, through the product.

    python bench/quality.py                    # SciFact train split: index once, then keyword/semantic/hybrid/+rerank
    python bench/quality.py --set notes        # the generated notes-like judged set (bench/notes_set.py)
    python bench/quality.py --sweep            # fusion variants over one retrieval pass (weights, k, depth, exact)
    python bench/quality.py --fit-rerank       # fit the feature reranker's weights, 2-fold cross-validated
    python bench/quality.py --cli 40           # also score the first 40 queries through `local-rag search --json`

The judged set is built from ../shared/eval (SciFact *train* split, 809 queries; the test split is held out and
never read here). Its documents are exported as files and indexed with `local-rag index project` in their own
LOCAL_RAG_HOME under bench/out/<set>/ — built once and reused (`--rebuild` starts over). Queries then run
in-process through SearchEngine with the configured defaults (SearchSettings()), as `local-rag search` does.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
EVAL = HERE.parents[1] / "shared" / "eval"
sys.path.insert(0, str(EVAL))
sys.path.insert(0, str(HERE))

from beir import Dataset, load_beir, mrr_at_k, ndcg_at_k, percentiles, score_run  # noqa: E402

EXE = str(Path(sys.executable).with_name("local-rag"))
MODES = ("keyword", "semantic", "hybrid", "hybrid+rerank")


# -- the judged sets and their indexes ---------------------------------------------------------

def dataset(name: str) -> tuple[Dataset, Path, str]:
    """(data, folder of the set's files and index, file extension of its documents)."""
    if name == "scifact":
        return load_beir(str(EVAL / "data" / "scifact-train")), HERE / "out" / "scifact-train", "txt"
    from notes_set import build_notes

    root = HERE / "out" / "notes"
    return build_notes(root), root, "md"


def export(ds: Dataset, docs: Path, ext: str) -> None:
    docs.mkdir(parents=True, exist_ok=True)
    if len(list(docs.glob(f"*.{ext}"))) == len(ds.doc_ids):
        return
    for d in ds.doc_ids:
        doc = ds.corpus[d]
        body = doc["text"].strip()
        text = body if ext == "md" else doc["title"].strip() + "\n\n" + body
        (docs / f"{d}.{ext}").write_text(text + "\n", encoding="utf-8")


def ensure_index(ds: Dataset, root: Path, ext: str, rebuild: bool) -> Path:
    """The set indexed by `local-rag index project` in its own home (reused when complete)."""
    home, docs = root / "home", root / "docs"
    db = home / "rag.db"
    if rebuild and home.exists():
        import shutil

        shutil.rmtree(home)
    export(ds, docs, ext)
    if db.exists() and _items(db) == len(ds.doc_ids):
        return home
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "LOCAL_RAG_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")}
    t0 = time.perf_counter()
    print(f"indexing {len(ds.doc_ids)} documents with `local-rag index project` (once) ...", flush=True)
    subprocess.run([EXE, "index", "project", root.name, str(docs.resolve())], env=env, check=True)
    print(f"  indexed in {time.perf_counter() - t0:.0f} s", flush=True)
    return home


def _items(db: Path) -> int:
    from rag_search.store import Store

    with Store.open(db) as store:  # applies pending migrations (item keyword index backfill included)
        return store.conn.execute("SELECT count(*) FROM items WHERE status = 'indexed'").fetchone()[0]


# -- running queries ---------------------------------------------------------------------------

def doc_id(uri: str) -> str:
    return Path(uri.split("#")[0]).stem


def engine_for(home: Path, settings=None, reranker=None):
    from rag_search.embedders.builtin import BuiltinEmbedder
    from rag_search.retrieval import SearchEngine
    from rag_search.store import Store

    store = Store.open(home / "rag.db")
    return SearchEngine(store, BuiltinEmbedder(), settings, **({"reranker": reranker} if reranker else {}))


def run_mode(engine, ds: Dataset, qids: list[str], mode: str) -> tuple[dict, dict, list[float]]:
    from rag_search.retrieval import SearchRequest

    extra = {}
    if mode == "hybrid+rerank":
        extra = {"rerank": True}
    elif "rerank" in SearchRequest.__dataclass_fields__:
        extra = {"rerank": False}
    base = mode.split("+")[0]
    run, times, stage = {}, [], []
    for qid in qids:
        t0 = time.perf_counter()
        result = engine.search(SearchRequest(ds.queries[qid], top_k=100, mode=base, **extra))
        times.append(time.perf_counter() - t0)
        run[qid] = list(dict.fromkeys(doc_id(h.uri) for h in result.hits))
        stage.append(result.timings_ms.get("rerank", 0.0))
    return run, percentiles(times), stage


def table(args, ds: Dataset, home: Path) -> None:
    from rag_search.retrieval.rerank import FeatureReranker

    qids = sorted(ds.queries)[: args.limit or None]
    qrels = {q: ds.qrels[q] for q in qids}
    print(f"{ds.name}: {len(ds.corpus)} documents, {len(qids)} judged queries; top 100 per query, in-process")
    print("| mode | nDCG@10 | Recall@100 | MRR@10 | p50 ms | p95 ms |\n|---|---|---|---|---|---|")
    plain, reranking = engine_for(home), None
    for mode in args.modes.split(","):
        engine = plain
        if mode == "hybrid+rerank":
            reranking = reranking or engine_for(home, reranker=FeatureReranker())
            engine = reranking
        run, lat, stage = run_mode(engine, ds, qids, mode)
        r = score_run(run, qrels)
        print(f"| {mode} | {r['ndcg@10']:.4f} | {r['recall@100']:.4f} | {r['mrr@10']:.4f} | "
              f"{lat['p50_ms']:.1f} | {lat['p95_ms']:.1f} |", flush=True)
        if mode == "hybrid+rerank":
            s = percentiles([x / 1000 for x in stage])
            print(f"|   (rerank stage alone) | | | | {s['p50_ms']:.1f} | {s['p95_ms']:.1f} |")
    if args.cli:
        cli_check(ds, home, qids[: args.cli])


def cli_check(ds: Dataset, home: Path, qids: list[str]) -> None:
    """The same queries through the CLI (`local-rag search --json --top 100`): the figures must agree."""
    env = {**os.environ, "LOCAL_RAG_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")}
    run = {}
    for qid in qids:
        out = subprocess.run([EXE, "search", "--json", "--top", "100", ds.queries[qid]], env=env, check=True,
                             capture_output=True, text=True).stdout
        run[qid] = list(dict.fromkeys(doc_id(h["uri"]) for h in json.loads(out)["hits"]))
    r = score_run(run, {q: ds.qrels[q] for q in qids})
    print(f"| hybrid via CLI, first {len(qids)} queries | {r['ndcg@10']:.4f} | {r['recall@100']:.4f} | "
          f"{r['mrr@10']:.4f} | | |")


# -- fusion sweep over one retrieval pass --------------------------------------------------------

def retrieve_all(engine, ds: Dataset, qids: list[str]) -> dict:
    from rag_search.retrieval import SearchRequest
    from rag_search.retrieval.engine import SearchResult

    out = {}
    with engine.store.lock:
        for qid in qids:
            request = SearchRequest(ds.queries[qid], top_k=100, mode="hybrid")
            out[qid] = engine.retrieve(request, SearchResult([], request))
    return out


def item_docs(store) -> dict[int, str]:
    return {i: doc_id(uri) for i, uri in store.conn.execute("SELECT id, uri FROM items")}


def fused_docs(settings, store, got, docs: dict[int, str]) -> list[str]:
    from rag_search.retrieval import SearchEngine

    return [docs[f.item_id] for f in SearchEngine(store, None, settings).fuse(got)][:100]


def sweep(args, ds: Dataset, home: Path) -> None:
    from rag_search.config import SearchSettings
    from rag_search.retrieval import keyword
    from rag_search.retrieval.filters import SqlFilter

    qids = sorted(ds.queries)[: args.limit or None]
    qrels = {q: ds.qrels[q] for q in qids}
    engine = engine_for(home, SearchSettings(candidates=100, exact_max_items=0))
    t0 = time.perf_counter()
    got = retrieve_all(engine, ds, qids)
    print(f"retrieved {len(qids)} queries in {time.perf_counter() - t0:.0f} s (candidates 100 items per retriever)")
    docs = item_docs(engine.store)
    exact = {m: {q: keyword.exact_items(engine.store.conn, keyword.parse_terms(ds.queries[q]), SqlFilter("1", ()), m)
                 for q in qids} for m in (1, 2, 3)}

    def score(name: str, exact_max: int = 0, **kw) -> None:
        settings = SearchSettings(candidates=100, **kw)
        run = {}
        for q in qids:
            g = got[q]
            g.exact = exact[exact_max][q] if exact_max else {}
            run[q] = fused_docs(settings, engine.store, g, docs)
        r = score_run(run, qrels)
        print(f"| {name} | {r['ndcg@10']:.4f} | {r['recall@100']:.4f} | {r['mrr@10']:.4f} |", flush=True)

    print("| fusion (items) | nDCG@10 | Recall@100 | MRR@10 |\n|---|---|---|---|")
    score("chunk BM25 only (keyword mode, items by best chunk)", vector_weight=0, keyword_weight=0, keyword_chunk_weight=1)
    score("item BM25 only (keyword mode)", vector_weight=0, keyword_weight=1, keyword_chunk_weight=0)
    for w in (0.3, 0.5):
        score(f"item + chunk BM25, chunk weight {w}", vector_weight=0, keyword_weight=1, keyword_chunk_weight=w)
    score("vector only", vector_weight=1, keyword_weight=0, keyword_chunk_weight=0)
    score("0.7 vector / 0.3 chunk BM25 (old weights, distinct items)", vector_weight=0.7, keyword_weight=0,
          keyword_chunk_weight=0.3)
    score("0.7 vector / 0.3 item BM25", vector_weight=0.7, keyword_weight=0.3, keyword_chunk_weight=0)
    for k in (60, 20, 10):
        for wv, wk, wc in ((0.5, 0.5, 0), (0.4, 0.6, 0), (0.6, 0.4, 0), (0.5, 0.5, 0.15), (0.5, 0.35, 0.15),
                           (0.5, 0.25, 0.25)):
            score(f"k={k} vector {wv} / item {wk} / chunk {wc}", rrf_k=k, vector_weight=wv, keyword_weight=wk,
                  keyword_chunk_weight=wc)
    for m in (1, 2, 3):
        score(f"defaults + exact pin df<={m}", exact_max=m, exact_max_items=m)
    score("defaults", exact_max=SearchSettings().exact_max_items, exact_max_items=SearchSettings().exact_max_items)


# -- fitting the feature reranker ------------------------------------------------------------------

def fit_rerank(args, ds: Dataset, home: Path) -> None:
    """Pairwise logistic regression on FEATURES over the fused top N; 2-fold CV (odd/even query ids)."""
    import numpy as np

    from rag_search.config import SearchSettings
    from rag_search.retrieval import keyword
    from rag_search.retrieval.engine import SearchResult
    from rag_search.retrieval.rerank import FEATURES, Candidate, _fill_distances, features

    settings = SearchSettings(candidates=100)
    qids = sorted(ds.queries)[: args.limit or None]
    engine = engine_for(home, settings)
    got = retrieve_all(engine, ds, qids)
    docs = item_docs(engine.store)
    top = settings.rerank_top
    data = {}
    for q in qids:
        items = engine.fuse(got[q])
        head = items[:top]
        request_result = SearchResult([], None)  # type: ignore[arg-type]
        request_result.keyword_expression = keyword.match_expression(keyword.parse_terms(ds.queries[q]))
        engine._choose_chunks(head, keyword.parse_terms(ds.queries[q]), engine_filters(), request_result)
        cands = [Candidate.of(i, got[q], t, n) for n, (i, t) in enumerate(zip(head, engine._item_texts(head)), 1)]
        _fill_distances(engine.store, got[q].query_vector, cands)
        x = features(ds.queries[q], cands)
        y = np.array([ds.qrels[q].get(docs[i.item_id], 0) for i in head], dtype=float)
        data[q] = (x, y, [docs[i.item_id] for i in items[:100]])
    folds = [[q for n, q in enumerate(qids) if n % 2 == f] for f in (0, 1)]
    for f in (0, 1):
        w = _fit([data[q] for q in folds[1 - f]], len(FEATURES))
        print(f"fold {f}: fused nDCG@10 {_ndcg(data, folds[f], ds, None):.4f} -> reranked {_ndcg(data, folds[f], ds, w):.4f}")
    w = _fit(list(data.values()), len(FEATURES))
    print("weights (all queries):", {name: round(float(v), 3) for name, v in zip(FEATURES, w)})


def engine_filters():
    from rag_search.retrieval import Filters

    return Filters()


def _fit(rows, n_features: int, epochs: int = 300, lr: float = 0.5, l2: float = 1e-3):
    import numpy as np

    pairs = []
    for x, y, _ in rows:
        for i in np.flatnonzero(y > 0):
            for j in np.flatnonzero(y == 0):
                pairs.append(x[i] - x[j])
    if not pairs:
        return np.zeros(n_features)
    d = np.asarray(pairs)
    w = np.zeros(n_features)
    w[0] = 1.0
    for _ in range(epochs):
        p = 1.0 / (1.0 + np.exp(np.clip(d @ w, -30, 30)))  # gradient of log(1 + exp(-d.w))
        w += lr * ((d * p[:, None]).mean(axis=0) - l2 * w)
    return w


def _ndcg(data, qids, ds: Dataset, w) -> float:
    import numpy as np

    total = 0.0
    for q in qids:
        x, y, ranked = data[q]
        head = len(y)
        order = list(range(len(ranked)))
        if w is not None:
            order = sorted(range(head), key=lambda n: (-float(x[n] @ w), n)) + order[head:]
        total += ndcg_at_k([ranked[n] for n in order], ds.qrels[q], 10)
    return total / len(qids)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", choices=("scifact", "notes"), default="scifact")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--limit", type=int, default=0, help="only the first N queries")
    ap.add_argument("--cli", type=int, default=0, help="also score the first N queries through the CLI")
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--fit-rerank", action="store_true")
    ap.add_argument("--rebuild", action="store_true", help="index the set again from scratch")
    args = ap.parse_args()
    ds, root, ext = dataset(args.set)
    home = ensure_index(ds, root, ext, args.rebuild)
    if args.sweep:
        sweep(args, ds, home)
    elif args.fit_rerank:
        fit_rerank(args, ds, home)
    else:
        table(args, ds, home)


if __name__ == "__main__":
    main()
