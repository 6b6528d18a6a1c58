"""The page's gate on `local-rag serve --http`: the same keys as MCP, each person seeing only their collections.

A person signs in with their key (`local-rag users add`), the owner with `--token`; the browser keeps an HttpOnly
cookie holding a session id (access/sessions.py: random, kept hashed by the server, bound to the key that signed
in), which stops working when they sign out, when it expires, and when that key is changed or removed.
`Authorization: Bearer <key>` works too. Keys typed into the login form and sent as bearer headers are checked by
the MCP endpoint's own check (http_keys.Access.check: one wrong-key budget per address for both). With no key
configured, a loopback server is open to the owner, as MCP is.
"""

from __future__ import annotations

from typing import Mapping

from starlette.requests import Request

from rag_search.access import users
from rag_search.access.http_keys import Access, Refusal, bearer, client_address
from rag_search.access.sessions import Sessions, key_fingerprint
from rag_search.config import Paths
from rag_search.web.security import COOKIE, Principal

WRONG_KEY = ("That is not a key of this server. Check it, or ask the server's owner for a new one "
             "(`local-rag users key NAME`).")


class KeyGate:
    """Principals are users (the owner for --token); what they see is what MCP shows them (users.visible)."""

    def __init__(self, access: Access, paths: Paths, sessions: Sessions | None = None):
        self.access, self.paths = access, paths
        self.sessions = sessions or Sessions(paths.home)

    @property
    def login_fields(self) -> tuple[str, ...]:
        return () if self.access.is_open() else ("key",)

    def authorize(self, request: Request) -> Principal | None:
        if self.access.is_open():
            return Principal(users.OWNER.name, users.OWNER.id)
        key = bearer(request.scope)
        if key:
            user = self.access.check(client_address(request.scope), key)
            return None if isinstance(user, Refusal) else Principal(user.name, user.id)
        cookie = request.cookies.get(COOKIE, "")
        if not cookie:
            return None
        holders = {key_fingerprint(h): u for h, u in self.access.holders()}
        found = self.sessions.find(cookie, {fp: u.id for fp, u in holders.items()})
        return Principal(holders[found.key].name, found.user, cookie) if found else None

    def sign_in(self, fields: Mapping[str, str], address: str) -> str | Refusal:
        key = fields.get("key", "").strip()
        user = self.access.check(address, key or None)
        if isinstance(user, Refusal):
            return user if user.status == 429 else Refusal(401, WRONG_KEY)
        return self.sessions.start(user.id, users.key_hash(key))

    def sign_out(self, principal: Principal) -> None:
        if principal.session:
            self.sessions.end(principal.session)

    def collections_for(self, principal: Principal) -> frozenset[str] | None:
        if self.access.is_open():
            return None
        holder = next((u for _, u in self.access.holders() if u.id == principal.uid), None)
        return users.visible(self.paths, holder) if holder else frozenset()
