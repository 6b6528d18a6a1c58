"""What the MCP read tools return: searches within the output budget, and only items the client may see.

Every tool here leaves out the collections mcp_guard refuses (an assistant-made collection whose folder now
leads outside the allowed roots): a search skips them with a note, reading one of their items is refused.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rag_search import mcp_guard, mcp_search
from rag_search.config import Paths
from rag_search.errors import RagError
from rag_search.mcp_metadata import metadata_schema
from rag_search.people import resolve_filters
from rag_search.records import Hit
from rag_search.retrieval import Filters, SearchRequest, parse_date
from rag_search.retrieval.filters import build_where
from rag_search.retrieval.related import related_items
from rag_search.store import Store, reads

if TYPE_CHECKING:
    from rag_search.mcp_server import RagContext

OUTPUT_BUDGET_TOKENS = 8_000  # Claude Code rejects tool output over 25,000 tokens
CHARS_PER_TOKEN = 4
ECHO_CHARS = 200  # of the query, in a search's answer (the client has the rest)
REFERENCE_FIELDS = ("title", "source", "item_id", "chunk_index", "heading", "page", "timestamp", "score", "relevance",
                    "stale")
# A batch answers for several calls: twice the budget of one (still under the 25,000 tokens Claude Code takes),
# shared by its queries; each keeps at least MIN_SHARE_TOKENS (room for ten hits as references).
BATCH_BUDGET_TOKENS = 16_000
MIN_SHARE_TOKENS = 800


def empty_index(paths: Paths) -> str:
    """Why an index may look empty, naming the database this server opened and how a client picks another."""
    import os

    home = os.environ.get("LOCAL_RAG_HOME")
    where = (f"LOCAL_RAG_HOME={home}" if home else "LOCAL_RAG_HOME is not set, so the default home; an MCP client "
             "that does not pass it opens this one, not a home the user set in their shell")
    return (f"The index is empty: this server opened {paths.db} ({where}). To use another home, add "
            '"env": {"LOCAL_RAG_HOME": "<that folder>"} to the local-rag entry of the client\'s MCP config and '
            "restart the client. If nothing is indexed yet: call rag_index(collection, path) with a folder, or run "
            "`local-rag index project NAME PATH` in a terminal.")


def search_filters(ctx: RagContext, collection: str | None = None, collections: list[str] | None = None,
                   source_type: str | list[str] | None = None, date_from: str | None = None,
                   date_to: str | None = None, author: str | None = None, participants: list[str] | None = None,
                   tags: list[str] | None = None, path_prefix: str | None = None,
                   metadata: dict[str, Any] | None = None, days: int | None = None) -> tuple[Filters | None, str | None]:
    """A search's filters (None: every collection asked for is one this client may not read) and a note on the
    collections left out."""
    if days is not None:
        date_from = date_from or f"{days}d"
    named = tuple(dict.fromkeys(([collection] if collection else []) + list(collections or [])))
    names, left_out = _scope(ctx, named)
    if names == ():
        return None, left_out
    types = (source_type,) if isinstance(source_type, str) else tuple(source_type or ())
    filters = Filters(collections=names or (), source_types=types, date_from=parse_date(date_from),
                      date_to=parse_date(date_to, end=True), author=author, participants=tuple(participants or ()),
                      tags=tuple(tags or ()), path_prefix=path_prefix, metadata=dict(metadata or {}))
    return resolve_filters(filters, ctx.people), left_out


def search_tool(ctx: RagContext, query: str | None = None, collection: str | None = None,
                collections: list[str] | None = None, top_k: int | None = None, mode: str = "hybrid",
                source_type: str | list[str] | None = None, date_from: str | None = None, date_to: str | None = None,
                author: str | None = None, participants: list[str] | None = None, tags: list[str] | None = None,
                path_prefix: str | None = None, metadata: dict[str, Any] | None = None, days: int | None = None,
                chunks: bool = False, searches: list[Any] | None = None, intent: str | None = None,
                min_score: float | None = None) -> dict[str, Any]:
    plan = mcp_search.plan_of(query, mode, searches, intent)
    filters, left_out = search_filters(ctx, collection, collections, source_type, date_from, date_to, author,
                                       participants, tags, path_prefix, metadata, days)
    if filters is None:
        return {"hits": [], "note": left_out}
    hits, in_scope = mcp_search.found(ctx, query, mode, filters, top_k, chunks, plan)
    hits, note = mcp_search.kept(hits, min_score)
    label = query if query and query.strip() else plan.searches[0].text if plan else ""
    return search_answer(ctx, label, mode, hits, in_scope, note, left_out) | (
        {"searches": len(plan.runs())} if plan else {})


def batch_search_tool(ctx: RagContext, queries: list[str], collection: str | None = None,
                      collections: list[str] | None = None, top_k: int | None = None, mode: str = "hybrid",
                      source_type: str | list[str] | None = None, date_from: str | None = None,
                      date_to: str | None = None, author: str | None = None, participants: list[str] | None = None,
                      tags: list[str] | None = None, path_prefix: str | None = None,
                      metadata: dict[str, Any] | None = None, days: int | None = None, chunks: bool = False,
                      min_score: float | None = None) -> dict[str, Any]:
    """Each query's answer as rag_search gives it (same filters), within a share of the output budget each."""
    filters, left_out = search_filters(ctx, collection, collections, source_type, date_from, date_to, author,
                                       participants, tags, path_prefix, metadata, days)
    if filters is None:
        return {"results": [], "note": left_out}
    budget = min(max(BATCH_BUDGET_TOKENS // max(len(queries), 1), MIN_SHARE_TOKENS), OUTPUT_BUDGET_TOKENS)

    def answer(query: str, hits: list[Hit], in_scope: int, note: str | None) -> dict[str, Any]:
        return search_answer(ctx, query, mode, hits, in_scope, note, None, budget)

    results = mcp_search.batch(ctx, queries, mode, filters, top_k, chunks, min_score, answer)
    return {"results": results} | ({"note": left_out} if left_out else {})


def search_answer(ctx: RagContext, query: str, mode: str, hits: list[Hit], in_scope: int, note: str | None,
                  left_out: str | None, budget_tokens: int = OUTPUT_BUDGET_TOKENS) -> dict[str, Any]:
    """What a search answers: the hits within the output budget, and notes (why none, what was left out)."""
    if in_scope == 0:
        if not reads.list_collections(ctx.store):
            raise RagError(empty_index(ctx.paths))
        return {"hits": [], "note": _join("Nothing is indexed in these collections yet.", left_out)}
    dicts, budget_note = budget_hits(hits, budget_tokens)
    echo = query if len(query) <= ECHO_CHARS else query[:ECHO_CHARS] + "..."
    out: dict[str, Any] = {"query": echo, "mode": mode, "hits": dicts}
    if not dicts and not note:
        note = "No matches. Try other words, mode='semantic', or fewer filters."
    if note or budget_note or left_out:
        out["note"] = _join(note, budget_note, left_out)
    return out


def _scope(ctx: RagContext, named: tuple[str, ...]) -> tuple[tuple[str, ...] | None, str | None]:
    """(collections to search: None for all, () for none left; a note on those left out)."""
    refused = mcp_guard.refusals(ctx.paths)
    for name in named:
        mcp_guard.check_read(refused, name)
    indexed = _collection_ids(ctx.store) if refused and not named else {}
    left_out = [why for name, why in refused.items() if name in indexed]
    if not left_out:
        return named or None, None
    return tuple(n for n in indexed if n not in refused), f"Left out: {' '.join(left_out)} {mcp_guard.NOT_SERVED}"


def _join(*notes: str | None) -> str:
    return " ".join(n for n in notes if n)


def _collection_ids(store: Store) -> dict[str, int]:
    with store.lock:
        return dict(store.conn.execute("SELECT name, id FROM collections ORDER BY name").fetchall())


def budget_hits(hits: list[Hit], budget_tokens: int = OUTPUT_BUDGET_TOKENS) -> tuple[list[dict], str | None]:
    """Hits as dicts within the output budget, best first: each in full if the references of every hit after it
    still fit, else as a snippet, else as a reference only (title, source, heading, score) — so a large top_k
    lists every hit and the best ones keep their text."""
    budget = budget_tokens * CHARS_PER_TOKEN
    full = [_hit_dict(h) for h in hits]
    refs = [{k: d[k] for k in REFERENCE_FIELDS if k in d} for d in full]
    reserve = [0] * (len(hits) + 1)  # what the references of hits n.. take
    for n in range(len(hits) - 1, -1, -1):
        reserve[n] = reserve[n + 1] + len(compact_json(refs[n])) + 1
    out, used, trimmed, bare = [], 0, 0, 0
    for n, hit in enumerate(hits):
        d = full[n]
        if used + len(compact_json(d)) + reserve[n + 1] > budget:
            d = {**d, "content": hit.snippet}
            trimmed += 1
            if used + len(compact_json(d)) + reserve[n + 1] > budget:
                d, trimmed, bare = refs[n], trimmed - 1, bare + 1
        size = len(compact_json(d)) + 1
        if used + size > budget:
            break
        out.append(d)
        used += size
    dropped = len(hits) - len(out)
    note = None
    if trimmed or bare or dropped:
        parts = [f"{trimmed} hit(s) show a snippet instead of the full chunk"] if trimmed else []
        parts += [f"{bare} hit(s) only where to look (title, source)"] if bare else []
        parts += [f"{dropped} more hit(s) omitted"] if dropped else []
        note = (f"Output kept under ~{budget_tokens} tokens: {', '.join(parts)}. Use rag_get_document(path_or_id) "
                "for a whole item, or a smaller top_k.")
    return out, note


def _hit_dict(hit: Hit) -> dict:
    d = {"content": hit.text, "title": hit.title, "collection": hit.collection, "source": hit.uri,
         "key": hit.key, "item_id": hit.item_id, "chunk_index": hit.chunk_index,
         "heading": " > ".join(hit.heading_path) or None, "page": hit.page, "timestamp": hit.to_dict()["timestamp"],
         "author": hit.author, "tags": list(hit.tags), "score": round(hit.score, 5),
         "relevance": None if hit.relevance is None else round(hit.relevance, 3), "stale": hit.stale,
         "also_matches": hit.also_matches()}
    return {k: v for k, v in d.items() if v not in (None, [])}  # compact: what is unknown is left out


def compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


# -- the other read tools -----------------------------------------------------------------------

def tagged(ctx: RagContext, tag: str, top_k: int) -> dict:
    """The newest items with a tag (nested tags included), without the collections mcp_guard refuses."""
    names, left_out = _scope(ctx, ())
    if names == ():
        return {"tag": tag, "items": [], "note": left_out}
    ids = tuple(_collection_ids(ctx.store)[n] for n in names or ())
    with ctx.store.lock:
        where = build_where(Filters(tags=(tag,)), collection_ids=ids)
        rows = ctx.store.conn.execute(
            "SELECT c.item_id, max(c.ts) AS t FROM chunks c JOIN items i ON i.id = c.item_id "
            f"WHERE {where.sql} GROUP BY c.item_id ORDER BY t DESC LIMIT ?", (*where.params, top_k)).fetchall()
        if not rows and not reads.list_collections(ctx.store):
            raise RagError(empty_index(ctx.paths))
        items = [reads.get_document(ctx.store, str(r[0])) for r in rows]
    out = {"tag": tag, "items": [{k: v for k, v in d.items() if k != "text"} | {"excerpt": d["text"][:400]}
                                 for d in items]}
    return out | ({"note": left_out} if left_out else {})


def metadata_filter_schema(ctx: RagContext) -> dict:
    """rag_search's metadata filter schema (mcp_metadata) over the collections mcp_guard does not refuse."""
    refused = mcp_guard.refusals(ctx.paths)
    skip = tuple(i for n, i in _collection_ids(ctx.store).items() if n in refused)
    with ctx.store.lock:
        return metadata_schema(ctx.store, skip)


def get_document(ctx: RagContext, path_or_id: str, collection: str | None) -> dict:
    with ctx.store.lock:
        item_id, coll = reads.find_item(ctx.store, path_or_id, collection)
        mcp_guard.check_read(mcp_guard.refusals(ctx.paths), coll)
        return reads.get_document(ctx.store, f"item:{item_id}")


def related(ctx: RagContext, path_or_id: str, top_k: int) -> dict:
    refused = mcp_guard.refusals(ctx.paths)
    item_id, coll = reads.find_item(ctx.store, path_or_id)
    mcp_guard.check_read(refused, coll)
    found = related_items(ctx.store, item_id, top_k)
    return found | {"similar": mcp_guard.served(refused, found["similar"])}  # links stay in the item's collection


def recent(ctx: RagContext, collection: str | None, days: int, limit: int) -> list[dict]:
    refused = mcp_guard.refusals(ctx.paths)
    mcp_guard.check_read(refused, collection)
    return mcp_guard.served(refused, reads.recent_items(ctx.store, collection, days, limit))


def collection_info(ctx: RagContext, collection: str) -> dict:
    mcp_guard.check_read(mcp_guard.refusals(ctx.paths), collection)
    return reads.collection_info(ctx.store, collection)


def status(ctx: RagContext) -> dict:
    """reads.status without the failures (paths, messages) of refused collections."""
    refused = mcp_guard.refusals(ctx.paths)
    st = reads.status(ctx.store)
    return st | {"recent_failures": mcp_guard.served(refused, st["recent_failures"])}


def failures(ctx: RagContext) -> list[dict]:
    return mcp_guard.served(mcp_guard.refusals(ctx.paths), [f.to_dict() for f in reads.failures(ctx.store, limit=100)])
