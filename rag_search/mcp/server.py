"""The MCP server: search tools and ingestion resources (with mcp/http.py, the only modules importing the `mcp` SDK).

One warm process: rag.db and the embedder are opened once and shared by every session. Tools are
thin: parse arguments → one library call → JSON. Errors come back as tool errors that say what to do.
Arguments carry their bounds (args.py); the read tools' answers are built in reads.py, rag_index's runs in
index.py, and both leave out what guard.py refuses (a folder an assistant added that now leads elsewhere).
Over HTTP with keys each request runs as its user (http.py sets access/users.current()), so the same functions show
that user's collections only; each call can be recorded in the query log (access/query_log.py).
The handshake does not wait for the model: it loads in the background and the first search waits for it.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, Literal

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import ValidationError

from rag_search import __version__
from rag_search.access import http_keys, users
from rag_search.access.query_log import QueryLog
from rag_search.config import LiveSettings, Paths, Settings
from rag_search.embedders import Embedder, load_embedder
from rag_search.embedders.warming import Warming
from rag_search.errors import EmbedderMismatch, RagError
from rag_search.mcp import guard as mcp_guard
from rag_search.mcp import http as mcp_http
from rag_search.mcp import index as mcp_index
from rag_search.mcp import reads as mcp_reads
from rag_search.mcp import search as mcp_search
from rag_search.mcp.args import (ChunkIndex, DateText, Days, Intent, Metadata, MinScore, PathText, Query, Queries,
                                 Searches, Span, Text, Texts, TopK, refusal)
from rag_search.mcp.context import RagContext
from rag_search.mcp.reads import compact_json
from rag_search.mcp.schema import compact_tools
from rag_search.people import PeopleDirectory
from rag_search.retrieval import search_engine
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


_context: RagContext | None = None
_queries: QueryLog | None = None  # the query log this process writes to when server.query_log says so
_queries_default = False  # server.query_log unset: on (the HTTP server) or off (stdio)


def open_context(paths: Paths | None = None) -> RagContext:
    """Open the store and the embedder once per process (sessions share them); the model loads in the background."""
    global _context
    if _context is None:
        paths = paths or Paths.from_env()
        live = LiveSettings(paths.config)
        settings = live.settings
        store = open_store(settings.store_location(paths))
        embedder: Embedder = load_embedder(settings.embedder, paths)
        recorded = store.embedder
        if recorded and same_vectors(recorded[0], embedder.id) and recorded[1] == embedder.dimensions:
            embedder = Warming(embedder)  # load the model now, not on the first question, without holding the handshake
        _context = RagContext(paths, settings, store, embedder,
                              search_engine(store, embedder, settings.search, bits_in_ram=True),
                              PeopleDirectory.from_settings(settings), live)
    return _context


def log_queries(log: QueryLog | None, on_by_default: bool = True) -> None:
    """Record tool calls (and the page's searches) in `log` while server.query_log, followed as the config file
    changes, says so (unset: `on_by_default`); None: never."""
    global _queries, _queries_default
    _queries, _queries_default = log, on_by_default


def active_log() -> QueryLog | None:
    """The query log if it is on now (the config file, re-read while the server runs, may turn it off or on)."""
    if _queries is None:
        return None
    wanted = _context.settings.server.query_log if _context is not None else None
    return _queries if (_queries_default if wanted is None else wanted) else None


def record_query(user: str, tool: str, arguments: dict, answer: Any, started: float, error: str | None = None) -> None:
    """One line in the query log, if it is on; a full disk never costs the caller its answer."""
    log = active_log()
    if log is None:
        return
    try:
        log.record(user, tool, arguments, answer, started, error)
    except Exception:  # noqa: BLE001
        logging.getLogger(__name__).exception("could not write the query log %s", log.file)


def close_context() -> None:
    """Close rag.db (the server is stopping): the last connection to close folds the WAL in and removes it."""
    global _context
    if _context is not None:
        if isinstance(_context.embedder, Warming):
            _context.embedder.finish_loading()
        _context.store.close()
        _context = None
    resources = sys.modules.get("rag_pipelines.wiring.resources")  # opened by rag_index, if it ran
    if resources is not None:
        resources.close_all()


def quiet_libraries() -> None:
    """Libraries' INFO lines stay off the server's stderr (over stdio, the client's log): rag_index runs Dagster,
    whose SQLite storage stamps each new run's database with alembic, logging at INFO."""
    logging.getLogger("alembic").setLevel(logging.WARNING)


def _ctx() -> RagContext:
    return open_context().refresh()


def status(ctx: RagContext) -> dict[str, Any]:
    """rag_status: the index's figures and the config file in use (and why an edit of it is not)."""
    return {**mcp_reads.status(ctx), "config": config_state(ctx)}


BROKEN_CONFIG = ("The server's configuration file has an error, so the server runs on its last good settings; its "
                 "owner sees the details (`local-rag status`, the server's log).")


def config_state(ctx: RagContext) -> dict[str, Any]:
    """The config file in use for the owner (where it is, when it was read, why an edit is not in use); for a
    person with a key only whether the server runs on its last good settings (the file names other users)."""
    state = ctx.config_state()
    if users.visible(ctx.paths) is None:
        return state
    return {"loaded": state.get("loaded")} | ({"note": BROKEN_CONFIG} if state.get("error") else {})


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
        before the SDK formats pydantic's report (which reprs the value: ~5 ms for a 1 MB query), the JSON
        in the text content compact (the SDK pretty-prints it), and the call recorded in the query log."""
        tool = self._tool_manager.get_tool(name)
        if tool is not None:
            try:
                tool.fn_metadata.validate_arguments(arguments)
            except ValidationError as exc:
                raise ToolError(refusal(name, exc, arguments)) from exc
        started = time.perf_counter()
        try:
            result = compact_result(await super().call_tool(name, arguments, context))
        except Exception as exc:
            _log_query(name, arguments, None, started, str(exc))
            raise
        _log_query(name, arguments, result, started)
        return result

    async def list_tools(self):
        tool = self._tool_manager.get_tool("rag_search")
        if tool is not None and _context is not None:
            tool.parameters["properties"]["metadata"] = mcp_reads.metadata_filter_schema(_context)
        return await super().list_tools()


def _log_query(tool: str, arguments: dict, result: Any, started: float, error: str | None = None) -> None:
    if active_log() is None:
        return
    answer, failed = None, error
    content = getattr(result, "content", None)
    if content and content[0].type == "text":
        if getattr(result, "is_error", False):
            failed = content[0].text
        else:
            try:
                answer = json.loads(content[0].text)
            except ValueError:
                pass
    record_query(users.current().name, tool, arguments, answer, started, failed)


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
    mcp = RagServer(name="local-rag", version=__version__, instructions=INSTRUCTIONS, lifespan=_lifespan,
                    log_level="WARNING")
    quiet_libraries()

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
        deleted since indexing says stale (stale: unchecked when this server cannot see its source).

        Better recall: give searches (with or instead of query): your rephrasings, synonyms, translations into the
        notes' language, e.g. [{type: keyword, query: "kube-proxy rollback"}, {type: semantic, query: "..."}].
        """
        return await _call(mcp_reads.search_tool, _ctx(), query, collection, collections, top_k, mode, source_type,
                           date_from, date_to, author, participants, tags, path_prefix, metadata, days, chunks,
                           searches, intent, min_score)

    @mcp.tool(annotations=READ_ONLY)
    async def rag_list_collections() -> dict:
        """The indexed collections: name, kind, description, item and chunk counts, last indexed time."""
        return await _call(mcp_reads.list_collections, _ctx())

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
        return {"sources": await _call(mcp_reads.knowledge_stats, _ctx())}

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
        return await _call(mcp_reads.context_tool, _ctx(), path_or_id, chunk_index, before, after)

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
        st = mcp_reads.status(_ctx())
        return as_json({"totals": st["totals"], "last_indexed": st["last_indexed"], "embedder": st["embedder"],
                        "collections": {c["name"]: {"items": c["items"], "failed": c["failed"],
                                                    "last_indexed": c["last_indexed"]} for c in st["collections"]},
                        "config": config_state(_ctx())})

    @mcp.resource("ingestion://stats", mime_type="application/json",
                  description="Per source: items matched, indexed, failed, chunks, last scan and why a source was skipped.")
    def ingestion_stats() -> str:
        return as_json({"sources": mcp_reads.source_scans(_ctx())})

    @mcp.resource("knowledge://stats", mime_type="application/json",
                  description="Per source: items, chunks, date range of the items, last indexed, failures.")
    def knowledge_stats() -> str:
        return as_json({"sources": mcp_reads.knowledge_stats(_ctx())})

    @mcp.resource("ingestion://watch-stats", mime_type="application/json",
                  description="The `local-rag watch` process: running or not, events seen, debounce, last event and sync.")
    def ingestion_watch_stats() -> str:
        if users.visible(_ctx().paths) is not None:  # its events name files of every collection
            return as_json({"running": watch_stats(_ctx().paths)["running"]})
        return as_json(watch_stats(_ctx().paths))

    @mcp.resource("ingestion://failures", mime_type="application/json", description="Items that failed to index.")
    def ingestion_failures() -> str:
        return as_json(mcp_reads.failures(_ctx()))

    @mcp.resource("ingestion://metadata", mime_type="application/json",
                  description="Per collection, its common metadata keys and most frequent values (rag_search filters).")
    def ingestion_metadata() -> str:
        return as_json(mcp_reads.metadata_by_collection(_ctx()))


# -- transports --------------------------------------------------------------------------------

def serve_stdio() -> None:
    build_server().run("stdio")


def http_app(host: str = "127.0.0.1", port: int = 8765, token: str | None = None,
             allow_hosts: tuple[str, ...] | list[str] = (), allow_origins: tuple[str, ...] | list[str] = (),
             tls: bool = False, paths: Paths | None = None, web=None, access: http_keys.Access | None = None,
             proxies: tuple[str, ...] | list[str] = ()):
    """The streamable-HTTP ASGI app: Host and Origin checked (DNS rebinding, browsers), each request run as the
    user of its key (http_keys; open to the owner only on loopback while no key is configured). `web`: the search
    page's app (mount.page_for, given the same `access`), served at every path but /mcp. `proxies`: reverse
    proxies whose forwarded client addresses are believed (access/proxies.py)."""
    from rag_search.access.proxies import networks

    paths = paths or (_context.paths if _context is not None else Paths.from_env())
    access = access or http_keys.Access(paths, token, mcp_http.is_loopback(host))
    allowed = mcp_http.Allowed.for_server(host, port, allow_hosts, allow_origins, tls)
    return mcp_http.secure_app(build_server(), allowed, partial(http_keys.KeyAuth, access=access), web,
                               networks(proxies))


def serve_http(host: str, port: int, token: str | None, allow_hosts: tuple[str, ...] | list[str] = (),
               allow_origins: tuple[str, ...] | list[str] = (), tls: tuple[str, str] | None = None,
               paths: Paths | None = None, page: bool = True, proxies: tuple[str, ...] | list[str] = ()) -> None:
    """Serve MCP at /mcp and (with `page`) the search page at /, both behind the same keys."""
    paths = paths or (_context.paths if _context is not None else Paths.from_env())
    mcp_http.check_exposure(host, http_keys.has_keys(paths, token))
    access = http_keys.Access(paths, token, mcp_http.is_loopback(host))
    web = None
    if page:
        from rag_search.web.mount import page_for

        web = page_for(open_context(paths), access, paths, record_query)
    app = http_app(host, port, token, allow_hosts, allow_origins, tls is not None, paths, web, access, proxies)
    mcp_http.run(app, host, port, tls)


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
