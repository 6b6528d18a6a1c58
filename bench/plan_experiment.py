"""Do query plans help? Hand-written plans (bench/sets/<set>/plans.jsonl) against the plain query, on a judged set.

    python bench/plan_experiment.py                 # dendron: every variant, per query kind
    python bench/plan_experiment.py --set dendron --mirror /work/.mirror

Each plan is what a calling model might write for the query: a keyword sub-query (exact words), a semantic one
(meaning, in English when the question is not), and an intent sentence. Variants, all through
rag_search.retrieval.plan.run_plan with the set's configured engine:
  plain            the query alone (hybrid, as rag_search answers it without searches)
  plan             the query (hybrid) + the plan's sub-queries, each weighing 1
  plan-only        the sub-queries without the query
  plan-query-w2    plan, the query weighing 2 (qmd gives its first sub-query twice the weight); plan-kw-w2: the keyword one
  plan+intent-pre  plan, the intent written before each semantic sub-query
  plan+intent-W     plan, the intent as one more semantic search of weight W; plan-only+int-W: without the query
  shipped          what rag_search does: plan + the intent at INTENT_WEIGHT (0.5)
Scored only on the queries that have a plan (nDCG@5, Hit@1, Hit@3 by kind).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import quality_sets as qs
from quality import engine_for

HERE = Path(__file__).parent


def load_plans(name: str) -> dict[str, dict]:
    path = HERE / "sets" / name / "plans.jsonl"
    return {p["id"]: p for p in map(json.loads, path.read_text(encoding="utf-8").splitlines()) if p}


def variants(query: str, plan: dict):
    from rag_search.retrieval.plan import QueryPlan, SubQuery

    subs = tuple(SubQuery(s["type"], s["query"]) for s in plan["searches"])
    intent = plan.get("intent")
    main = (SubQuery("hybrid", query),)
    pre = tuple(SubQuery(s.kind, f"{intent}. {s.text}" if s.kind == "semantic" and intent else s.text) for s in subs)
    def w(subq, weight):
        return SubQuery(subq.kind, subq.text, weight)

    as_search = lambda weight: (SubQuery("semantic", intent, weight),) if intent else ()  # noqa: E731
    return {
        "plain": QueryPlan(main),
        "plan": QueryPlan(main + subs),
        "plan-only": QueryPlan(subs),
        "plan-query-w2": QueryPlan((w(main[0], 2.0),) + subs),
        "plan-kw-w2": QueryPlan(main + (w(subs[0], 2.0),) + subs[1:]),
        "plan+intent-pre": QueryPlan(main + pre),
        "plan+intent-1": QueryPlan(main + subs + as_search(1.0)),
        "plan+intent-.5": QueryPlan(main + subs + as_search(0.5)),
        "plan+intent-.3": QueryPlan(main + subs + as_search(0.3)),
        "plan-only+int-1": QueryPlan(subs + as_search(1.0)),
        "plan-only+int-.5": QueryPlan(subs + as_search(0.5)),
        "shipped": QueryPlan(main + subs, intent),
    }


def doc_of(bench, uri: str) -> str | None:
    """The judged document of a hit (also when the index was built from a copy of the corpus elsewhere)."""
    return bench.doc_of(uri) or (uri.split("/docs/", 1)[1] if "/docs/" in uri else None)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", default="dendron")
    ap.add_argument("--mirror", default="/work/.mirror")
    args = ap.parse_args()
    from rag_search.retrieval import Filters
    from rag_search.retrieval.plan import run_plan

    bench = qs.load(args.set, args.mirror)
    engine = engine_for(qs.ensure_index(bench))
    plans = load_plans(args.set)
    runs: dict[str, dict[str, list[str]]] = {}
    times: dict[str, list[float]] = {}
    for qid, plan in plans.items():
        for name, qplan in variants(bench.queries[qid], plan).items():
            t0 = time.perf_counter()
            hits = run_plan(engine, qplan, Filters(), top_k=10, relevance=False).hits
            times.setdefault(name, []).append(time.perf_counter() - t0)
            runs.setdefault(name, {})[qid] = list(dict.fromkeys(d for d in (doc_of(bench, h.uri) for h in hits) if d))
    groups = ("all", "conceptual", "other-language", "keyword")
    print(f"{args.set}: {len(plans)} queries with a hand-written plan; nDCG@5 / Hit@1 / Hit@3 per kind; median ms")
    print(f"{'variant':<16}" + "".join(f"{g:>26}" for g in groups) + f"{'ms':>8}")
    for name, run in runs.items():
        scores = bench.score(run)
        cells = []
        for g in groups:
            s = scores.get(g)
            cells.append(f"{'-':>26}" if not s else
                         f"{s['ndcg@5']:>8.3f} {s['hit@1']:>6.3f} {s['hit@3']:>6.3f} ({s['queries']:>2})")
        ms = sorted(times[name])[len(times[name]) // 2] * 1000
        print(f"{name:<16}" + "".join(cells) + f"{ms:>8.0f}")


if __name__ == "__main__":
    main()
