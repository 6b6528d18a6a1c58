"""`local-rag serve`: the MCP server over stdio (Claude Desktop / Claude Code) or streamable HTTP (with the search
page at /)."""

from __future__ import annotations

import os
import signal
import sys

import click

from rag_search.cli.context import App, pass_app


@click.command("serve")
@click.option("--port", type=int, help="Serve streamable HTTP on this port instead of stdio.")
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP bind address.")
@click.option("--token", default=lambda: os.environ.get("LOCAL_RAG_MCP_TOKEN"),
              help="Bearer token HTTP clients must send (env LOCAL_RAG_MCP_TOKEN); required off loopback.")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="NAME",
              help="Also answer to this Host name (e.g. a LAN name); repeatable; adds to mcp.allowed_hosts.")
@click.option("--allow-origin", "allow_origins", multiple=True, metavar="ORIGIN",
              help="Also trust this browser Origin (e.g. http://localhost:5173); repeatable; adds to "
                   "mcp.allowed_origins.")
@pass_app
def serve(app: App, port: int | None, host: str, token: str | None, allow_hosts: tuple[str, ...],
          allow_origins: tuple[str, ...]):
    """Run the MCP server: stdio by default (what Claude launches), or HTTP with --port (and the search page at /)."""
    from rag_search import mcp_server
    from rag_search.cli.search_socket import SearchSocket

    ctx = mcp_server.open_context(app.paths)
    app.__dict__.update(settings=ctx.settings, store=ctx.store, embedder=ctx.embedder)
    searches = SearchSocket(app, lambda: ctx.refresh(max_age=0))  # `local-rag search` on this home answers from here
    searches.start()
    # SIGTERM (a client closing the server, uvicorn re-raising it after its graceful stop) ends through `finally`
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        if port is None:
            mcp_server.serve_stdio()
            return
        hosts = [*app.settings.mcp.allowed_hosts, *allow_hosts]
        origins = [*app.settings.mcp.allowed_origins, *allow_origins]
        from rag_search.web.mount import page_for

        click.echo(f"MCP over streamable HTTP on http://{host}:{port}/mcp; search page on http://{host}:{port}/",
                   err=True)
        mcp_server.serve_http(host, port, token, hosts, origins, web=page_for(ctx, token))
    finally:
        searches.stop()
        mcp_server.close_context()
