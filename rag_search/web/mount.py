"""The page beside the MCP server in one ASGI app: /mcp (and its lifespan) to MCP, every other path to the page."""

from __future__ import annotations

MCP_PATH = "/mcp"


class BesideMcp:
    """ASGI: requests under /mcp and the lifespan go to the MCP app, the rest to the web app. The server's own
    checks (Host, Origin: mcp/http.HostOriginGuard) wrap this whole app, so they guard both."""

    def __init__(self, mcp, web):
        self.mcp, self.web = mcp, web

    async def __call__(self, scope, receive, send):
        path = scope.get("path", "")
        if scope["type"] == "lifespan" or path == MCP_PATH or path.startswith(MCP_PATH + "/"):
            return await self.mcp(scope, receive, send)
        return await self.web(scope, receive, send)


def page_for(context, access, paths, record=None):
    """The page of a `local-rag serve` process (its RagContext) behind the server's keys (http_keys.Access), its
    searches recorded by `record` (the MCP server's query log: mcp/server.record_query)."""
    from rag_search.web import Backend, web_app
    from rag_search.web.key_gate import KeyGate

    return web_app(Backend.of(context), KeyGate(access, paths), record=record)
