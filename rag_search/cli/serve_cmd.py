"""`local-rag serve`: the MCP server over stdio (Claude Desktop / Claude Code) or streamable HTTP."""

from __future__ import annotations

import os

import click

from rag_search.cli.context import App, pass_app


@click.command("serve")
@click.option("--port", type=int, help="Serve streamable HTTP on this port instead of stdio.")
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP bind address.")
@click.option("--token", default=lambda: os.environ.get("LOCAL_RAG_MCP_TOKEN"),
              help="Bearer token HTTP clients must send (env LOCAL_RAG_MCP_TOKEN); required off loopback.")
@pass_app
def serve(app: App, port: int | None, host: str, token: str | None):
    """Run the MCP server: stdio by default (what Claude launches), or HTTP with --port."""
    from rag_search import mcp_server

    mcp_server.open_context(app.paths)
    if port is None:
        mcp_server.serve_stdio()
    else:
        click.echo(f"MCP over streamable HTTP on http://{host}:{port}/mcp", err=True)
        mcp_server.serve_http(host, port, token)
