"""Fitting the feature reranker (rag_search/retrieval/rerank.py) on every judged set at once.

Pairwise logistic regression on the FEATURES of the fused top N (relevant vs not, within a query), each set's
queries weighted so every set counts the same; 2-fold cross-validation (odd/even queries) per set, then the
weights fitted on everything. Run through `python bench/quality.py --fit-rerank [--set ...]`.
"""

from __future__ import annotations

import numpy as np

import quality_sets as qs


def rows_for(bench: qs.BenchSet, home, engine_for) -> dict:
    """{query id: (features of the fused head, gain per head item, ranked documents)} for one set."""
    from rag_search.config import SearchSettings
    from rag_search.retrieval import Filters, keyword
    from rag_search.retrieval.engine import SearchResult
    from rag_search.retrieval.rerank import _fill_distances, features
    from quality import retrieve_all

    engine = engine_for(home, SearchSettings(candidates=100))
    got = retrieve_all(engine, bench)
    docs = {i: bench.doc_of(uri) for i, uri in engine.store.conn.execute("SELECT id, uri FROM items")}
    judged = _judgements(bench)
    data = {}
    for q, text in bench.queries.items():
        items = engine.fuse(got[q])
        head = items[: engine.settings.rerank_top]
        result = SearchResult([], None)  # type: ignore[arg-type]
        terms = keyword.parse_terms(text)
        result.keyword_expression = keyword.match_expression(terms)
        engine._choose_chunks(head, terms, Filters(), result)
        cands = engine.candidates(text, head, got[q])
        for n, c in enumerate(cands, 1):
            c.fused_rank = n
        if got[q].query_vector is not None:
            _fill_distances(engine.store, got[q].query_vector, cands)
        x = features(text, cands)
        y = np.array([judged[q].get(docs.get(i.item_id), 0) for i in head], dtype=float)
        data[q] = (x, y, [docs.get(i.item_id) for i in items[:100]])
    return data


def _judgements(bench: qs.BenchSet) -> dict[str, dict[str, int]]:
    """Each query's graded judgements, recovered through the set's own scorer's source."""
    if bench.name in qs.BEIR_SETS:
        from beir import load_beir

        if bench.name == "scifact":
            return load_beir(str(qs.EVAL / "data" / "scifact-train")).qrels
        from notes_set import build_notes

        return build_notes(qs.HERE / "out" / "notes").qrels
    import judged_sets

    return {q.id: q.judgements for q in judged_sets.load_set(bench.name).queries}


def fit_rerank(benches, engine_for) -> None:
    from rag_search.retrieval.rerank import FEATURES

    per_set = {b.name: (b, rows_for(b, h, engine_for)) for b, h in benches}
    for name, (bench, data) in per_set.items():
        qids = list(data)
        folds = [[q for n, q in enumerate(qids) if n % 2 == f] for f in (0, 1)]
        for f in (0, 1):
            train = [(data[q], 1.0) for q in folds[1 - f]]
            w = _fit(train, len(FEATURES))
            print(f"{name} fold {f}: fused {_score(bench, data, folds[f], None):.4f} -> "
                  f"reranked {_score(bench, data, folds[f], w):.4f} ({bench.headline[0][0]})")
    everything = [(row, 1.0 / len(data)) for _, data in per_set.values() for row in data.values()]
    w = _fit(everything, len(FEATURES))
    print("weights (all sets, each weighted equally):", {n: round(float(v), 3) for n, v in zip(FEATURES, w)})


def _fit(rows, n_features: int, epochs: int = 300, lr: float = 0.5, l2: float = 1e-3):
    pairs, weights = [], []
    for (x, y, _), weight in rows:
        for i in np.flatnonzero(y > 0):
            for j in np.flatnonzero(y < y[i]):
                pairs.append(x[i] - x[j])
                weights.append(weight)
    if not pairs:
        return np.zeros(n_features)
    d, sw = np.asarray(pairs), np.asarray(weights) / np.sum(weights)
    w = np.zeros(n_features)
    w[0] = 1.0
    for _ in range(epochs):
        p = 1.0 / (1.0 + np.exp(np.clip(d @ w, -30, 30)))  # gradient of log(1 + exp(-d.w))
        w += lr * ((d * (p * sw)[:, None]).sum(axis=0) - l2 * w)
    return w


def _score(bench: qs.BenchSet, data: dict, qids: list[str], w) -> float:
    from quality import headline

    run = {}
    for q in qids:
        x, y, ranked = data[q]
        order = list(range(len(ranked)))
        if w is not None:
            head = len(y)
            order = sorted(range(head), key=lambda n: (-float(x[n] @ w), n)) + order[head:]
        run[q] = [ranked[n] for n in order if ranked[n]]
    sub = qs.BenchSet(bench.name, {q: bench.queries[q] for q in qids}, bench.docs, bench.score, bench.doc_of,
                      bench.headline)
    return headline(sub, sub.score(run))[0]
