"""The page's gate on `local-rag serve --http`: the same keys as MCP, each person seeing only their collections.

A person signs in with their key (`local-rag users add`), the owner with `--token`; the browser keeps an
HttpOnly cookie holding an HMAC of the key's hash (never the key), which stops working when that key is changed
or removed. `Authorization: Bearer <key>` works too. Wrong keys count against the address in the limiter the
MCP endpoint uses (http_keys.Access): a bearer header in `authorize`, a login form in `LoginLimit`. With no key
configured, a loopback server is open to the owner, as MCP is.
"""

from __future__ import annotations

import hmac
import math
from typing import Mapping

from starlette.requests import Request
from starlette.responses import Response

from rag_search.access import users
from rag_search.config import Paths
from rag_search.access.http_keys import Access, Refusal, bearer, client_address
from rag_search.web.security import COOKIE, Principal, _mac

SESSION = "local-rag web session v1"


class KeyGate:
    """Principals are user names ("owner" for --token); what they see is what MCP shows them (users.visible)."""

    def __init__(self, access: Access, paths: Paths):
        self.access, self.paths = access, paths

    @property
    def login_fields(self) -> tuple[str, ...]:
        return () if self.access.is_open() else ("key",)

    def authorize(self, request: Request) -> Principal | None:
        if self.access.is_open():
            return Principal(users.OWNER.name)
        key = bearer(request.scope)
        if key:
            user = self.access.check(client_address(request.scope), key)
            return None if isinstance(user, Refusal) else Principal(user.name)
        cookie = request.cookies.get(COOKIE, "")
        user = next((u for h, u in self.access.holders() if hmac.compare_digest(cookie.encode(), _session(h).encode())),
                    None)
        return Principal(user.name) if user else None

    def sign_in(self, fields: Mapping[str, str]) -> str | None:
        given = users.key_hash(fields.get("key", "").strip())
        found = next((h for h, _ in self.access.holders() if hmac.compare_digest(given, h)), None)
        return _session(found) if found else None

    def collections_for(self, principal: Principal) -> frozenset[str] | None:
        if self.access.is_open():
            return None
        holder = next((u for _, u in self.access.holders() if u.name == principal.name), None)
        return users.visible(self.paths, holder) if holder else frozenset()


def _session(key_sha256: str) -> str:
    return _mac(key_sha256, SESSION)


class LoginLimit:
    """ASGI middleware: a login form from an address that sent too many wrong keys is answered 429 without
    looking at it; a refused one (401) counts as a wrong key, a sign-in (303) clears the address."""

    def __init__(self, app, access: Access):
        self.app, self.access = app, access

    def __getattr__(self, name):  # app.state and friends stay reachable
        return getattr(self.app, name)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("path") != "/login" or scope.get("method") != "POST":
            return await self.app(scope, receive, send)
        address = client_address(scope)
        wait = self.access.limiter.wait(address)
        if wait:
            seconds = math.ceil(wait)
            refused = Response(f"Too many wrong keys from {address}: try again in {seconds} s.", 429,
                               {"retry-after": str(seconds)})
            return await refused(scope, receive, send)

        async def counted(message):
            if message["type"] == "http.response.start":
                if message["status"] == 401:
                    self.access.limiter.failed(address)
                elif message["status"] == 303:
                    self.access.limiter.succeeded(address)
            await send(message)

        await self.app(scope, receive, counted)
