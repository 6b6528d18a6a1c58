"""Query plans: an agent's typed sub-queries (keyword: exact words; semantic: meaning), fused into one answer.

The calling model expands the question (no local LLM does): each sub-query runs in its own mode with the same
filters, and their item rankings are fused by RRF, each weighing the same. An intent (what the user is after, in
a sentence) runs as one more semantic search at half weight (measured: bench/plan_experiment.py, bench/RESULTS.md).
The shown passage of an item is the one of the sub-query that ranked it best; its relevance (relevance.py) is the
best over the sub-queries.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from rag_search.retrieval.bounds import MAX_INTENT_CHARS, MAX_SUBQUERIES, MAX_SUBQUERY_CHARS
from rag_search.errors import QueryError
from rag_search.records import Hit
from rag_search.retrieval.engine import SearchRequest
from rag_search.retrieval.fusion import rrf
from rag_search.retrieval.relevance import engine_query_vectors, with_relevance

if TYPE_CHECKING:
    from rag_search.retrieval import Filters, SearchEngine

KINDS = ("keyword", "semantic", "hybrid")  # hybrid: the plain query, when the agent gives one beside its plan
DEPTH = 30  # items each sub-query hands to the fusion
INTENT_WEIGHT = 0.5  # the intent's semantic search weighs this in the fusion (each sub-query weighs 1)


@dataclass(frozen=True)
class SubQuery:
    kind: str  # keyword | semantic | hybrid
    text: str
    weight: float = 1.0  # its ranking's weight in the fusion


@dataclass(frozen=True)
class QueryPlan:
    searches: tuple[SubQuery, ...]
    intent: str | None = None

    def checked(self) -> QueryPlan:
        """The plan, or QueryError naming what is out of bounds (count, lengths, kinds, empty texts)."""
        if not self.searches:
            raise QueryError("Give a query, or searches: [{type: keyword|semantic, query: ...}].")
        typed = [s for s in self.searches if s.kind != "hybrid"]
        if len(typed) > MAX_SUBQUERIES:
            raise QueryError(f"{len(typed)} searches given; a plan holds at most {MAX_SUBQUERIES}. Keep the "
                             "best ones, or call rag_batch_search for separate questions.")
        for n, s in enumerate(self.searches, start=1):
            if s.kind not in KINDS:
                raise QueryError(f"searches[{n}].type is '{s.kind[:20]}'; use keyword (exact words) or semantic "
                                 "(meaning).")
            if not s.text.strip():
                raise QueryError(f"searches[{n}].query is empty. Say what to search for, or leave that search out.")
            if s.kind != "hybrid" and len(s.text) > MAX_SUBQUERY_CHARS:
                raise QueryError(f"searches[{n}].query is {len(s.text):,} characters long; a sub-query has at most "
                                 f"{MAX_SUBQUERY_CHARS:,}. Search with the words that matter.")
        if self.intent and len(self.intent) > MAX_INTENT_CHARS:
            raise QueryError(f"intent is {len(self.intent):,} characters long; at most {MAX_INTENT_CHARS} are "
                             "allowed. Say in a sentence what the user is after.")
        return self

    def runs(self) -> tuple[SubQuery, ...]:
        """What is searched: the sub-queries, and the intent as one more semantic search at half weight (its effect
        on the judged set was within noise, a full weight hurt: bench/RESULTS.md)."""
        intent = (self.intent or "").strip()
        return self.searches + ((SubQuery("semantic", intent, INTENT_WEIGHT),) if intent else ())


@dataclass
class PlanResult:
    hits: list[Hit]
    chunks_in_index: int


def run_plan(engine: SearchEngine, plan: QueryPlan, filters: Filters, top_k: int | None = None,
             relevance: bool = True, scope: tuple[str, ...] | None = None) -> PlanResult:
    """The plan's sub-queries run (one lock, their vectors embedded at once) and fused into the top k items;
    `scope`: the caller's collections (SearchRequest.scope)."""
    runs = plan.checked().runs()
    top_k = top_k or engine.settings.top_k
    semantic = [s.text for s in runs if s.kind != "keyword"]
    vectors = engine_query_vectors(engine, semantic)
    lists: dict[str, tuple[float, list[Hit]]] = {}
    chunks_in_index, corpus = 0, None
    with engine.store.lock:
        for n, sub in enumerate(runs):
            result = engine.search(SearchRequest(sub.text, top_k=max(top_k, DEPTH), mode=sub.kind,  # type: ignore[arg-type]
                                                 filters=filters, query_vector=vectors.get(sub.text), scope=scope))
            lists[f"{sub.kind}#{n + 1}"] = (sub.weight, result.hits)
            chunks_in_index, corpus = max(chunks_in_index, result.chunks_in_index), result.corpus or corpus
    hits = fuse_lists(lists, engine.settings.rrf_k)[:top_k]
    if relevance:
        hits = best_relevance(engine, runs, hits, vectors, corpus)
    return PlanResult(hits, chunks_in_index)


def fuse_lists(lists: dict[str, tuple[float, list[Hit]]], k: int) -> list[Hit]:
    """Weighted hit lists (one per sub-query, in plan order) fused by RRF over their items; each item shows the hit
    of the list that ranked it best, with the fused score and its rank in every list."""
    rankings = {name: [h.item_id for h in hits] for name, (_, hits) in lists.items()}
    weights = {name: weight for name, (weight, _) in lists.items()}
    shown: dict[int, tuple[int, Hit]] = {}
    for _, hits in lists.values():
        for rank, hit in enumerate(hits, start=1):
            if hit.item_id not in shown or rank < shown[hit.item_id][0]:
                shown[hit.item_id] = (rank, hit)
    return [replace(shown[f.id][1], score=f.score, item_ranks=dict(f.ranks), rerank_score=None)
            for f in rrf(rankings, weights, k)]


def best_relevance(engine: SearchEngine, runs: tuple[SubQuery, ...], hits: list[Hit],
                   vectors: dict[str, np.ndarray], corpus=None) -> list[Hit]:
    """Each hit with its best relevance over the sub-queries (a keyword sub-query's words, a semantic one's
    meaning); `corpus`: the scope's word statistics (relevance.with_relevance)."""
    best = {h.item_id: 0.0 for h in hits}
    for sub in runs:
        for h in with_relevance(engine.store, sub.text, hits, vectors.get(sub.text), corpus):
            best[h.item_id] = max(best[h.item_id], h.relevance or 0.0)
    return [replace(h, relevance=best[h.item_id]) for h in hits]
