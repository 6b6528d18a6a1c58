"""Who may use the search page and what they may see: the Gate the mounting server supplies, and the token gate.

The page never decides identity itself. A Gate answers three questions: who is asking (`authorize`: from a session
cookie or an Authorization header; None sends them to the login page), what a login form proves (`sign_in`: the
cookie value to set, or None), and which collections that principal may see (`collections_for`: None for all).
`TokenGate` is today's protection of `local-rag serve`: no token on loopback (everyone who can reach the port is
the local user, as for MCP), or the server's bearer token, typed once into the login page, which then sets an
HttpOnly, SameSite=Strict cookie holding an HMAC of the token (never the token itself).

Host and Origin checks are the MCP server's (mcp_http.HostOriginGuard) around the whole app; forms that change
something also carry a CSRF token bound to the principal.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Mapping, Protocol

from starlette.requests import Request

COOKIE = "local_rag_session"
COOKIE_MAX_AGE = 30 * 86400  # seconds a sign-in lasts in this browser


@dataclass(frozen=True)
class Principal:
    """Someone the gate let in; `name` is what the page shows and what CSRF tokens are bound to."""

    name: str


class Gate(Protocol):
    """The page's security, supplied from outside (the server that mounts it)."""

    login_fields: tuple[str, ...]  # what the login page asks for; () when no sign-in is needed

    def authorize(self, request: Request) -> Principal | None:
        """The principal a request comes from, or None (not signed in)."""

    def sign_in(self, fields: Mapping[str, str]) -> str | None:
        """The session cookie's value for a filled-in login form, or None when it proves nothing."""

    def collections_for(self, principal: Principal) -> frozenset[str] | None:
        """The collections the principal may search and read; None: all of them."""


class TokenGate:
    """No token: the local user. A token: the login page takes it once and the browser keeps a cookie."""

    def __init__(self, token: str | None):
        self.token = token or None
        self.login_fields: tuple[str, ...] = ("token",) if self.token else ()
        self._session = _mac(self.token, "local-rag web session v1") if self.token else ""

    def authorize(self, request: Request) -> Principal | None:
        if self.token is None:
            return Principal("local")
        cookie = request.cookies.get(COOKIE, "")
        header = request.headers.get("authorization", "")
        if hmac.compare_digest(cookie.encode(), self._session.encode()) or \
                hmac.compare_digest(header.encode(), f"Bearer {self.token}".encode()):
            return Principal("token")
        return None

    def sign_in(self, fields: Mapping[str, str]) -> str | None:
        given = fields.get("token", "").strip()
        if self.token and hmac.compare_digest(given.encode(), self.token.encode()):
            return self._session
        return None

    def collections_for(self, principal: Principal) -> frozenset[str] | None:
        return None


class Csrf:
    """Tokens for forms that change something, bound to the principal and to this server process."""

    def __init__(self):
        self._key = secrets.token_hex(32)

    def token(self, principal: Principal) -> str:
        return _mac(self._key, f"csrf:{principal.name}")[:32]

    def ok(self, principal: Principal, given: str | None) -> bool:
        return hmac.compare_digest((given or "").encode(), self.token(principal).encode())


def _mac(key: str, message: str) -> str:
    return hmac.new(key.encode(), message.encode(), hashlib.sha256).hexdigest()


def safe_next(target: str | None) -> str:
    """Where to go after signing in: a path on this server only (not //other.host or a full URL)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def cookie_args(request: Request, value: str) -> dict:
    """The session cookie: HttpOnly (scripts cannot read it), SameSite=Strict (other sites cannot send it), Secure
    when the page came over HTTPS."""
    return {"key": COOKIE, "value": value, "max_age": COOKIE_MAX_AGE, "httponly": True, "samesite": "strict",
            "secure": request.url.scheme == "https", "path": "/"}
