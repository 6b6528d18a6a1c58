"""Who is asking: people with keys (config `users:`), the collections each may see, and the caller of this request.

A key is shown once, when `local-rag users add` makes it; config.yaml keeps only its SHA-256 (a key is 256
random bits, so a fast hash is enough), and nothing logs a key. The HTTP server finds the user of a request's
key (`Directory.find`, re-read when config.yaml changes, so a new user needs no restart) and runs the request
as that user (`acting_as`); every tool and resource then shows only `visible()` collections: those granted in
the config plus those the user added with rag_index (recorded in user-collections.json in the home, by the user's
stable id: a user removed and a new one given the same name do not share them).
Outside an HTTP request with keys (stdio, `local-rag search`, the CLI) the caller is the owner, who sees all.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from rag_search import file_updates
from rag_search.config import Paths, Settings, load_settings, users_path
from rag_search.errors import ConfigError, RootRefused

KEY_PREFIX = "lrag_"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
MADE = "user-collections.json"  # collections users added with rag_index


@dataclass(frozen=True)
class User:
    """A caller: `collections` None sees every collection (the owner, an admin); `uid` the stable id what they
    add belongs to (config `id:`; a user written before ids existed: their name)."""

    name: str
    collections: frozenset[str] | None = frozenset()
    roots: tuple[str, ...] = ()
    admin: bool = False
    uid: str = ""

    @property
    def id(self) -> str:
        return self.uid or self.name

    @property
    def sees_all(self) -> bool:
        return self.collections is None


OWNER = User("owner", None, admin=True)
_caller: ContextVar[User | None] = ContextVar("local_rag_user", default=None)


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def new_id() -> str:
    """A user's stable id: never a valid user name (':'), never made twice."""
    return "u:" + secrets.token_hex(12)


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def valid_name(name: str) -> str:
    if name.lower() == OWNER.name:
        raise ConfigError(f"'{name}' cannot be a user name: it is the server's owner's (the query log and the search "
                          "page name the owner so). Choose another name.")
    if not NAME.fullmatch(name):
        raise ConfigError(f"'{name[:70]}' cannot be a user name: use 1-64 letters, digits, '.', '_' or '-', "
                          "starting with a letter or digit.")
    return name


def current() -> User:
    """The caller of the request being answered (the owner outside an HTTP request with keys)."""
    return _caller.get() or OWNER


@contextmanager
def acting_as(user: User) -> Iterator[User]:
    token = _caller.set(user)
    try:
        yield user
    finally:
        _caller.reset(token)


@dataclass
class Directory:
    """The users of one config file, by key hash."""

    users: dict[str, User] = field(default_factory=dict)  # key hash → user

    @classmethod
    def from_settings(cls, settings: Settings) -> Directory:
        users = {}
        for name, u in settings.users.items():
            grants = None if u.admin else frozenset(u.collections)
            users[u.key_sha256] = User(valid_name(name), grants, tuple(u.roots), u.admin, u.id or "")
        return cls(users)

    def find(self, key: str) -> User | None:
        """The user whose key this is; every stored hash is compared, in constant time each."""
        given, found = key_hash(key), None
        for stored, user in self.users.items():
            if hmac.compare_digest(given, stored):
                found = user
        return found

    def __bool__(self) -> bool:
        return bool(self.users)


_directories: dict[Path, tuple[tuple, Directory, Path]] = {}  # config → (stamps, users, the file holding them)


def directory(paths: Paths) -> Directory:
    """The users in the config file (or its users_file) now, re-read when either file changes; a broken edit keeps
    the last good one."""
    cached = _directories.get(paths.config)
    held = cached[2] if cached else paths.config
    stamp = (file_updates.stamp(paths.config), file_updates.stamp(held))
    if cached and cached[0] == stamp:
        return cached[1]
    try:
        settings = load_settings(paths.config)
        found = Directory.from_settings(settings)
    except ConfigError:
        if cached is None:
            raise
        return cached[1]  # a half-saved config.yaml must not lock everyone out (or let anyone in)
    now_held = users_path(paths.config, settings)
    _directories[paths.config] = (stamp if now_held == held else (), found, now_held)  # (): look again next time
    return found


def visible(paths: Paths, user: User | None = None) -> frozenset[str] | None:
    """The collections `user` (default: the caller) may see; None = all."""
    user = user or current()
    if user.sees_all:
        return None
    return frozenset(user.collections or ()) | frozenset(made(paths).get(user.id, ()))


def may_see(paths: Paths, collection: str, user: User | None = None) -> bool:
    names = visible(paths, user)
    return names is None or collection in names


def check_root(user: User, folder: Path, paths: Paths) -> None:
    """RootRefused unless `user` may add `folder` with rag_index: the owner and admins wherever the root policy
    allows (roots.py), a person with a key only under their own `roots`."""
    if user.sees_all:
        return
    for root in user.roots:
        if folder == Path(root).expanduser().resolve() or Path(root).expanduser().resolve() in folder.parents:
            return
    where = f"under {', '.join(user.roots)}" if user.roots else "anywhere on this server yet"
    raise RootRefused(f"User '{user.name}' may add folders {where}; {folder} is not. Ask the server's owner to add "
                      f"it to users.{user.name}.roots in {paths.config}, or index one of your collections.")


# -- collections users added with rag_index ----------------------------------------------------

def made(paths: Paths) -> dict[str, list[str]]:
    """User id (users.User.id) → the collections they added with rag_index."""
    try:
        data = json.loads((paths.home / MADE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ConfigError(f"Cannot read {paths.home / MADE} ({exc}): it records which user added which collection. "
                          "Restore it, or delete it (those collections are then seen only by the users granted "
                          "them in config.yaml).") from exc
    return {str(k): [str(c) for c in v] for k, v in (data.get("users") or {}).items()}


def remember_made(paths: Paths, user: User, collection: str) -> None:
    """Record that `user` added `collection` (so they see it); nothing for the owner, who sees all anyway."""
    if user.sees_all:
        return
    _change_made(paths, lambda data: data | {user.id: sorted(set(data.get(user.id, [])) | {collection})})


def forget_made(paths: Paths, user_id: str) -> None:
    """The user is removed: what they added is no longer anyone's (the owner still sees it)."""
    _change_made(paths, lambda data: {k: v for k, v in data.items() if k != user_id})


def _change_made(paths: Paths, change) -> None:
    file = paths.home / MADE
    with file_updates.locked(file):  # two users' rag_index at once both keep theirs
        data = change(made(paths))
        file_updates.write_atomic(file, json.dumps({"about": "Collections each user added with rag_index, by user id "
                                                   "(they see them besides the collections config.yaml grants them).",
                                                   "users": data}, indent=1))
