"""What a relevance (rag_search.retrieval.relevance, what min_score compares) means on the judged sets.

    python bench/relevance_scale.py [--sets dendron notes] [--mirror /work/.mirror]

For each query of a set, the top 10 hits of a plain rag_search (hybrid, configured defaults) get their
relevance; a hit is relevant when the set judges its document relevant (any grade). Prints, per threshold, the
share of hits kept, the precision of the kept hits and the share of the relevant hits kept (recall within the
top 10), so a min_score can be chosen knowing what it costs.
"""

from __future__ import annotations

import argparse

import quality_sets as qs
from quality import engine_for

THRESHOLDS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)


def doc_of(bench, uri: str) -> str | None:
    return bench.doc_of(uri) or (uri.split("/docs/", 1)[1] if "/docs/" in uri else None)


def judged(bench, name: str) -> dict[str, set[str]]:
    """query id -> relevant document ids."""
    if name in qs.BEIR_SETS:
        from notes_set import build_notes

        ds = build_notes(qs.HERE / "out" / "notes") if name == "notes" else None
        return {q: {d for d, g in rel.items() if g > 0} for q, rel in ds.qrels.items()}
    import judged_sets

    return {q.id: {d for d, g in q.judgements.items() if g > 0} for q in judged_sets.load_set(name).queries}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", nargs="+", default=["dendron", "notes"])
    ap.add_argument("--mirror", default="/work/.mirror")
    args = ap.parse_args()
    from rag_search.retrieval import SearchRequest
    from rag_search.retrieval.relevance import engine_query_vectors, with_relevance

    for name in args.sets:
        bench = qs.load(name, args.mirror)
        engine = engine_for(qs.ensure_index(bench))
        rel = judged(bench, name)
        scored: list[tuple[float, bool]] = []
        for qid, text in list(bench.queries.items())[:300]:
            vec = engine_query_vectors(engine, [text]).get(text)
            hits = with_relevance(engine.store, text, engine.search(SearchRequest(text, top_k=10)).hits, vec)
            scored += [(h.relevance or 0.0, doc_of(bench, h.uri) in rel.get(qid, set())) for h in hits]
        total_rel = sum(r for _, r in scored) or 1
        print(f"{name}: {len(scored)} hits (top 10 of {min(len(bench.queries), 300)} queries), "
              f"{total_rel} judged relevant")
        print(f"  {'min_score':>9} {'kept':>6} {'precision':>9} {'relevant kept':>13}")
        for t in THRESHOLDS:
            kept = [r for s, r in scored if s >= t]
            print(f"  {t:>9.1f} {len(kept) / len(scored):>6.0%} {sum(kept) / max(len(kept), 1):>9.0%} "
                  f"{sum(kept) / total_rel:>13.0%}")


if __name__ == "__main__":
    main()
