"""The search tools' hits: a plain query or a query plan, a batch of queries, min_score, stale marks, context.

mcp_reads builds the filters and the answer's shape; this module finds the hits. Every hit carries its
relevance (0..1, comparable across queries: retrieval/relevance.py, what min_score compares) and, when its
source changed or disappeared since indexing, its stale mark (stale.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from rag_search.retrieval.bounds import check_query
from rag_search.errors import QueryError, RagError
from rag_search.records import Hit
from rag_search.retrieval import Filters, SearchRequest
from rag_search.retrieval.context import chunks_around
from rag_search.retrieval.plan import QueryPlan, SubQuery, run_plan
from rag_search.retrieval.relevance import at_least, engine_query_vectors, search_with_relevance
from rag_search.retrieval.stale import mark_hits, stale_marks, stale_note

if TYPE_CHECKING:
    from rag_search.mcp.context import RagContext


def plan_of(query: str | None, mode: str, searches: list[Any] | None, intent: str | None) -> QueryPlan | None:
    """The query plan of a rag_search call (None: a plain query, answered as before)."""
    if not searches and not intent:
        if not query or not query.strip():
            raise QueryError("Give a query (what to look for), or searches: [{type: keyword|semantic, query: ...}].")
        return None
    if not searches and not (query and query.strip()):
        raise QueryError("intent alone is not searched: give a query or searches as well.")
    subs = tuple(SubQuery(_field(s, "type"), _field(s, "query")) for s in searches or ())
    return QueryPlan(((SubQuery(mode, query),) if query and query.strip() else ()) + subs, intent).checked()


def _field(search: Any, name: str) -> str:
    return str(search.get(name, "") if isinstance(search, dict) else getattr(search, name, ""))


def found(ctx: RagContext, query: str | None, mode: str, filters: Filters, top_k: int | None, chunks: bool = False,
          plan: QueryPlan | None = None, query_vector: np.ndarray | None = None,
          scope: tuple[str, ...] | None = None) -> tuple[list[Hit], int]:
    """(hits with relevance and stale marks, chunks in scope) of a plain query or a plan; `scope`: the collections
    the caller may see, whose word statistics alone weigh the scores (None: the owner's whole index)."""
    if plan is not None:
        if chunks:
            raise QueryError("chunks=true works with a plain query, not with searches; drop one of them.")
        result = run_plan(ctx.engine, plan, filters, top_k, scope=scope)
        return mark_hits(ctx.store, result.hits), result.chunks_in_index
    query = check_query(query or "")
    request = SearchRequest(query, top_k=top_k, mode=mode, filters=filters, chunks=chunks,  # type: ignore[arg-type]
                            query_vector=query_vector, scope=scope)
    result = search_with_relevance(ctx.engine, request)
    return mark_hits(ctx.store, result.hits), result.chunks_in_index


def kept(hits: list[Hit], min_score: float | None) -> tuple[list[Hit], str | None]:
    """The hits at or above min_score, and notes: how many fell below it, which are stale."""
    above = at_least(hits, min_score)
    cut = len(hits) - len(above)
    note = (f"{cut} hit(s) below min_score {min_score} left out (relevance 0..1: the larger of meaning similarity "
            "and the share of the query's rare words a hit holds)." if cut else None)
    return above, " ".join(n for n in (note, stale_note(above)) if n) or None


def batch(ctx: RagContext, queries: list[str], mode: str, filters: Filters, top_k: int | None, chunks: bool,
          min_score: float | None, answer, scope: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """Each query's answer (answer(query, hits, chunks_in_scope, note) builds it), or its error; the queries'
    vectors come from one model call and every search runs under one lock acquisition."""
    vectors = engine_query_vectors(ctx.engine, queries) if mode != "keyword" else {}
    out = []
    with ctx.store.lock:
        for query in queries:
            try:
                hits, in_scope = found(ctx, query, mode, filters, top_k, chunks, query_vector=vectors.get(query),
                                       scope=scope)
            except RagError as exc:
                out.append({"query": query[:200], "error": str(exc)})
                continue
            hits, note = kept(hits, min_score)
            out.append(answer(query, hits, in_scope, note))
    return out


def context(ctx: RagContext, item_id: int, collection: str, chunk_index: int, before: int, after: int,
            budget_chars: int) -> dict[str, Any]:
    """The chunks around a hit of an item the caller may read (mcp_reads.context_tool found it), with the item's
    title and source, and its stale mark."""
    with ctx.store.lock:
        title, uri, key = ctx.store.conn.execute("SELECT title, uri, key FROM items WHERE id = ?",
                                                 (item_id,)).fetchone()
    around = chunks_around(ctx.store, item_id, chunk_index, before, after, budget_chars)
    mark = stale_marks(ctx.store, [item_id]).get(item_id)
    head = {"title": title, "collection": collection, "source": uri, "key": key}
    return head | around | ({"stale": mark} if mark else {})
