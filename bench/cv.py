"""Held-out figures: the fusion weights and the feature reranker's weights are chosen by cross-validation, and every
figure is scored on queries the choice never saw (issue 35).

The fitting procedure (`fit`): over the training queries, pick the fusion variant (rrf k, vector / item-BM25 / names
weights) with the best mean headline metric (each set weighted the same), then fit the reranker's weights on that
variant's fused head (pairwise logistic regression, bench/rerank_fit._fit) and keep the reranker only if it beats the
fused order on those same training queries. Two ways of holding out:

- within a set: its queries in FOLDS folds (by a hash of the query id); each fold is scored with the procedure fitted
  on the other folds of that set plus every other training set;
- leave one set out: each set is scored with the procedure fitted on the other training sets only (a new corpus, as a
  user's own notes are to the defaults).

TEST_SETS are never in any fitting: the shipped defaults (`python bench/quality.py --fit`) are the procedure fitted
on every other set, so the test sets' figures of the shipped defaults are held out by construction.
Retrieval runs once per set (100 candidates per retriever); fusion and reranking are replayed from it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

import quality_sets as qs

FOLDS = 5
LEVERS_OFF: list[str] = []  # bench/quality.py --lever-off: part of the retrieval cache's key
TEST_SETS = ("foam",)  # kept out of all fitting: the shipped defaults' figures there are held out
RERANK_TOP = 30


def fusion_grid() -> list[dict]:
    """The fusion variants the procedure chooses from (SearchSettings overrides)."""
    grid = []
    for k in (5, 10, 20, 60):
        for wv in (0.4, 0.5, 0.6, 0.7):
            for wt in (0.0, 0.25, 0.5):
                grid.append(dict(rrf_k=k, vector_weight=wv, keyword_weight=round(1 - wv, 2), title_weight=wt))
    return grid


@dataclass
class Pool:
    """One set's retrieval, replayable under any fusion and reranker weights."""

    bench: qs.BenchSet
    engine: object
    got: dict
    docs: dict[int, str | None]
    judged: dict[str, dict[str, int]]
    metric: str
    k: int
    features: dict = field(default_factory=dict)  # (query id, fusion key) -> (x, y, fused items)
    runs: dict = field(default_factory=dict)  # (query id, fusion key) -> documents in fused order
    engines: dict = field(default_factory=dict)  # fusion key -> a SearchEngine that fuses that way

    def score(self, qid: str, ranked: list[str]) -> float:
        from judged_sets import ndcg

        return ndcg(ranked, self.judged[qid], self.k)

    def fused(self, qid: str, fusion: dict):
        from rag_search.config import SearchSettings
        from rag_search.retrieval import SearchEngine

        key = _key(fusion)
        if key not in self.engines:
            settings = SearchSettings(**{**self.engine.settings.model_dump(), **fusion, "reranker": "off"})
            self.engines[key] = SearchEngine(self.engine.store, None, settings)
        return self.engines[key].fuse(self.got[qid])

    def ranked(self, qid: str, fusion: dict, weights=None) -> list[str]:
        from rag_search.retrieval.engine import keep_pinned_first

        if weights is None:
            key = (qid, _key(fusion))
            if key not in self.runs:
                self.runs[key] = self._documents(self.fused(qid, fusion))
            return self.runs[key]
        x, _, items = self.head(qid, fusion)
        order = sorted(range(len(x)), key=lambda n: (-float(x[n] @ weights), n))
        return self._documents(keep_pinned_first([items[n] for n in order] + items[len(x):], self.got[qid]))

    def _documents(self, items) -> list[str]:
        return list(dict.fromkeys(d for d in (self.docs.get(i.item_id) for i in items) if d))

    def head(self, qid: str, fusion: dict):
        """The reranker's features of the fused head, its judged gains, and the fused items (cached)."""
        key = (qid, _key(fusion))
        if key not in self.features:
            self.features[key] = self._head(qid, fusion)
        return self.features[key]

    def _head(self, qid: str, fusion: dict):
        from rag_search.retrieval import Filters, keyword
        from rag_search.retrieval.engine import SearchResult
        from rag_search.retrieval.rerank import _fill_distances, features

        items = self.fused(qid, fusion)
        head, text = items[:RERANK_TOP], self.bench.queries[qid]
        result = SearchResult([], None)  # type: ignore[arg-type]
        terms = keyword.parse_terms(text)
        result.keyword_expression = keyword.match_expression(terms)
        self.engine._choose_chunks(head, terms, Filters(), result)
        cands = self.engine.candidates(text, head, self.got[qid])
        for n, c in enumerate(cands, 1):
            c.fused_rank = n
        if self.got[qid].query_vector is not None:
            _fill_distances(self.engine.store, self.got[qid].query_vector, cands)
        x = features(text, cands) if cands else np.zeros((0, 0))
        y = np.array([self.judged[qid].get(self.docs.get(i.item_id), 0) for i in head], dtype=float)
        return x, y, items


def _key(fusion: dict) -> tuple:
    return tuple(sorted(fusion.items()))


def load_pool(bench: qs.BenchSet, home, engine_for) -> Pool:
    from rag_search.config import SearchSettings
    from rerank_fit import _judgements

    engine = engine_for(home, SearchSettings(candidates=100))
    got = _retrieved(engine, bench, home)
    docs = {i: bench.doc_of(uri) for i, uri in engine.store.conn.execute("SELECT id, uri FROM items")}
    metric, k = ("ndcg@10", 10) if bench.name in qs.BEIR_SETS else ("ndcg@5", 5)
    return Pool(bench, engine, got, docs, _judgements(bench), metric, k)


def _retrieved(engine, bench: qs.BenchSet, home) -> dict:
    """Every query's retrieval, kept on disk beside the index while the index, the queries and the retrieval code
    are the same (a SciFact pass takes minutes on the shared machine)."""
    import pickle
    from pathlib import Path

    import rag_search
    from quality import retrieve_all

    code = sorted((Path(rag_search.__file__).parent / "retrieval").rglob("*.py"))
    db = Path(home) / "rag.db"
    stamp = hashlib.sha256(repr((sorted(bench.queries.items()), db.stat().st_size, db.stat().st_mtime_ns,
                                 [p.read_bytes() for p in code], sorted(LEVERS_OFF))).encode()).hexdigest()[:16]
    cache = Path(home) / f"retrieved-{bench.name}-{stamp}.pickle"
    if cache.exists():
        return pickle.loads(cache.read_bytes())
    got = retrieve_all(engine, bench)
    cache.write_bytes(pickle.dumps(got))
    return got


# -- the procedure ---------------------------------------------------------------------------------

@dataclass
class Fitted:
    fusion: dict
    weights: np.ndarray | None  # None: the fused order stands (reranker off)


def fit(train: dict[str, list[str]], pools: dict[str, Pool]) -> Fitted:
    """The procedure on training queries {set: [query ids]}: best fusion variant, then reranker weights."""
    from rerank_fit import _fit
    from rag_search.retrieval.rerank import FEATURES

    def mean(fusion, weights=None) -> float:
        per_set = [np.mean([pools[s].score(q, pools[s].ranked(q, fusion, weights)) for q in qids])
                   for s, qids in train.items() if qids]
        return float(np.mean(per_set))

    fusion = max(fusion_grid(), key=mean)
    rows = [(pools[s].head(q, fusion), 1.0 / len(qids)) for s, qids in train.items() for q in qids]
    weights = _fit([r for r in rows if len(r[0][0])], len(FEATURES))
    return Fitted(fusion, weights if mean(fusion, weights) > mean(fusion) else None)


def fold_of(qid: str) -> int:
    return int(hashlib.sha256(qid.encode()).hexdigest(), 16) % FOLDS


def held_out(pools: dict[str, Pool], train_sets: list[str]) -> dict[str, dict]:
    """{set: {"loso": run, "within": run, "fits": [Fitted]}}: each query ranked by the procedure fitted without it
    (a run: {query id: documents best first}). "within" only for training sets."""
    out: dict[str, dict] = {}
    for name, pool in pools.items():
        qids = list(pool.bench.queries)
        others = {s: list(pools[s].bench.queries) for s in train_sets if s != name}
        out[name] = {"fits": []}
        if others:  # a set alone has no other set to be fitted on
            fitted = fit(others, pools)
            out[name].update(loso={q: pool.ranked(q, fitted.fusion, fitted.weights) for q in qids}, fits=[fitted])
        if name not in train_sets:
            continue
        run = {}
        for f in range(FOLDS):
            fitted = fit({**others, name: [q for q in qids if fold_of(q) != f]}, pools)
            out[name]["fits"].append(fitted)
            run.update({q: pool.ranked(q, fitted.fusion, fitted.weights) for q in qids if fold_of(q) == f})
        out[name]["within"] = run
    return out


def shipped_fit(pools: dict[str, Pool], train_sets: list[str]) -> Fitted:
    """The procedure on every training set: what the product ships."""
    return fit({s: list(pools[s].bench.queries) for s in train_sets}, pools)
