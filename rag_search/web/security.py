"""Who may use the search page and what they may see: the Gate the mounting server supplies, and the token gate.

The page never decides identity itself. A Gate answers: who is asking (`authorize`: from a session cookie or an
Authorization header; None sends them to the login page), what a login form proves (`sign_in`: a new session's id
for the cookie, or a Refusal saying why not), signing out (`sign_out`: the session ends on the server, so a copy of
the cookie is refused too), and which collections that principal may see (`collections_for`: None for all).
`TokenGate` protects a page with one token (tests, benches): no token is the local user; with a token, the login
page takes it once and the browser keeps a session cookie (access/sessions.py: a random id the server keeps
hashed; never the token).

Host and Origin checks are the server's (mcp/http.HostOriginGuard) around the whole app; forms that change
something also carry a CSRF token bound to the session, and the cookie is SameSite=Strict.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Mapping, Protocol

from starlette.requests import Request

from rag_search.access import users
from rag_search.access.http_keys import Refusal
from rag_search.access.sessions import LIFETIME, Sessions, key_fingerprint

COOKIE = "local_rag_session"
COOKIE_MAX_AGE = LIFETIME  # seconds a sign-in lasts in this browser (the server ends it then too)
WRONG_TOKEN = "That is not the token this server was started with. Check it and try again."


@dataclass(frozen=True)
class Principal:
    """Someone the gate let in: `name` is what the page shows, `uid` their stable id, `session` the session they
    signed in with (None: an Authorization header, or a server open to its local user)."""

    name: str
    uid: str = ""
    session: str | None = None


class Gate(Protocol):
    """The page's security, supplied from outside (the server that mounts it)."""

    login_fields: tuple[str, ...]  # what the login page asks for; () when no sign-in is needed

    def authorize(self, request: Request) -> Principal | None:
        """The principal a request comes from, or None (not signed in)."""

    def sign_in(self, fields: Mapping[str, str], address: str) -> str | Refusal:
        """A new session's id (the cookie's value) for a filled-in login form sent from `address`, or why not."""

    def sign_out(self, principal: Principal) -> None:
        """End the principal's session on the server."""

    def collections_for(self, principal: Principal) -> frozenset[str] | None:
        """The collections the principal may search and read; None: all of them."""


class TokenGate:
    """No token: the local user. A token: the login page takes it once and the browser keeps a session cookie."""

    def __init__(self, token: str | None, sessions: Sessions | None = None):
        self.token = token or None
        self.sessions = sessions or Sessions(None)
        self.login_fields: tuple[str, ...] = ("token",) if self.token else ()

    def authorize(self, request: Request) -> Principal | None:
        if self.token is None:
            return Principal(users.OWNER.name, users.OWNER.id)
        header = request.headers.get("authorization", "")
        if hmac.compare_digest(header.encode(), f"Bearer {self.token}".encode()):
            return Principal(users.OWNER.name, users.OWNER.id)
        cookie = request.cookies.get(COOKIE, "")
        valid = {key_fingerprint(users.key_hash(self.token)): users.OWNER.id}
        found = self.sessions.find(cookie, valid)
        return Principal(users.OWNER.name, users.OWNER.id, cookie) if found else None

    def sign_in(self, fields: Mapping[str, str], address: str) -> str | Refusal:
        given = fields.get("token", "").strip()
        if self.token and hmac.compare_digest(given.encode(), self.token.encode()):
            return self.sessions.start(users.OWNER.id, users.key_hash(self.token))
        return Refusal(401, WRONG_TOKEN)

    def sign_out(self, principal: Principal) -> None:
        if principal.session:
            self.sessions.end(principal.session)

    def collections_for(self, principal: Principal) -> frozenset[str] | None:
        return None


class Csrf:
    """Tokens for forms that change something, bound to the principal's session and to this server process."""

    def __init__(self):
        self._key = secrets.token_hex(32)

    def token(self, principal: Principal) -> str:
        bound = f"csrf:{principal.uid or principal.name}:{principal.session or ''}"
        return hmac.new(self._key.encode(), bound.encode(), hashlib.sha256).hexdigest()[:32]

    def ok(self, principal: Principal, given: str | None) -> bool:
        return hmac.compare_digest((given or "").encode(), self.token(principal).encode())


def safe_next(target: str | None) -> str:
    """Where to go after signing in: a path on this server only (not //other.host or a full URL)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def cookie_args(request: Request, value: str) -> dict:
    """The session cookie: HttpOnly (scripts cannot read it), SameSite=Strict (other sites cannot send it), Secure
    when the page came over HTTPS (directly, or through a trusted proxy: access/proxies.py)."""
    return {"key": COOKIE, "value": value, "max_age": COOKIE_MAX_AGE, "httponly": True, "samesite": "strict",
            "secure": request.url.scheme == "https", "path": "/"}
