"""Sign-ins to the search page: random session ids kept by the server, hashed, each bound to the key that opened it.

Signing in makes a session: 256 random bits, sent once as the browser's cookie; the server keeps only its SHA-256
(sessions.json in the home, 0600, changed under its lock: file_updates.py), with the user's id, a fingerprint of
the key that signed in and when it ends. A session ends when its user signs out (a copy of the cookie is refused
from then on), when it expires (LIFETIME), when the user gets a new key or is removed (the key it was opened with
is no longer one of theirs: `Sessions.find` is asked with the keys valid now, and `local-rag users key|remove` ends
them at once). Without a home (tests, a bench) the sessions live in memory.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from rag_search import file_updates

FILE = "sessions.json"
LIFETIME = 30 * 86400  # seconds a sign-in lasts (the cookie's max-age too)
ABOUT = ("Signed-in browsers of the search page: SHA-256 of each session id (never the id itself), its user and "
         "when it ends. Deleting this file signs everyone out.")


@dataclass(frozen=True)
class Session:
    user: str  # the user's stable id (users.User.id)
    key: str  # key_fingerprint() of the key that signed in
    expires: float  # time.time() at which it ends


def key_fingerprint(key_sha256: str) -> str:
    """What a session keeps of the key that opened it: enough to tell it is still that key, not the key's hash."""
    return hashlib.sha256(f"local-rag session key:{key_sha256}".encode()).hexdigest()[:32]


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()


class Sessions:
    """The sessions of one home (or of this process only, with home None)."""

    def __init__(self, home: Path | None, clock: Callable[[], float] = time.time):
        self.file = home / FILE if home is not None else None
        self.clock = clock
        self._memory: dict[str, Session] = {}
        self._cached: tuple[tuple | None, dict[str, Session]] = (None, {})
        self._guard = threading.Lock()

    def start(self, user: str, key_sha256: str) -> str:
        """A new session of `user` signed in with that key; returns its id (the cookie's value, shown only now)."""
        session_id = secrets.token_urlsafe(32)
        entry = Session(user, key_fingerprint(key_sha256), self.clock() + LIFETIME)
        self._change(lambda rows: rows | {_digest(session_id): entry})
        return session_id

    def find(self, session_id: str, valid_keys: dict[str, str]) -> Session | None:
        """The live session of that id, if the key it was opened with is still its user's: `valid_keys` maps the
        fingerprint of each key that opens the server now to its user's id."""
        if not session_id:
            return None
        digest = _digest(session_id)
        found = self._rows().get(digest)
        if found is None:
            return None
        owner = valid_keys.get(found.key)
        if found.expires <= self.clock() or owner is None or not hmac.compare_digest(owner, found.user):
            self._change(lambda rows: {d: s for d, s in rows.items() if d != digest})
            return None
        return found

    def end(self, session_id: str) -> None:
        """Sign out: that session is refused from now on, wherever its cookie was copied."""
        digest = _digest(session_id)
        self._change(lambda rows: {d: s for d, s in rows.items() if d != digest})

    def end_user(self, user: str) -> int:
        """End every session of `user` (a new key, the user removed); how many there were."""
        ended = [0]

        def drop(rows: dict[str, Session]) -> dict[str, Session]:
            kept = {d: s for d, s in rows.items() if s.user != user}
            ended[0] = len(rows) - len(kept)
            return kept

        self._change(drop)
        return ended[0]

    def _rows(self) -> dict[str, Session]:
        if self.file is None:
            return self._memory
        stamp = file_updates.stamp(self.file)
        if stamp != self._cached[0] or stamp is None:
            self._cached = (stamp, _parse(self.file, _read(self.file)))
        return self._cached[1]

    def _change(self, change: Callable[[dict[str, Session]], dict[str, Session]]) -> None:
        now = self.clock()

        def live(rows: dict[str, Session]) -> dict[str, Session]:
            return {d: s for d, s in change(rows).items() if s.expires > now}

        if self.file is None:
            with self._guard:
                self._memory = live(self._memory)
            return
        file = self.file

        def rewrite(text: str | None) -> str:
            rows = live(_parse(file, text))
            return json.dumps({"about": ABOUT, "sessions": {d: asdict(s) for d, s in rows.items()}}, indent=1)

        file_updates.update(file, rewrite, mode=0o600)


def _read(file: Path) -> str | None:
    try:
        return file.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def _parse(file: Path, text: str | None) -> dict[str, Session]:
    """The sessions in the file's text; an unreadable file counts as none (everyone signs in again)."""
    try:
        rows = (json.loads(text) if text else {}).get("sessions") or {}
        return {str(d): Session(str(s["user"]), str(s["key"]), float(s["expires"])) for d, s in rows.items()}
    except (ValueError, TypeError, KeyError, AttributeError):
        return {}
