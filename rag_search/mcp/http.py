"""The MCP server's HTTP transport: which Host and Origin headers it answers to, keys, uvicorn (with TLS).

Browsers may only talk to it from its own origins (http://127.0.0.1:PORT, http://localhost:PORT, ...) or
configured ones; requests without an Origin (non-browser clients) are fine. `Origin: null` (sandboxed and file:
pages, and a browser told not to send referrers) is never trusted as such: a search page request carrying it
passes only when the browser also says it comes from this same origin (`Sec-Fetch-Site: same-origin`, which no
page can forge). The Host header must name this machine, which blocks DNS rebinding. A refusal says which Host or
Origin was refused and what to do: as an HTML page to a person's browser, as JSON to an MCP client.
Keys (access/http_keys.py) say which user a request runs as; a refused one is answered as a plain bearer-token server.
"""

from __future__ import annotations

import ipaddress
import json
import re
import socket
from dataclasses import dataclass

from rag_search.errors import ConfigError, RagError, quote

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
WILDCARDS = ("0.0.0.0", "::", "[::]", "")


@dataclass(frozen=True)
class Allowed:
    """Host names (without port) and exact Origins the server accepts."""

    hosts: frozenset[str]
    origins: frozenset[str]

    @classmethod
    def for_server(cls, host: str, port: int, extra_hosts=(), extra_origins=(), tls: bool = False) -> Allowed:
        own = {_bracket(n) for n in (*LOOPBACK_NAMES, *machine_names(host))}
        hosts = own | {_bracket(h) for h in extra_hosts}
        scheme, default = ("https", 443) if tls else ("http", 80)
        origins = {f"{scheme}://{n}:{port}" for n in own} | ({f"{scheme}://{n}" for n in own} if port == default else set())
        extra = {_origin(o) for o in extra_origins}
        if "null" in extra:
            raise ConfigError("Origin 'null' cannot be trusted: every sandboxed or file: page of any site sends it. "
                              "Remove it from --allow-origin / mcp.allowed_origins; the search page works without it.")
        return cls(frozenset(hosts), frozenset(origins | extra))

    def host_ok(self, host_header: str) -> bool:
        name = host_name(host_header)
        return name is not None and name in self.hosts

    def origin_ok(self, origin: str | None, same_origin_fetch: bool = False) -> bool:
        """No Origin (not a browser), a trusted one, or `null` from a page request the browser marks same-origin."""
        if origin and _origin(origin) == "null":
            return same_origin_fetch
        return not origin or _origin(origin) in self.origins


def machine_names(bind: str) -> set[str]:
    """The names a LAN client may use: the bind address, or for 0.0.0.0/:: this machine's names and addresses."""
    if bind.strip().lower() not in WILDCARDS:
        return {bind}
    names: set[str] = set()
    try:
        names |= {socket.gethostname(), socket.getfqdn()}
        for name in list(names):
            names |= {info[4][0] for info in socket.getaddrinfo(name, None) if "%" not in str(info[4][0])}
    except OSError:
        pass  # no resolvable hostname: --allow-host still works
    return {n for n in names if n}


# A Host header is a host (a name, an IPv4 address or a bracketed IPv6 address) and an optional port, nothing
# else: 'localhost:8765@evil.com' or 'localhost:8765/x' is not a host this server answers to.
_HOST = re.compile(r"(\[[0-9a-f:.]+\]|[a-z0-9_](?:[a-z0-9_.-]*[a-z0-9_])?)(?::([0-9]{1,5}))?")


def host_name(host_header: str) -> str | None:
    """'Name:8765' → 'name', '[::1]:8765' → '[::1]'; None when the header is not `host[:port]`."""
    m = _HOST.fullmatch(host_header.strip().lower())
    if m is None or (m.group(2) is not None and int(m.group(2)) > 65535):
        return None
    return m.group(1)


def _bracket(name: str) -> str:
    """Lower-case; IPv6 addresses in brackets, as they appear in Host and Origin headers."""
    n = name.strip().lower()
    try:
        return f"[{n}]" if isinstance(ipaddress.ip_address(n), ipaddress.IPv6Address) else n
    except ValueError:
        return n


def _origin(origin: str) -> str:
    return origin.strip().lower().rstrip("/")


class HostOriginGuard:
    """ASGI middleware: 421 for a Host that is not this server's, 403 for an untrusted browser Origin."""

    def __init__(self, app, allowed: Allowed):
        self.app, self.allowed = app, allowed

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            from rag_search.web import refusal

            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers") or []}
            host, origin = headers.get("host", ""), headers.get("origin")
            person = refusal.wants_html(scope)
            if not self.allowed.host_ok(host):
                if person:
                    return await refusal.send(send, 421, "Wrong address", _host_refusal(host), link=None)
                return await _json(send, 421, _host_refusal(host))
            same_origin = person and headers.get("sec-fetch-site") == "same-origin"
            if not self.allowed.origin_ok(origin, same_origin):
                if person:
                    return await refusal.send(send, 403, "Refused", _page_origin_refusal(origin))
                return await _json(send, 403, _origin_refusal(origin))
            scope = {**scope, "headers": _normalised(scope["headers"])}  # as the SDK's own check expects them
        await self.app(scope, receive, send)


def _origin_refusal(origin: str) -> str:
    if _origin(origin) == "null":
        return ("Origin 'null' is not trusted: browsers send it from sandboxed and file: pages of any site. Call "
                "this server from one of its own pages, or from a client that sends no Origin (MCP clients do not).")
    return (f"Origin '{origin}' is not trusted: browsers may only call this server from its own pages. To trust it, "
            f"restart with `local-rag serve --allow-origin {origin} ...` or add it to mcp.allowed_origins in the "
            "config file.")


def _page_origin_refusal(origin: str) -> str:
    if _origin(origin) == "null":
        return ("Your browser sent this form without saying which site it came from (Origin: null), so it was refused: "
                "a page of another site could send the same. Open this server's page again and retry. If it keeps "
                "happening, a privacy extension or setting that hides where requests come from is the cause: allow "
                "this site in it, or use a browser profile without it.")
    return (f"This request came from another site ({origin[:100]}), so it was refused: a page elsewhere may not act "
            "on your behalf here. Sign in and search from this server's own page.")


def _host_refusal(host: str) -> str:
    name = host_name(host)
    if name is None:
        return (f"Host {quote(host)} is not a valid Host header: it must be a host name or address with an "
                "optional :port, nothing else. Send the name this server was reached by, e.g. localhost:8765.")
    return (f"Host {quote(host)} is not a name this server answers to (protection against DNS rebinding). If "
            f"clients reach it as {name}, restart it with `local-rag serve --allow-host {name} ...` or add {name} "
            "to mcp.allowed_hosts in the config file.")


def _normalised(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    return [(k, v.lower().rstrip(b"/") if k.lower() in (b"host", b"origin") else v) for k, v in headers]


async def _json(send, status: int, error: str, headers: list | None = None) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), *(headers or [])]})
    await send({"type": "http.response.body", "body": json.dumps({"error": error}).encode()})


def secure_app(server, allowed: Allowed, keys=None, web=None, proxies=()):
    """The server's streamable-HTTP app behind the Host/Origin guard and, with keys (http_keys.KeyAuth), a key
    check that runs each request as its user; with `web`, the search page (rag_search.web, which checks keys
    itself) at every path but /mcp, behind the same guard; with `proxies` (access/proxies.networks), the client
    address and scheme those proxies forward."""
    from mcp.server.transport_security import TransportSecuritySettings

    security = TransportSecuritySettings(  # the SDK checks the same lists again
        enable_dns_rebinding_protection=True,
        allowed_hosts=sorted(allowed.hosts) + [f"{h}:*" for h in sorted(allowed.hosts)],
        allowed_origins=sorted(allowed.origins),
    )
    app = SessionOwner(server.streamable_http_app(transport_security=security))
    app = keys(app) if keys else app
    if web is not None:
        from rag_search.web.mount import BesideMcp

        app = BesideMcp(app, web)
    app = HostOriginGuard(app, allowed)
    if proxies:
        from rag_search.access.proxies import TrustedProxies

        app = TrustedProxies(app, proxies)
    return app


class SessionOwner:
    """ASGI middleware: the request's user (http_keys.KeyAuth put it in the scope) as the MCP SDK's authenticated
    principal; the SDK's session manager answers a session only to the principal that opened it ("Session not
    found" to any other, as for an id it never made)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        from rag_search.access.http_keys import USER_SCOPE

        user = scope.get(USER_SCOPE)
        if user is not None:
            from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
            from mcp.server.auth.provider import AccessToken

            token = AccessToken(token="(the key is not kept)", client_id=f"local-rag:{user.id}", scopes=[])
            scope = {**scope, "user": AuthenticatedUser(token)}
        await self.app(scope, receive, send)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, keys: bool) -> None:
    """Off loopback, keys are required."""
    if not is_loopback(host) and not keys:
        raise RagError(f"Serving on {host} exposes your index to the network: give each person a key first "
                       "(`local-rag users add NAME --collections ...`), or pass --token (or LOCAL_RAG_MCP_TOKEN), "
                       "or bind to 127.0.0.1.")


def run(app, host: str, port: int, tls: tuple[str, str] | None = None) -> None:
    """uvicorn on host:port; with tls = (certificate file, key file), HTTPS only. No access log (keys travel in
    headers, queries in bodies; neither is ever logged)."""
    import uvicorn

    cert, key = tls or (None, None)
    # proxy_headers off: X-Forwarded-For is believed only from the proxies the owner names (access/proxies.py)
    # timeout_graceful_shutdown: on Ctrl-C or SIGTERM, connections still busy get 5 s, then the server stops (without it
    # the household tests' server took 30 s to stop after their wrong-key rounds)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False, ssl_certfile=cert, ssl_keyfile=key,
                proxy_headers=False, timeout_graceful_shutdown=5)
