"""`local-rag users add|list|key|grant|revoke|remove`: who may reach the HTTP server, and which collections each sees."""

from __future__ import annotations

import click

from rag_search.cli.context import App, pass_app
from rag_search.cli.format import echo_json
from rag_search.config import users_path
from rag_search.errors import ConfigError


@click.group("users")
def users_group():
    """People who reach `local-rag serve --http` with a key, and the collections each may read."""


def _names(values: tuple[str, ...]) -> list[str]:
    """--collections a,b --collections c → [a, b, c]."""
    return [n.strip() for v in values for n in v.split(",") if n.strip()]


@users_group.command("add")
@click.argument("name")
@click.option("--collections", "-c", "grants", multiple=True, metavar="A,B",
              help="Collections this user may read (comma-separated; repeatable).")
@click.option("--admin", is_flag=True, help="Sees and indexes every collection, as you do.")
@click.option("--root", "roots", multiple=True, metavar="FOLDER",
              help="A folder under which this user's rag_index may add collections; repeatable.")
@pass_app
def users_add(app: App, name: str, grants: tuple[str, ...], admin: bool, roots: tuple[str, ...]):
    """Add a user and print their new key (once: only its hash is kept in config.yaml)."""
    from rag_search.access import users
    from rag_search.access.user_config import change_users

    key = users.new_key()
    entry: dict = {"key_sha256": users.key_hash(key), "id": users.new_id(), "collections": _names(grants)}
    entry |= ({"admin": True} if admin else {}) | ({"roots": [str(click.format_filename(r)) for r in roots]} if roots else {})

    def add(entries: dict) -> dict:
        if users.valid_name(name) in entries:
            raise ConfigError(f"User '{name}' exists. `local-rag users key {name}` gives them a new key; "
                              f"`local-rag users grant {name} COLLECTION` more collections.")
        return entries | {name: entry}

    change_users(users_path(app.paths.config, app.settings), add)
    click.echo(key)
    _explain(app, name, entry)


@users_group.command("key")
@click.argument("name")
@pass_app
def users_key(app: App, name: str):
    """Give a user a new key (printed once); their old key stops working at once."""
    from rag_search.access import users

    key = users.new_key()
    entry = _change(app, name, lambda entry: entry | {"key_sha256": users.key_hash(key)})
    ended = _end_sessions(app, name, entry)
    click.echo(key)
    click.echo(f"New key of '{name}' (shown once); the old one no longer works{ended}.", err=True)


@users_group.command("grant")
@click.argument("name")
@click.argument("collections", nargs=-1, required=True)
@pass_app
def users_grant(app: App, name: str, collections: tuple[str, ...]):
    """Let a user read more collections."""
    _regrant(app, name, lambda have: have + [c for c in _names(collections) if c not in have])


@users_group.command("revoke")
@click.argument("name")
@click.argument("collections", nargs=-1, required=True)
@pass_app
def users_revoke(app: App, name: str, collections: tuple[str, ...]):
    """Stop a user reading collections (those they added with rag_index stay theirs)."""
    _regrant(app, name, lambda have: [c for c in have if c not in _names(collections)])


@users_group.command("remove")
@click.argument("name")
@pass_app
def users_remove(app: App, name: str):
    """Remove a user: their key and their sign-ins to the search page stop working at once."""
    from rag_search.access import users

    removed: list[dict] = []

    def remove(entry: dict) -> None:
        removed.append(entry)
        return None  # no entry: the user goes

    _change(app, name, remove)
    ended = _end_sessions(app, name, removed[0])
    users.forget_made(app.paths, removed[0].get("id") or name)
    click.echo(f"Removed user '{name}'; their key no longer works{ended}.", err=True)


@users_group.command("list")
@click.option("--json", "as_json", is_flag=True)
@pass_app
def users_list(app: App, as_json: bool):
    """Users, the collections each reads (granted, and added with rag_index), admin, roots. Never keys."""
    from rag_search.access import users
    from rag_search.access.user_config import read_users

    made = users.made(app.paths)
    rows = [{"name": n, "collections": e.get("collections", []), "added": made.get(e.get("id") or n, []),
             "admin": e.get("admin", False), "roots": e.get("roots", [])} for n, e in
            read_users(users_path(app.paths.config, app.settings)).items()]
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo("No users: `local-rag users add NAME --collections A,B` gives someone a key.")
    for r in rows:
        reads = "all collections (admin)" if r["admin"] else ", ".join(r["collections"] + r["added"]) or "nothing yet"
        roots = f"; may add folders under {', '.join(r['roots'])}" if r["roots"] else ""
        click.echo(f"{r['name']}: reads {reads}{roots}")


def _change(app: App, name: str, change) -> dict | None:
    """Replace user `name`'s entry by change(entry) (None removes it), under config.yaml's lock; ConfigError naming
    the users there are when there is no such user. Returns the new entry."""
    from rag_search.access.user_config import change_users

    done: list[dict | None] = []
    where = users_path(app.paths.config, app.settings)

    def apply(entries: dict) -> dict:
        if name not in entries:
            known = ", ".join(entries) or "none yet"
            raise ConfigError(f"No user '{name}' in {where} (users: {known}). `local-rag users add {name}` "
                              "adds one.")
        done.append(change(entries[name]))
        return {n: (done[0] if n == name else e) for n, e in entries.items() if n != name or done[0] is not None}

    change_users(where, apply)
    return done[0]


def _end_sessions(app: App, name: str, entry: dict) -> str:
    """Sign the user out of the search page everywhere; ", and N sign-in(s) ended" or ""."""
    from rag_search.access.sessions import Sessions

    ended = Sessions(app.paths.home).end_user(entry.get("id") or name)
    return f", and {ended} sign-in(s) to the search page ended" if ended else ""


def _regrant(app: App, name: str, change) -> None:
    entry = _change(app, name, lambda entry: entry | {"collections": change(list(entry.get("collections", [])))})
    _explain(app, name, entry, with_key=False)


def _explain(app: App, name: str, entry: dict, with_key: bool = True) -> None:
    """On stderr (stdout holds only the key): what the user reads, and collections not in the index."""
    say = lambda line: click.echo(line, err=True)  # noqa: E731
    grants = entry.get("collections", [])
    if with_key:
        say(f"Key of '{name}' above: shown once, give it to them (config.yaml keeps only its SHA-256).")
    say(f"'{name}' reads: " + ("all collections (admin)" if entry.get("admin") else ", ".join(grants) or
                                "nothing yet (`local-rag users grant NAME COLLECTION`)"))
    indexed = {c.name for c in _list_collections(app)}
    missing = [c for c in grants if c not in indexed]
    if missing and not entry.get("admin"):
        say(f"Not in the index (yet): {', '.join(missing)}. Known: {', '.join(sorted(indexed)) or 'none'}.")
    for line in _root_notes(app, name, entry.get("roots", [])):
        say(line)


def _root_notes(app: App, name: str, roots: list[str]) -> list[str]:
    """What keeps a user's rag_index from adding folders under their roots: a root that does not exist yet, or one
    outside your home folder that mcp.allowed_roots does not allow (every folder an assistant adds must pass both)."""
    from pathlib import Path

    from rag_search.access.roots import OUTSIDE, refusal
    from rag_search.config import load_settings

    allowed = load_settings(app.paths.config).mcp.allowed_roots
    out = []
    for root in roots:
        folder = Path(root).expanduser().resolve()
        if not folder.is_dir():
            out.append(f"Note: {folder} does not exist yet; create it before '{name}' adds folders under it.")
        if refusal(folder, allowed) == OUTSIDE:
            out.append(f"Note: {folder} is outside your home folder, so '{name}' can add folders under it only once "
                       f"mcp.allowed_roots in {app.paths.config} lists it (or a folder above it).")
    return out


def _list_collections(app: App):
    from rag_search.store import reads

    if not app.paths.db.exists():
        return []
    return reads.list_collections(app.store)
