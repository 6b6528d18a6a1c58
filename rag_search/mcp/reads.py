"""What the MCP read tools return: searches within the output budget, and only items the client may see.

Every tool here leaves out the collections mcp_guard refuses (an assistant-made collection whose folder now
leads outside the allowed roots): a search skips them with a note, reading one of their items is refused.
A person with a key (users.py) reads only their collections (mcp_guard.scope): searches pass them to the
retrievers as the collection filter, lookups search only them, and the others are answered as unknown.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rag_search.mcp import guard as mcp_guard
from rag_search.mcp import metadata as mcp_metadata
from rag_search.mcp import search as mcp_search
from rag_search.access import users
from rag_search.config import Paths
from rag_search.errors import RagError
from rag_search.mcp.metadata import metadata_schema
from rag_search.people import resolve_filters
from rag_search.records import Hit
from rag_search.retrieval import Filters, parse_date
from rag_search.retrieval.filters import build_where
from rag_search.retrieval.related import related_items
from rag_search.store import Store, reads

if TYPE_CHECKING:
    from rag_search.mcp.context import RagContext

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
    hits, in_scope = mcp_search.found(ctx, query, mode, filters, top_k, chunks, plan, scope=stats_scope(ctx))
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

    results = mcp_search.batch(ctx, queries, mode, filters, top_k, chunks, min_score, answer, stats_scope(ctx))
    return {"results": results} | ({"note": left_out} if left_out else {})


def stats_scope(ctx: RagContext) -> tuple[str, ...] | None:
    """The collections whose word statistics weigh this caller's scores: theirs (None: the owner's whole index)."""
    visible = users.visible(ctx.paths)
    return None if visible is None else tuple(sorted(visible))


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
    scope = mcp_guard.scope(ctx.paths)
    if not scope.narrowed:
        return named or None, None
    existing = _collection_ids(ctx.store)
    for name in named:
        scope.check(name, existing)
    if named:
        return named, None
    names = tuple(n for n in existing if scope.allows(n))
    left_out = scope.notes(existing)
    if left_out:
        return names, f"Left out: {' '.join(left_out)} {mcp_guard.NOT_SERVED}"
    if scope.visible is None:
        return None, None
    return names, None if names else mcp_guard.NO_GRANTS


def _within(ctx: RagContext, scope: mcp_guard.Scope, collection: str | None) -> tuple[str, ...] | None:
    """The collections a lookup may find items in (None: all), after checking the one named."""
    existing = _collection_ids(ctx.store) if scope.narrowed else {}
    scope.check(collection, existing)
    return None if scope.visible is None else tuple(n for n in existing if n in scope.visible)


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
    """rag_search's metadata filter schema (mcp_metadata) over the collections the caller may read."""
    scope = mcp_guard.scope(ctx.paths)
    skip = tuple(i for n, i in _collection_ids(ctx.store).items() if not scope.allows(n))
    with ctx.store.lock:
        return metadata_schema(ctx.store, skip)


def metadata_by_collection(ctx: RagContext) -> dict:
    """ingestion://metadata: per collection the caller may read, its common metadata keys and values."""
    scope = mcp_guard.scope(ctx.paths)
    return mcp_metadata.metadata_by_collection(
        ctx.store, tuple(n for n in _collection_ids(ctx.store) if not scope.allows(n)))


def get_document(ctx: RagContext, path_or_id: str, collection: str | None) -> dict:
    scope = mcp_guard.scope(ctx.paths)
    with ctx.store.lock:
        item_id, coll = reads.find_item(ctx.store, path_or_id, collection, _within(ctx, scope, collection))
        mcp_guard.check_read(scope.refused, coll)
        return reads.get_document(ctx.store, f"item:{item_id}")


def context_tool(ctx: RagContext, path_or_id: str, chunk_index: int, before: int, after: int) -> dict:
    """rag_context: the passages around a hit, in an item found as rag_get_document finds it (only in the
    collections the caller may read)."""
    scope = mcp_guard.scope(ctx.paths)
    with ctx.store.lock:
        item_id, coll = reads.find_item(ctx.store, path_or_id, None, _within(ctx, scope, None))
        mcp_guard.check_read(scope.refused, coll)
    return mcp_search.context(ctx, item_id, coll, chunk_index, before, after,
                              OUTPUT_BUDGET_TOKENS * CHARS_PER_TOKEN)


def related(ctx: RagContext, path_or_id: str, top_k: int) -> dict:
    scope = mcp_guard.scope(ctx.paths)
    within = _within(ctx, scope, None)
    item_id, coll = reads.find_item(ctx.store, path_or_id, within=within)
    mcp_guard.check_read(scope.refused, coll)
    ids = tuple(i for n, i in _collection_ids(ctx.store).items() if n in within) if within is not None else ()
    found = related_items(ctx.store, item_id, top_k, collection_ids=ids)
    return found | {"similar": scope.rows(found["similar"])}  # links stay in the item's collection


def recent(ctx: RagContext, collection: str | None, days: int, limit: int) -> list[dict]:
    scope = mcp_guard.scope(ctx.paths)
    within = _within(ctx, scope, collection)
    return scope.rows(reads.recent_items(ctx.store, collection, days, limit, within=within))


def collection_info(ctx: RagContext, collection: str) -> dict:
    _within(ctx, mcp_guard.scope(ctx.paths), collection)
    return reads.collection_info(ctx.store, collection)


def list_collections(ctx: RagContext) -> dict:
    """The collections the caller may read (a refused one is listed, as before: its items are what is left out)."""
    visible = mcp_guard.scope(ctx.paths).visible
    rows = [r for r in reads.list_collections(ctx.store) if visible is None or r.name in visible]
    if rows:
        return {"collections": [r.to_dict() for r in rows]}
    return {"collections": [], "note": empty_index(ctx.paths) if visible is None else mcp_guard.NO_GRANTS}


def status(ctx: RagContext) -> dict:
    """reads.status of the collections the caller may read, without the failures of refused collections; a
    person with a key sees totals of their collections and not where the index lives."""
    scope = mcp_guard.scope(ctx.paths)
    st = reads.status(ctx.store)
    st |= {"recent_failures": scope.rows(st["recent_failures"])}
    if scope.visible is None:
        return st
    colls = [c for c in st["collections"] if c["name"] in scope.visible]
    totals = {"collections": len(colls), **{k: sum(c[k] for c in colls) for k in ("items", "chunks", "failed")}}
    last = max((c["last_indexed"] for c in colls if c["last_indexed"]), default=None)
    hidden = ("db_path", "db_bytes", "pending_migrations")
    return {k: v for k, v in st.items() if k not in hidden} | {
        "collections": colls, "totals": totals, "last_indexed": last, "sources": scope.rows(st["sources"])}


def failures(ctx: RagContext) -> list[dict]:
    scope = mcp_guard.scope(ctx.paths)
    within = _within(ctx, scope, None)
    return scope.rows([f.to_dict() for f in reads.failures(ctx.store, limit=100, within=within)])


def knowledge_stats(ctx: RagContext) -> list[dict]:
    return _visible_rows(ctx, reads.knowledge_stats(ctx.store))


def source_scans(ctx: RagContext) -> list[dict]:
    return _visible_rows(ctx, reads.source_scans(ctx.store))


def _visible_rows(ctx: RagContext, rows: list[dict]) -> list[dict]:
    """Per-collection rows of the collections the caller sees (the owner: all, refused ones too, as before)."""
    visible = users.visible(ctx.paths)
    return rows if visible is None else [r for r in rows if r.get("collection") in visible]
