"""The MCP server: search tools and ingestion resources (with mcp_http, the only modules importing the `mcp` SDK).

One warm process: rag.db and the embedder are opened once and shared by every session. Tools are
thin: parse arguments → one library call → JSON. Errors come back as tool errors that say what to do.
"""

from __future__ import annotations

import json
import sys
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

from rag_search import mcp_http
from rag_search.config import Paths, Settings, load_settings
from rag_search.embedders import Embedder, load_embedder
from rag_search.errors import EmbedderMismatch, RagError
from rag_search.mcp_metadata import metadata_by_collection, metadata_schema
from rag_search.mcp_schema import compact_tools
from rag_search.records import Hit
from rag_search.retrieval import Filters, SearchEngine, SearchRequest, parse_date
from rag_search.retrieval.filters import build_where
from rag_search.retrieval.related import related_items
from rag_search.people import PeopleDirectory, resolve_filters
from rag_search.store import Store, reads
from rag_search.store.vectors import same_vectors

OUTPUT_BUDGET_TOKENS = 8_000  # Claude Code rejects tool output over 25,000 tokens
CHARS_PER_TOKEN = 4
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
# rag_index writes registry.yaml and the index, and a re-index drops entries of items gone from the source.
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)
INSTRUCTIONS = (
    "local-rag searches the user's own notes, documents and files, indexed on this machine. Start with "
    "rag_search (hybrid keyword + semantic); filter by collection, dates, tags, author or metadata; open a "
    "whole item with rag_get_document; explore with rag_related. rag_list_collections shows what is indexed."
)


@dataclass
class RagContext:
    paths: Paths
    settings: Settings
    store: Store
    embedder: Embedder
    engine: SearchEngine
    people: PeopleDirectory | None = None


_context: RagContext | None = None


def open_context(paths: Paths | None = None) -> RagContext:
    """Open the store and the embedder once per process (sessions share them)."""
    global _context
    if _context is None:
        paths = paths or Paths.from_env()
        settings = load_settings(paths.config)
        store = Store.open(paths.db)
        embedder = load_embedder(settings.embedder, paths)
        _context = RagContext(paths, settings, store, embedder, SearchEngine(store, embedder, settings.search, bits_in_ram=True),
                              PeopleDirectory.from_settings(settings))
        recorded = store.embedder
        if recorded and same_vectors(recorded[0], embedder.id) and recorded[1] == embedder.dimensions:
            embedder.embed_query("warm up")  # load the model now, not on the first question
    return _context


def close_context() -> None:
    """Close rag.db (the server is stopping): the last connection to close folds the WAL in and removes it."""
    global _context
    if _context is not None:
        _context.store.close()
        _context = None
    resources = sys.modules.get("rag_pipelines.wiring.resources")  # opened by rag_index, if it ran
    if resources is not None:
        resources.close_all()


def _ctx() -> RagContext:
    return open_context()


def _fail(exc: RagError) -> ToolError:
    msg = str(exc)
    if isinstance(exc, EmbedderMismatch):
        msg += " (Ask the user to run that command in a terminal.)"
    return ToolError(msg)


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


async def _call(fn, *args, **kwargs):
    """Run blocking library code off the event loop; our errors become tool errors."""
    try:
        return await anyio.to_thread.run_sync(partial(fn, *args, **kwargs))
    except RagError as exc:
        raise _fail(exc) from exc


REFERENCE_FIELDS = ("title", "source", "item_id", "heading", "page", "timestamp", "score")


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
         "also_matches": [s["heading"] or f"passage {s['chunk_index'] + 1}" for s in hit.sections]}
    return {k: v for k, v in d.items() if v not in (None, [])}  # compact: what is unknown is left out


def compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def search_tool(query: str, collection: str | None = None, collections: list[str] | None = None,
                top_k: int | None = None, mode: str = "hybrid", source_type: str | list[str] | None = None,
                date_from: str | None = None, date_to: str | None = None, author: str | None = None,
                participants: list[str] | None = None, tags: list[str] | None = None,
                path_prefix: str | None = None, metadata: dict[str, Any] | None = None,
                days: int | None = None, chunks: bool = False) -> dict[str, Any]:
    ctx = _ctx()
    if days is not None:
        if days < 1:
            raise RagError(f"days must be 1 or more (got {days}): items of the last N days.")
        date_from = date_from or f"{days}d"
    names = tuple(dict.fromkeys(([collection] if collection else []) + list(collections or [])))
    types = (source_type,) if isinstance(source_type, str) else tuple(source_type or ())
    filters = Filters(collections=names, source_types=types, date_from=parse_date(date_from),
                      date_to=parse_date(date_to, end=True), author=author, participants=tuple(participants or ()),
                      tags=tuple(tags or ()), path_prefix=path_prefix, metadata=dict(metadata or {}))
    filters = resolve_filters(filters, ctx.people)
    result = ctx.engine.search(SearchRequest(query, top_k=top_k, mode=mode, filters=filters,  # type: ignore[arg-type]
                                             chunks=chunks))
    if result.chunks_in_index == 0:
        if not reads.list_collections(ctx.store):
            raise RagError(empty_index(ctx.paths))
        return {"hits": [], "note": "Nothing is indexed in these collections yet."}
    hits, note = budget_hits(result.hits)
    out: dict[str, Any] = {"query": query, "mode": mode, "hits": hits}
    if note:
        out["note"] = note
    if not hits:
        out["note"] = "No matches. Try other words, mode='semantic', or fewer filters."
    return out


class RagServer(MCPServer):
    """MCPServer whose rag_search schema lists the metadata keys and values currently in the index."""

    async def call_tool(self, name, arguments, context=None):
        """As MCPServer's, with the JSON in the text content compact (the SDK pretty-prints it)."""
        return compact_result(await super().call_tool(name, arguments, context))

    async def list_tools(self):
        tool = self._tool_manager.get_tool("rag_search")
        if tool is not None and _context is not None:
            with _context.store.lock:
                tool.parameters["properties"]["metadata"] = metadata_schema(_context.store)
        return await super().list_tools()


def compact_result(result: Any) -> Any:
    """A tool result whose text is pretty-printed JSON, re-serialised without the indentation."""
    content = getattr(result, "content", None)
    if getattr(result, "is_error", True) or not content or len(content) != 1 or content[0].type != "text":
        return result
    try:
        value = json.loads(content[0].text)
    except ValueError:
        return result
    if not isinstance(value, (dict, list)):
        return result
    return result.model_copy(update={"content": [content[0].model_copy(update={"text": compact_json(value)})]})


@asynccontextmanager
async def _lifespan(server):
    yield await anyio.to_thread.run_sync(open_context)


def build_server() -> MCPServer:
    mcp = RagServer(name="local-rag", instructions=INSTRUCTIONS, lifespan=_lifespan)

    @mcp.tool(annotations=READ_ONLY)
    async def rag_search(query: str, collection: str | None = None, collections: list[str] | None = None,
                         top_k: int | None = None, mode: Literal["hybrid", "keyword", "semantic"] = "hybrid",
                         source_type: str | list[str] | None = None, date_from: str | None = None,
                         date_to: str | None = None, author: str | None = None,
                         participants: list[str] | None = None, tags: list[str] | None = None,
                         path_prefix: str | None = None, metadata: dict[str, str | list[str]] | None = None,
                         days: int | None = None, chunks: bool = False) -> dict:
        """Search the user's indexed notes and documents (all collections unless one is named).

        Dates are the items' own (sent, event start, recorded). One hit per item (its best passage; also_matches
        names its other matching sections); chunks=true: one hit per passage.
        """
        return await _call(search_tool, query, collection, collections, top_k, mode, source_type, date_from,
                           date_to, author, participants, tags, path_prefix, metadata, days, chunks)

    @mcp.tool(annotations=READ_ONLY)
    async def rag_list_collections() -> dict:
        """The indexed collections: name, kind, description, item and chunk counts, last indexed time."""
        rows = await _call(reads.list_collections, _ctx().store)
        return {"collections": [r.to_dict() for r in rows]} | ({} if rows else {"note": empty_index(_ctx().paths)})

    @mcp.tool(annotations=READ_ONLY)
    async def rag_collection_info(collection: str) -> dict:
        """One collection: items by source type, chunk count, failures, sample titles."""
        return await _call(reads.collection_info, _ctx().store, collection)

    @mcp.tool(annotations=READ_ONLY)
    async def rag_get_document(path_or_id: str, collection: str | None = None) -> dict:
        """The full text of one indexed item as written (a note's Markdown), by item id, key or source path.

        Read from the index, not the file; only indexed items can be read, any other path is refused.
        """
        return await _call(reads.get_document, _ctx().store, path_or_id, collection)

    @mcp.tool(annotations=READ_ONLY)
    async def rag_related(path_or_id: str, top_k: int = 10) -> dict:
        """Items similar to an item (by its chunk vectors), plus the notes it links to and that link to it."""
        def run():
            item_id, _ = reads.find_item(_ctx().store, path_or_id)
            return related_items(_ctx().store, item_id, top_k)

        return await _call(run)

    @mcp.tool(annotations=READ_ONLY)
    async def rag_search_by_tag(tag: str, query: str | None = None, top_k: int = 10) -> dict:
        """Items with a tag (nested tags included), optionally ranked by a query; without one, the newest."""
        if query:
            return await _call(search_tool, query, top_k=top_k, tags=[tag])
        return await _call(_tagged, tag, top_k)

    @mcp.tool(annotations=READ_ONLY)
    async def rag_list_recent(collection: str | None = None, days: int = 7, limit: int = 20) -> dict:
        """Items dated (or indexed) within the last `days` days, newest first."""
        return {"items": await _call(reads.recent_items, _ctx().store, collection, days, limit)}

    @mcp.tool(annotations=WRITES)
    async def rag_index(collection: str, path: str | None = None) -> dict:
        """Index a configured collection, or a folder (path) as a new project collection; returns counts.

        Writes the index and registry.yaml; a re-index removes entries of items deleted from the source.
        A new folder must be under the user's home (or an allowed root), not hidden or a system folder; an
        existing collection is never re-pointed to another folder. Runs the same Dagster pipelines as `local-rag index`.
        """
        return await _call(_index, collection, path)

    @mcp.tool(annotations=READ_ONLY)
    async def rag_knowledge_stats() -> dict:
        """Per source (mail, chat, calendar, notes...): items, chunks, date range, last indexed, failures."""
        return {"sources": await _call(reads.knowledge_stats, _ctx().store)}

    @mcp.tool(annotations=READ_ONLY)
    async def rag_status() -> dict:
        """Overall index statistics, the index's embedder, last index time and recent failures."""
        return await _call(reads.status, _ctx().store)

    compact_tools(mcp)  # one-line descriptions of every parameter, schemas without generator noise
    _resources(mcp)
    return mcp


def _tagged(tag: str, top_k: int) -> dict:
    ctx = _ctx()
    with ctx.store.lock:
        where = build_where(Filters(tags=(tag,)))
        rows = ctx.store.conn.execute(
            "SELECT c.item_id, max(c.ts) AS t FROM chunks c JOIN items i ON i.id = c.item_id "
            f"WHERE {where.sql} GROUP BY c.item_id ORDER BY t DESC LIMIT ?", (*where.params, top_k)).fetchall()
        if not rows and not reads.list_collections(ctx.store):
            raise RagError(empty_index(ctx.paths))
        items = [reads.get_document(ctx.store, str(r[0])) for r in rows]
    return {"tag": tag, "items": [{k: v for k, v in d.items() if k != "text"} | {"excerpt": d["text"][:400]}
                                  for d in items]}


def _index(collection: str, path: str | None) -> dict:
    from rag_pipelines.indexing.runs import index_collections  # lazily: only this tool needs Dagster

    ctx = _ctx()
    name = _index_target(ctx, collection, path) if path else collection
    [summary] = index_collections(ctx.paths, [name], trigger="mcp")
    o = summary.outcomes
    return {"collection": name, "indexed": o.get("indexed", 0), "updated": o.get("indexed", 0),
            "skipped": summary.unchanged, "failed": o.get("failed", 0), "deleted": o.get("deleted", 0),
            "runs": summary.run_ids, "failures": summary.failures}


def _index_target(ctx: RagContext, collection: str, path: str) -> str:
    """The collection to index for (name, path): an existing one at that path, or a new one registered now."""
    from rag_pipelines.config import load_collections, register_collection, validate_collection

    from rag_search.roots import check_new_root

    name = _valid_name(collection)
    settings = load_settings(ctx.paths.config)  # fresh: allowed roots added since the server started count
    existing = load_collections(ctx.paths, settings.model_copy(update={"disabled_collections": []})).get(name)
    if existing is not None:
        _same_paths(ctx, existing, path, configured=name in settings.collections)
        return name
    folder = check_new_root(path, settings.mcp.allowed_roots, rag_home=ctx.paths.home, config=ctx.paths.config)
    register_collection(ctx.paths, validate_collection(
        {"name": name, "kind": "project", "sources": [{"type": "project", "paths": [str(folder)]}]}))
    return name


def _valid_name(name: str) -> str:
    """The collection name as stored (normalised); an invalid one is a one-line error."""
    from pydantic import ValidationError

    from rag_pipelines.config import CollectionConfig

    try:
        return CollectionConfig.model_validate({"name": name, "sources": [{"type": "project", "paths": ["."]}]}).name
    except ValidationError as exc:
        about_name = [e for e in exc.errors() if e["loc"][:1] == ("name",)]
        msg = str((about_name or exc.errors())[0]["msg"]).removeprefix("Value error, ")
        what = "cannot be a collection name" if about_name else "cannot be indexed"
        raise RagError(f"{name!r} {what}: {msg}. Call rag_index again with another name.") from exc


def _same_paths(ctx: RagContext, existing, path: str, configured: bool) -> None:
    """Refuse to re-point an existing collection: rag_index(name, path) only re-indexes it at its own path."""
    from rag_pipelines.config import source_paths

    current = source_paths(existing)
    folder = Path(path).expanduser().resolve()
    if folder in {Path(p).expanduser().resolve() for p in current}:
        return
    how = (f"the user can edit it in {ctx.paths.config}" if configured else
           f"the user can run `local-rag index project {_quote(existing.name)} {_quote(str(folder))} --replace` "
           "in a terminal (items not found there leave the index)")
    raise RagError(f"Collection '{existing.name}' already indexes {', '.join(current) or 'other sources'}; rag_index "
                   f"does not point it at {folder}. Call rag_index('{existing.name}') without a path to re-index it, "
                   f"pick a new collection name for that folder, or, to re-point it deliberately, {how}.")


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def _resources(mcp: MCPServer) -> None:
    def as_json(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, indent=1, default=str)

    @mcp.resource("rag://stats", mime_type="application/json", description="Collections, counts, size, embedder.")
    def stats() -> str:
        return as_json(reads.status(_ctx().store))

    @mcp.resource("ingestion://status", mime_type="application/json", description="Totals and last index run.")
    def ingestion_status() -> str:
        st = reads.status(_ctx().store)
        return as_json({"totals": st["totals"], "last_indexed": st["last_indexed"], "embedder": st["embedder"],
                        "collections": {c["name"]: {"items": c["items"], "failed": c["failed"],
                                                    "last_indexed": c["last_indexed"]} for c in st["collections"]}})

    @mcp.resource("ingestion://stats", mime_type="application/json",
                  description="Per source: items matched, indexed, failed, chunks, last scan and why a source was skipped.")
    def ingestion_stats() -> str:
        return as_json({"sources": reads.source_scans(_ctx().store)})

    @mcp.resource("knowledge://stats", mime_type="application/json",
                  description="Per source: items, chunks, date range of the items, last indexed, failures.")
    def knowledge_stats() -> str:
        return as_json({"sources": reads.knowledge_stats(_ctx().store)})

    @mcp.resource("ingestion://watch-stats", mime_type="application/json",
                  description="The `local-rag watch` process: running or not, events seen, debounce, last event and sync.")
    def ingestion_watch_stats() -> str:
        return as_json(watch_stats(_ctx().paths))

    @mcp.resource("ingestion://failures", mime_type="application/json", description="Items that failed to index.")
    def ingestion_failures() -> str:
        return as_json([f.to_dict() for f in reads.failures(_ctx().store, limit=100)])

    @mcp.resource("ingestion://metadata", mime_type="application/json",
                  description="Per collection, its common metadata keys and most frequent values (rag_search filters).")
    def ingestion_metadata() -> str:
        return as_json(metadata_by_collection(_ctx().store))


# -- transports --------------------------------------------------------------------------------

def serve_stdio() -> None:
    build_server().run("stdio")


def http_app(host: str = "127.0.0.1", port: int = 8765, token: str | None = None,
             allow_hosts: tuple[str, ...] | list[str] = (), allow_origins: tuple[str, ...] | list[str] = ()):
    """The streamable-HTTP ASGI app: Host and Origin checked (DNS rebinding, browsers), optional bearer token."""
    return mcp_http.secure_app(build_server(), mcp_http.Allowed.for_server(host, port, allow_hosts, allow_origins),
                               token)


def serve_http(host: str, port: int, token: str | None, allow_hosts: tuple[str, ...] | list[str] = (),
               allow_origins: tuple[str, ...] | list[str] = ()) -> None:
    mcp_http.check_exposure(host, token)
    mcp_http.run(http_app(host, port, token, allow_hosts, allow_origins), host, port)


def watch_stats(paths: Paths) -> dict[str, Any]:
    """What `local-rag watch` last wrote beside the index, and whether that process still runs."""
    import os

    from rag_search.config import WATCH_STATS

    file = paths.home / WATCH_STATS
    if not file.exists():
        return {"running": False, "note": "No watcher has run on this home. Start one with `local-rag watch`."}
    data = json.loads(file.read_text(encoding="utf-8"))
    try:
        os.kill(int(data.get("pid", 0)), 0)
        alive = not data.get("stopped")
    except (OSError, ValueError):
        alive = False
    return {"running": alive, **data}
