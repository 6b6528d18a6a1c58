"""Keys on the HTTP server: which user a request runs as, wrong keys slowed down per client address.

Every request carries `Authorization: Bearer <key>`. The key is one of a user's (config `users:`, re-read when
config.yaml changes) or the `--token` of the owner; the request then runs as that user (users.acting_as).
A refusal is answered the way MCP clients show it for a plain bearer-token server: 403 with a JSON-RPC error
that says what to do, never 401 (on a 401 MCP clients start an OAuth flow this server does not offer: the
inspector then fails asking for a TTY, and the SDKs drop the message); /.well-known/ (OAuth discovery) is 404.
Wrong keys from one client address (loopback included): the first FREE_FAILURES are answered at once, then each
makes that address wait, doubling from FIRST_WAIT up to LONGEST_WAIT (429 with Retry-After); an address with no
wrong key for FORGET_AFTER is forgotten. A right key does not clear the count (a key holder sending wrong keys
between their own is slowed for the wrong ones), and a right key always works, even from an address that waits:
the users' keys are 256 random bits, which no number of tries finds, and one person's typos must not lock out
everyone behind the same address. Only a short owner's `--token` (under STRONG_KEY characters) waits with its
address, as a guess would. The client address is the connection's, or what a proxy the owner named says
(access/proxies.py). Keys are compared as SHA-256 hashes in constant time and never logged or echoed.
"""

from __future__ import annotations

import hmac
import json
import math
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable

from rag_search.access import users
from rag_search.config import Paths

FREE_FAILURES = 5
FIRST_WAIT = 1.0  # seconds
LONGEST_WAIT = 300.0
FORGET_AFTER = 900.0  # seconds without a wrong key after which an address starts afresh
STRONG_KEY = 32  # characters: a key this long is not guessed by trying (`users add` makes 48)
MAX_ADDRESSES = 10_000  # addresses remembered; the longest idle ones are forgotten first
AUTH_ERROR = -32001  # JSON-RPC server error code of a refused request
USER_SCOPE = "local_rag.user"  # the ASGI scope key naming the request's users.User

NO_KEY = ("This server needs a key: send it as the header `Authorization: Bearer <key>` (in Claude Code: "
          "--header; see the README's \"One server for a household or a team\"). Its owner makes one with "
          "`local-rag users add NAME`.")
WRONG_KEY = ("Wrong key: the `Authorization: Bearer` key is not one of this server's. Check it with the server's "
             "owner (`local-rag users list`; `local-rag users key NAME` makes a new one).")


class Limiter:
    """Wrong keys per client address, and how long that address must wait before its next try."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        # address → (wrong keys, blocked until, last wrong key)
        self._seen: OrderedDict[str, tuple[int, float, float]] = OrderedDict()

    def wait(self, address: str) -> float:
        """Seconds `address` must still wait (0: it may try a key now)."""
        entry = self._seen.get(address)
        return max(0.0, entry[1] - self.clock()) if entry else 0.0

    def failed(self, address: str) -> None:
        now = self.clock()
        count, _, last = self._seen.pop(address, (0, 0.0, now))
        count = 1 if now - last > FORGET_AFTER else count + 1
        blocked = now + min(FIRST_WAIT * 2 ** (count - FREE_FAILURES - 1), LONGEST_WAIT) if count > FREE_FAILURES \
            else 0.0
        self._seen[address] = (count, blocked, now)
        while len(self._seen) > MAX_ADDRESSES:
            self._seen.popitem(last=False)


def has_keys(paths: Paths | None, token: str | None) -> bool:
    return bool(token) or (paths is not None and bool(users.directory(paths)))


@dataclass
class Access:
    """Who may use one HTTP server (its MCP endpoint and its search page alike): the users' keys and the owner's
    `--token` (`holders`, `find`), whether any key is configured now (`keyless`), whether a keyless server is
    open to the owner (only on loopback), and the wrong-key limiter both share (one budget per address)."""

    paths: Paths | None
    token: str | None
    open_when_keyless: bool
    limiter: Limiter = field(default_factory=Limiter)

    def holders(self) -> list[tuple[str, users.User]]:
        """(key hash, user) of every key that opens this server now: the owner's `--token`, then the users'."""
        owner = [(users.key_hash(self.token), users.OWNER)] if self.token else []
        return owner + (list(users.directory(self.paths).users.items()) if self.paths is not None else [])

    def find(self, key: str) -> users.User | None:
        """The owner for `--token`, else the user whose key this is (hashes compared in constant time)."""
        if self.token and hmac.compare_digest(users.key_hash(key), users.key_hash(self.token)):
            return users.OWNER
        return users.directory(self.paths).find(key) if self.paths is not None else None

    def keyless(self) -> bool:
        return not has_keys(self.paths, self.token)

    def is_open(self) -> bool:
        """No key needed: nobody has one, and this server only listens on loopback (the owner's machine)."""
        return self.open_when_keyless and self.keyless()

    def check(self, address: str, key: str | None) -> users.User | Refusal:
        """The user of `key` sent from `address`, or why not (wrong keys slow that address down; a right key works
        even while it waits, unless it is short enough to be guessed)."""
        user = self.find(key) if key else None
        wait = self.limiter.wait(address)
        if user is not None and (not wait or len(key or "") >= STRONG_KEY):
            return user
        if wait:
            seconds = math.ceil(wait)
            return Refusal(429, f"Too many wrong keys from {address}: try again in {seconds} s.", seconds)
        if key:
            self.limiter.failed(address)
        return Refusal(403, WRONG_KEY if key else NO_KEY)


@dataclass(frozen=True)
class Refusal:
    status: int
    message: str
    retry_after: int | None = None


class KeyAuth:
    """ASGI middleware: a request runs as the user of its key; without keys configured (and only then, on
    loopback when `open_when_keyless`) as the owner. The request's scope names the user (USER_SCOPE), which
    mcp/http.py hands to the MCP SDK as its authenticated principal, so an MCP session answers only the user who
    opened it: another user's key with its session id is told the session does not exist."""

    def __init__(self, app, access: Access):
        self.app, self.access = app, access

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if scope.get("path", "").startswith("/.well-known/"):
            return await _refuse(send, Refusal(404, "This server does not use OAuth. " + NO_KEY))
        if self.access.is_open():
            with users.acting_as(users.OWNER):
                return await self.app(scope, receive, send)
        user = self.access.check(client_address(scope), bearer(scope))
        if isinstance(user, Refusal):
            return await _refuse(send, user)
        with users.acting_as(user):
            await self.app({**scope, USER_SCOPE: user}, receive, send)


def client_address(scope) -> str:
    return (scope.get("client") or ("unknown",))[0]


def bearer(scope) -> str | None:
    for name, value in scope.get("headers") or []:
        if name == b"authorization":
            scheme, _, key = value.decode("latin-1").strip().partition(" ")
            if scheme.lower() == "bearer" and key.strip():
                return key.strip()
    return None


async def _refuse(send, refusal: Refusal) -> None:
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": AUTH_ERROR, "message": refusal.message}}
    retry = [(b"retry-after", str(refusal.retry_after).encode())] if refusal.retry_after else []
    await send({"type": "http.response.start", "status": refusal.status,
                "headers": [(b"content-type", b"application/json"), *retry]})
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})
