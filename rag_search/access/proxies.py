"""Where a request comes from when a reverse proxy stands in front: only proxies the owner names are believed.

The server's own address for a request is the connection's. uvicorn's proxy handling (which believes
X-Forwarded-For from 127.0.0.1 by default: one local process could then pose as any address, and spread its wrong
keys over made-up ones) is off. `TrustedProxies` rewrites the ASGI scope's client and scheme from X-Forwarded-For
and X-Forwarded-Proto only when the connection comes from a proxy named with `--trusted-proxy` or
server.trusted_proxies (addresses or networks such as 10.0.0.0/8). The client is then the right-most address of
X-Forwarded-For that is not itself a trusted proxy: what a client writes further left is not believed.
"""

from __future__ import annotations

import ipaddress
from typing import Iterable

from rag_search.errors import ConfigError

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def networks(entries: Iterable[str]) -> tuple[Network, ...]:
    """The proxies as networks (an address is a network of one); ConfigError naming a bad entry."""
    out = []
    for entry in entries:
        try:
            out.append(ipaddress.ip_network(entry.strip().strip("[]"), strict=False))
        except ValueError:
            raise ConfigError(f"'{entry}' is not an address or network for --trusted-proxy (server.trusted_proxies): "
                              "give the proxy's IP address as it connects to this server, e.g. 127.0.0.1 or "
                              "10.0.0.0/8.") from None
    return tuple(out)


def trusted(address: str, proxies: tuple[Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address.strip().strip("[]"))
    except ValueError:
        return False
    return any(ip in net for net in proxies)


def forwarded_client(peer: str, header: str | None, proxies: tuple[Network, ...]) -> str:
    """The client of a connection from `peer` that sent X-Forwarded-For `header`."""
    if not header or not trusted(peer, proxies):
        return peer
    for hop in reversed([h.strip() for h in header.split(",") if h.strip()]):
        if not trusted(hop, proxies):
            return hop
    return peer


class TrustedProxies:
    """ASGI middleware: the client address and scheme a trusted proxy forwarded (others' headers are ignored)."""

    def __init__(self, app, proxies: tuple[Network, ...]):
        self.app, self.proxies = app, proxies

    async def __call__(self, scope, receive, send):
        if scope["type"] in ("http", "websocket") and self.proxies:
            peer = (scope.get("client") or ("", 0))
            if trusted(peer[0], self.proxies):
                forwarded = _joined(scope, b"x-forwarded-for") or None
                proto = _joined(scope, b"x-forwarded-proto").split(",")[-1].strip().lower()
                scope = {**scope, "client": (forwarded_client(peer[0], forwarded, self.proxies), peer[1])}
                if proto in ("http", "https"):
                    scope["scheme"] = proto
        await self.app(scope, receive, send)


def _joined(scope, name: bytes) -> str:
    """Every value of a header, in order, joined as one list (a proxy may add a line rather than append)."""
    return ",".join(v.decode("latin-1") for k, v in scope.get("headers") or [] if k.lower() == name)
