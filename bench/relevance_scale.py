"""What a relevance floor (rag_search.retrieval.relevance: min_score for agents, search.weaker_below for people) keeps
and hides on the judged sets.

    python bench/relevance_scale.py [--sets scifact dendron notes vue-zh] [--queries 300] [--examples 0.5]

For each query of a set, the top 10 hits of a plain search (hybrid, configured defaults, as the page and
`local-rag search` run it) get their relevance; a hit is right when the set judges its document relevant (any
grade). Per threshold: the share of hits kept; of the right hits, the share kept; of the wrong hits (noise), the
share folded away; of the queries with a right hit in the top 10, the share whose right hits are all folded away
(the page shows "nothing found" or only other hits for them); and of nonsense queries (random letter strings,
`--nonsense` of them), the share answered "nothing found" (every hit folded away). `--examples T` prints the right
answers folded away at threshold T, and the relevance of the best hit of each nonsense query.
"""

from __future__ import annotations

import argparse
import random
import string

import quality_sets as qs
from quality import engine_for

THRESHOLDS = (0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7)


def doc_of(bench, uri: str) -> str | None:
    return bench.doc_of(uri) or (uri.split("/docs/", 1)[1] if "/docs/" in uri else None)


def judged(bench, name: str) -> dict[str, set[str]]:
    """query id -> relevant document ids."""
    if name in qs.BEIR_SETS:
        from beir import load_beir
        from notes_set import build_notes

        ds = build_notes(qs.HERE / "out" / "notes") if name == "notes" else load_beir(str(qs.EVAL / "data" /
                                                                                           "scifact-train"))
        return {q: {d for d, g in rel.items() if g > 0} for q, rel in ds.qrels.items()}
    import judged_sets

    return {q.id: {d for d, g in q.judgements.items() if g > 0} for q in judged_sets.load_set(name).queries}


def nonsense(n: int) -> list[str]:
    """Queries nobody's notes answer: two or three random 'words' of 5-9 letters."""
    rng = random.Random(32)
    return [" ".join("".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(5, 9)))
                     for _ in range(rng.randint(2, 3))) for _ in range(n)]


def scored(engine, bench, rel: dict[str, set[str]], limit: int) -> list[tuple[str, str, list[tuple[float, bool, str]]]]:
    """(query id, text, [(relevance, right, doc)] of its top 10) for the first `limit` queries."""
    from rag_search.retrieval import SearchRequest
    from rag_search.retrieval.relevance import search_with_relevance

    out = []
    for qid, text in list(bench.queries.items())[:limit]:
        hits = search_with_relevance(engine, SearchRequest(text, top_k=10)).hits
        docs = [doc_of(bench, h.uri) or "" for h in hits]
        out.append((qid, text, [(h.relevance or 0.0, d in rel.get(qid, set()), d) for h, d in zip(hits, docs)]))
    return out


def report(name: str, runs, junk: list[list[float]]) -> None:
    hits = [h for _, _, hs in runs for h in hs]
    right, wrong = [s for s, r, _ in hits if r], [s for s, r, _ in hits if not r]
    answerable = [[s for s, r, _ in hs if r] for _, _, hs in runs if any(r for _, r, _ in hs)]
    print(f"{name}: {len(runs)} queries, {len(hits)} hits in their top 10: {len(right)} right, {len(wrong)} wrong; "
          f"{len(answerable)} queries have a right hit; {len(junk)} nonsense queries")
    print(f"  {'floor':>5} {'hits kept':>9} {'right kept':>10} {'noise folded':>12} {'right answers hidden':>20} "
          f"{'nonsense: nothing found':>23}")
    for t in THRESHOLDS:
        kept = sum(s >= t for s, _, _ in hits) / max(len(hits), 1)
        hidden = sum(max(a) < t for a in answerable) / max(len(answerable), 1)
        empty = sum(max(j or [0.0]) < t for j in junk) / max(len(junk), 1)
        print(f"  {t:>5.2f} {kept:>9.0%} {sum(s >= t for s in right) / max(len(right), 1):>10.0%} "
              f"{sum(s < t for s in wrong) / max(len(wrong), 1):>12.0%} {hidden:>20.0%} {empty:>23.0%}")


def examples(runs, junk_runs, floor: float) -> None:
    for qid, text, hs in runs:
        best = max((s for s, r, _ in hs if r), default=None)
        if best is not None and best < floor:
            doc = next(d for s, r, d in hs if r and s == best)
            print(f"    hidden at {floor}: [{qid}] {text[:90]!r} -> {doc} (relevance {best:.3f})")
    print("    nonsense, best relevance: " + ", ".join(f"{q!r} {max(s or [0]):.2f}" for q, s in junk_runs[:12]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", nargs="+", default=["scifact", "dendron", "notes", "vue-zh"])
    ap.add_argument("--mirror", default="/work/.mirror")
    ap.add_argument("--queries", type=int, default=300, help="first N queries of each set")
    ap.add_argument("--nonsense", type=int, default=100)
    ap.add_argument("--examples", type=float, help="print the right answers folded away at this floor")
    args = ap.parse_args()
    from rag_search.retrieval import SearchRequest
    from rag_search.retrieval.relevance import search_with_relevance

    for name in args.sets:
        bench = qs.load(name, args.mirror)
        engine = engine_for(qs.ensure_index(bench))
        runs = scored(engine, bench, judged(bench, name), args.queries)
        junk = [(q, [h.relevance or 0.0 for h in search_with_relevance(engine, SearchRequest(q, top_k=10)).hits])
                for q in nonsense(args.nonsense)]
        report(name, runs, [s for _, s in junk])
        if args.examples is not None:
            examples(runs, junk, args.examples)


if __name__ == "__main__":
    main()
