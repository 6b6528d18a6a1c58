"""rag_index through MCP: the collection a (name, path) call means, the root policy on every run, the run itself.

A new folder must pass the root policy (access/roots.py) and is recorded as the assistant's (mcp/guard.py); an
existing collection is never re-pointed. Before each run, an assistant-made collection's folders are checked
again: one that now leads outside the allowed roots (a symlink swapped in) is not indexed.
A person with a key (users.py) indexes only collections they see, and adds folders only under their own
`roots`; a collection they add is theirs (they see it from then on, by their user id). Whatever keeps them from
adding one - the name is another user's, the folder is outside their roots, hidden, missing - they get the same
answer, so rag_index tells nobody which collection names (or folders) exist.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from rag_search.access import users
from rag_search.access.roots import check_new_root
from rag_search.collection_config import check_name, declared, register, source_paths
from rag_search.config import Paths, load_settings
from rag_search.errors import RagError, RootRefused
from rag_search.mcp import guard as mcp_guard


def index(paths: Paths, collection: str, path: str | None) -> dict:
    from rag_pipelines.indexing.handover import index_or_hand_over  # lazily: only this tool needs Dagster

    name = _index_target(paths, collection, path) if path else _valid_name(collection)
    if not _may_index(paths, name):
        raise RagError(f"No collection named '{name}' that you can index. Call rag_index(collection, path) with a "
                       f"new name to add a folder, or rag_list_collections to see yours.")
    mcp_guard.check_run(paths, name)
    # busy: say at once who indexes it, and take over (policy checked again) if that run dies
    summary = index_or_hand_over(paths, name, "mcp", check=lambda: mcp_guard.check_run(paths, name))
    o = summary.outcomes
    return {"collection": name, "indexed": o.get("indexed", 0), "updated": o.get("indexed", 0),
            "skipped": summary.unchanged, "failed": o.get("failed", 0), "deleted": o.get("deleted", 0),
            "runs": summary.run_ids, "failures": summary.failures}


def _may_index(paths: Paths, name: str) -> bool:
    """The owner may ask for any name (a wrong one is told the configured ones); a person with a key only for a
    configured collection they see (so no other name is ever listed to them)."""
    visible = users.visible(paths)
    return visible is None or (name in visible and name in declared(paths))


def _index_target(paths: Paths, collection: str, path: str) -> str:
    """The collection to index for (name, path): an existing one at that path, or a new one registered now."""
    name = _valid_name(collection)
    settings = load_settings(paths.config)  # fresh: allowed roots added since the server started count
    existing = declared(paths, settings, with_disabled=True).get(name)
    user = users.current()
    if existing is not None:
        if not users.may_see(paths, name):  # another user's: not re-pointed, not named to this one
            raise RagError(_cannot_add(user, name, path))
        _same_paths(paths, existing, path, configured=name in settings.collections)
        return name
    try:
        folder = check_new_root(path, settings.mcp.allowed_roots, rag_home=paths.home, config=paths.config)
        users.check_root(user, folder, paths)
    except RootRefused as exc:
        if user.sees_all:
            raise
        raise RagError(_cannot_add(user, name, path)) from exc
    mcp_guard.remember(paths, name, folder)  # first: a collection registered but not recorded would be trusted
    users.remember_made(paths, user, name)
    register(paths, name, {"kind": "project", "sources": [{"type": "project", "paths": [str(folder)]}]})
    return name


def _cannot_add(user: users.User, name: str, path: str) -> str:
    """A person's one answer for a name or folder they cannot add (never saying which of the two, or why)."""
    roots = ", ".join(user.roots) or "none yet: ask the server's owner to give you one"
    return (f"rag_index cannot add {path} as '{name}' for you. Give a folder under your roots ({roots}) that exists "
            "and is not hidden, and a collection name of your own; call rag_index again with another name or folder.")


def _valid_name(name: str) -> str:
    """The collection name as stored (normalised); an invalid one is a one-line error."""
    try:
        return check_name(name)
    except ValueError as exc:
        raise RagError(f"{name!r} cannot be a collection name: {exc}. Call rag_index again with another name.") from exc


def _same_paths(paths: Paths, existing, path: str, configured: bool) -> None:
    """Refuse to re-point an existing collection: rag_index(name, path) only re-indexes it at its own path."""
    current = source_paths(existing)
    folder = Path(path).expanduser().resolve()
    if folder in {Path(p).expanduser().resolve() for p in current}:
        return
    how = (f"the user can edit it in {paths.config}" if configured else
           f"the user can run `local-rag index project {shlex.quote(existing.name)} {shlex.quote(str(folder))} "
           "--replace` in a terminal (items not found there leave the index)")
    raise RagError(f"Collection '{existing.name}' already indexes {', '.join(current) or 'other sources'}; rag_index "
                   f"does not point it at {folder}. Call rag_index('{existing.name}') without a path to re-index it, "
                   f"pick a new collection name for that folder, or, to re-point it deliberately, {how}.")
