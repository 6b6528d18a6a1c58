"""The MCP server: search tools and ingestion resources (with mcp_http, the only modules importing the `mcp` SDK).

One warm process: rag.db and the embedder are opened once and shared by every session. Tools are
thin: parse arguments → one library call → JSON. Errors come back as tool errors that say what to do.
Arguments carry their bounds (mcp_args); the read tools' answers are built in mcp_reads, rag_index's runs in
mcp_index, and both leave out what mcp_guard refuses (a folder an assistant added that now leads elsewhere).
"""

from __future__ import annotations

import json
import sys
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import ValidationError

from rag_search import mcp_guard, mcp_http, mcp_index, mcp_reads, mcp_search
from rag_search.config import LiveSettings, Paths, Settings
from rag_search.embedders import Embedder, load_embedder
from rag_search.errors import EmbedderMismatch, RagError
from rag_search.mcp_args import (ChunkIndex, DateText, Days, Intent, Metadata, MinScore, PathText, Query, Queries,
                                 Searches, Span, Text, Texts, TopK, refusal)
from rag_search.mcp_metadata import metadata_by_collection
from rag_search.mcp_reads import compact_json, empty_index
from rag_search.mcp_schema import compact_tools
from rag_search.people import PeopleDirectory
from rag_search.retrieval import SearchEngine
from rag_search.retrieval.engine import search_engine
from rag_search.retrieval.rerank import load_reranker
from rag_search.store import Store, open_store, reads
from rag_search.store.vectors import same_vectors

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
# rag_index writes registry.yaml and the index, and a re-index drops entries of items gone from the source.
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)
INSTRUCTIONS = (
    "local-rag searches the user's own notes, documents and files, indexed on this machine. Start with "
    "rag_search (hybrid keyword + semantic; give searches to run your own keyword and semantic rephrasings at "
    "once); filter by collection, dates, tags, author or metadata; read around a hit with rag_context, a whole "
    "item with rag_get_document; explore with rag_related; several separate questions: rag_batch_search. "
    "rag_list_collections shows what is indexed."
)


@dataclass
class RagContext:
    paths: Paths
    settings: Settings
    store: Store
    embedder: Embedder
    engine: SearchEngine
    people: PeopleDirectory | None = None
    live: LiveSettings | None = None  # the config file, followed while the server runs

    def refresh(self, max_age: float | None = None) -> RagContext:
        """Take in an edited config file (looked at once a second, or when older than `max_age`): search
        settings, reranker, embedder and people apply to the next call; a broken edit changes nothing."""
        if self.live is not None and self.live.check(max_age):
            try:
                self._apply(self.live.settings)
            except RagError as exc:  # e.g. a people file that cannot be read
                self.live.error = f"{exc} (the settings loaded before stay in use)"
        return self

    def _apply(self, new: Settings) -> None:
        people = PeopleDirectory.from_settings(new)
        if new.embedder != self.settings.embedder:
            self.embedder = self.engine.embedder = load_embedder(new.embedder, self.paths)
        if new.search != self.settings.search:
            self.engine.settings, self.engine.reranker = new.search, load_reranker(new.search)
        self.settings, self.people = new, people

    def config_state(self) -> dict[str, Any]:
        return self.live.state() if self.live is not None else {"file": str(self.paths.config)}


_context: RagContext | None = None


def open_context(paths: Paths | None = None) -> RagContext:
    """Open the store and the embedder once per process (sessions share them)."""
    global _context
    if _context is None:
        paths = paths or Paths.from_env()
        live = LiveSettings(paths.config)
        settings = live.settings
        store = open_store(settings.store_location(paths))
        embedder = load_embedder(settings.embedder, paths)
        _context = RagContext(paths, settings, store, embedder, search_engine(store, embedder, settings.search, bits_in_ram=True),
                              PeopleDirectory.from_settings(settings), live)
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
    return open_context().refresh()


def status(ctx: RagContext) -> dict[str, Any]:
    """rag_status: the index's figures and the config file in use (and why an edit of it is not)."""
    return {**mcp_reads.status(ctx), "config": ctx.config_state()}


def _fail(exc: RagError) -> ToolError:
    msg = str(exc)
    if isinstance(exc, EmbedderMismatch):
        msg += " (Ask the user to run that command in a terminal.)"
    return ToolError(msg)


async def _call(fn, *args, **kwargs):
    """Run blocking library code off the event loop; our errors become tool errors."""
    try:
        return await anyio.to_thread.run_sync(partial(fn, *args, **kwargs))
    except RagError as exc:
        raise _fail(exc) from exc


class RagServer(MCPServer):
    """MCPServer whose rag_search schema lists the metadata keys and values currently in the index."""

    async def call_tool(self, name, arguments, context=None):
        """As MCPServer's, with arguments that do not fit the tool's schema refused in one sentence (mcp_args)
        before the SDK formats pydantic's report (which reprs the value: ~5 ms for a 1 MB query), and the JSON
        in the text content compact (the SDK pretty-prints it)."""
        tool = self._tool_manager.get_tool(name)
        if tool is not None:
            try:
                tool.fn_metadata.validate_arguments(arguments)
            except ValidationError as exc:
                raise ToolError(refusal(name, exc, arguments)) from exc
        return compact_result(await super().call_tool(name, arguments, context))

    async def list_tools(self):
        tool = self._tool_manager.get_tool("rag_search")
        if tool is not None and _context is not None:
            tool.parameters["properties"]["metadata"] = mcp_reads.metadata_filter_schema(_context)
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
    # WARNING: crashes are still logged; a refused or failed call is not (the client has the message), so a client
    # sending bad calls in a loop does not make the server render a log line for each (~8 ms of CPU with rich)
    mcp = RagServer(name="local-rag", instructions=INSTRUCTIONS, lifespan=_lifespan, log_level="WARNING")

    @mcp.tool(annotations=READ_ONLY)
    async def rag_search(query: Query | None = None, collection: Text | None = None, collections: Texts | None = None,
                         top_k: TopK | None = None, mode: Literal["hybrid", "keyword", "semantic"] = "hybrid",
                         source_type: Text | Texts | None = None, date_from: DateText | None = None,
                         date_to: DateText | None = None, author: Text | None = None,
                         participants: Texts | None = None, tags: Texts | None = None,
                         path_prefix: PathText | None = None, metadata: Metadata | None = None,
                         days: Days | None = None, chunks: bool = False, searches: Searches | None = None,
                         intent: Intent | None = None, min_score: MinScore | None = None) -> dict:
        """Search the user's indexed notes and documents (all collections unless one is named).

        Dates are the items' own (sent, event start, recorded). One hit per item (its best passage; also_matches
        names its other matching sections); chunks=true: one hit per passage. A hit whose source changed or was
        deleted since indexing says stale.

        Better recall: give searches (with or instead of query): your rephrasings, synonyms, translations into the
        notes' language, e.g. [{type: keyword, query: "kube-proxy rollback"}, {type: semantic, query: "..."}].
        """
        return await _call(mcp_reads.search_tool, _ctx(), query, collection, collections, top_k, mode, source_type,
                           date_from, date_to, author, participants, tags, path_prefix, metadata, days, chunks,
                           searches, intent, min_score)

    @mcp.tool(annotations=READ_ONLY)
    async def rag_list_collections() -> dict:
        """The indexed collections: name, kind, description, item and chunk counts, last indexed time."""
        rows = await _call(reads.list_collections, _ctx().store)
        return {"collections": [r.to_dict() for r in rows]} | ({} if rows else {"note": empty_index(_ctx().paths)})

    @mcp.tool(annotations=READ_ONLY)
    async def rag_collection_info(collection: Text) -> dict:
        """One collection: items by source type, chunk count, failures, sample titles."""
        return await _call(mcp_reads.collection_info, _ctx(), collection)

    @mcp.tool(annotations=READ_ONLY)
    async def rag_get_document(path_or_id: PathText, collection: Text | None = None) -> dict:
        """The full text of one indexed item as written (a note's Markdown), by item id, key or source path.

        Read from the index, not the file; only indexed items can be read, any other path is refused.
        """
        return await _call(mcp_reads.get_document, _ctx(), path_or_id, collection)

    @mcp.tool(annotations=READ_ONLY)
    async def rag_related(path_or_id: PathText, top_k: TopK = 10) -> dict:
        """Items similar to an item (by its chunk vectors), plus the notes it links to and that link to it."""
        return await _call(mcp_reads.related, _ctx(), path_or_id, top_k)

    @mcp.tool(annotations=READ_ONLY)
    async def rag_search_by_tag(tag: Text, query: Query | None = None, top_k: TopK = 10) -> dict:
        """Items with a tag (nested tags included), optionally ranked by a query; without one, the newest."""
        if query:
            return await _call(mcp_reads.search_tool, _ctx(), query, top_k=top_k, tags=[tag])
        return await _call(mcp_reads.tagged, _ctx(), tag, top_k)

    @mcp.tool(annotations=READ_ONLY)
    async def rag_list_recent(collection: Text | None = None, days: Days = 7, limit: TopK = 20) -> dict:
        """Items dated (or indexed) within the last `days` days, newest first."""
        return {"items": await _call(mcp_reads.recent, _ctx(), collection, days, limit)}

    @mcp.tool(annotations=WRITES)
    async def rag_index(collection: Text, path: PathText | None = None) -> dict:
        """Index a configured collection, or a folder (path) as a new project collection; returns counts.

        Writes the index and registry.yaml; a re-index removes entries of items deleted from the source.
        A new folder must be under the user's home (or an allowed root), not hidden or a system folder; an
        existing collection is never re-pointed to another folder, and a folder added here that now leads
        elsewhere is not indexed. Runs the same Dagster pipelines as `local-rag index`.
        """
        return await _call(mcp_index.index, _ctx().paths, collection, path)

    @mcp.tool(annotations=READ_ONLY)
    async def rag_knowledge_stats() -> dict:
        """Per source (mail, chat, calendar, notes...): items, chunks, date range, last indexed, failures."""
        return {"sources": await _call(reads.knowledge_stats, _ctx().store)}

    @mcp.tool(annotations=READ_ONLY)
    async def rag_status() -> dict:
        """Overall index statistics, the index's embedder, last index time and recent failures."""
        return await _call(status, _ctx())

    @mcp.tool(annotations=READ_ONLY)
    async def rag_batch_search(queries: Queries, collections: Texts | None = None, top_k: TopK | None = None,
                               mode: Literal["hybrid", "keyword", "semantic"] = "hybrid",
                               min_score: MinScore | None = None) -> dict:
        """Several separate searches in one call (faster than a call each): a result per query, as rag_search's."""
        return await _call(mcp_reads.batch_search_tool, _ctx(), queries, collections=collections, top_k=top_k,
                           mode=mode, min_score=min_score)

    @mcp.tool(annotations=READ_ONLY)
    async def rag_context(path_or_id: PathText, chunk_index: ChunkIndex, before: Span = 2, after: Span = 2) -> dict:
        """The passages before and after a search hit in its item."""
        return await _call(mcp_search.context, _ctx(), path_or_id, chunk_index, before, after, None,
                           mcp_reads.OUTPUT_BUDGET_TOKENS * mcp_reads.CHARS_PER_TOKEN)

    compact_tools(mcp)  # one-line descriptions of every parameter, schemas without generator noise
    _resources(mcp)
    return mcp


def _resources(mcp: MCPServer) -> None:
    def as_json(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, indent=1, default=str)

    @mcp.resource("rag://stats", mime_type="application/json", description="Collections, counts, size, embedder.")
    def stats() -> str:
        return as_json(status(_ctx()))

    @mcp.resource("ingestion://status", mime_type="application/json", description="Totals and last index run.")
    def ingestion_status() -> str:
        st = reads.status(_ctx().store)
        return as_json({"totals": st["totals"], "last_indexed": st["last_indexed"], "embedder": st["embedder"],
                        "collections": {c["name"]: {"items": c["items"], "failed": c["failed"],
                                                    "last_indexed": c["last_indexed"]} for c in st["collections"]},
                        "config": _ctx().config_state()})

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
        return as_json(mcp_reads.failures(_ctx()))

    @mcp.resource("ingestion://metadata", mime_type="application/json",
                  description="Per collection, its common metadata keys and most frequent values (rag_search filters).")
    def ingestion_metadata() -> str:
        return as_json(metadata_by_collection(_ctx().store, tuple(mcp_guard.refusals(_ctx().paths))))


# -- transports --------------------------------------------------------------------------------

def serve_stdio() -> None:
    build_server().run("stdio")


def http_app(host: str = "127.0.0.1", port: int = 8765, token: str | None = None,
             allow_hosts: tuple[str, ...] | list[str] = (), allow_origins: tuple[str, ...] | list[str] = (), web=None):
    """The streamable-HTTP ASGI app: Host and Origin checked (DNS rebinding, browsers), optional bearer token;
    `web`: the search page's app, served at every path but /mcp."""
    return mcp_http.secure_app(build_server(), mcp_http.Allowed.for_server(host, port, allow_hosts, allow_origins),
                               token, web)


def serve_http(host: str, port: int, token: str | None, allow_hosts: tuple[str, ...] | list[str] = (),
               allow_origins: tuple[str, ...] | list[str] = (), web=None) -> None:
    mcp_http.check_exposure(host, token)
    mcp_http.run(http_app(host, port, token, allow_hosts, allow_origins, web), host, port)


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
