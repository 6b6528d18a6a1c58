"""Collections an AI assistant added: the folders rag_index registered for them, and whether those still pass.

rag_index records each folder it registers ($LOCAL_RAG_HOME/mcp-collections.json) once the root policy
(roots.py) allowed it. The folder can change afterwards - replaced by a symlink to somewhere else, a parent
moved - so every run the MCP server starts checks where the folders lead now, and every tool and resource
that returns items (their text, titles, metadata, failures) leaves out a collection whose folders no longer
pass: a run started elsewhere (the CLI, a sensor, the watcher) may have indexed what they lead to.
Collections the user made (the config file, `local-rag index` in a terminal) are trusted as before, and so is
one the user re-pointed from a terminal (its folders no longer resolve as the recorded ones do).

`scope()` adds who is asking (users.py): a person with a key reads only the collections visible to them, and a
collection they may not see is answered as one that does not exist (its name is never shown to them).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Container, Iterable

from rag_search import file_updates
from rag_search.access import users
from rag_search.collection_config import declared, source_paths
from rag_search.config import Paths, load_settings
from rag_search.errors import ConfigError, NotFound, RootRefused
from rag_search.access.roots import OUTSIDE, RAG_HOME, WHOLE_HOME, refusal

RECORD = "mcp-collections.json"
NOT_SERVED = "Its items are not shown to AI assistants."
_snapshots: dict[Path, tuple[tuple, tuple[dict[str, list[str]], list[str]]]] = {}


def remember(paths: Paths, name: str, folder: Path) -> None:
    """Record that an AI assistant added `folder` as collection `name` (before it is registered)."""
    file = paths.home / RECORD

    def add(text: str | None) -> str:
        data = _parse(file, text) | {name: [str(folder)]}
        return json.dumps({"about": "Folders AI assistants added with rag_index; local-rag checks where they lead on "
                           "every MCP run and read.", "collections": data}, indent=1)

    file_updates.update(file, add)


def refusals(paths: Paths) -> dict[str, str]:
    """Collection → why AI assistants may no longer read it, for each assistant-made collection whose folders
    now lead where the root policy refuses."""
    made, allowed = _snapshot(paths)
    out = {}
    for name, folders in made.items():
        for folder in folders:
            target = Path(folder).resolve()
            why = refusal(target, allowed, rag_home=paths.home)
            if why:
                out[name] = _message(paths, name, folder, target, why)
                break
    return out


def check_run(paths: Paths, name: str) -> None:
    """RootRefused when `name` is an assistant-made collection whose folders no longer pass the policy."""
    why = refusals(paths).get(name)
    if why:
        raise RootRefused(f"{why} Nothing was indexed.")


def check_read(refused: dict[str, str], collection: str | None) -> None:
    """NotFound, with the reason, for reading a collection that `refusals` left out."""
    if collection in refused:
        raise NotFound(f"{refused[collection]} {NOT_SERVED}")


def served(refused: dict[str, str], rows: Iterable[dict[str, Any]], key: str = "collection") -> list[dict[str, Any]]:
    """The rows (dicts with a collection name under `key`) of collections that are not refused."""
    return [r for r in rows if r.get(key) not in refused]


@dataclass(frozen=True)
class Scope:
    """What the caller of this request may read: not the refused collections, and for a person with a key only
    the collections visible to them (`visible` None: every collection)."""

    refused: dict[str, str]
    visible: frozenset[str] | None = None

    @property
    def narrowed(self) -> bool:
        return bool(self.refused) or self.visible is not None

    def allows(self, collection: str | None) -> bool:
        return collection not in self.refused and (self.visible is None or collection in self.visible)

    def check(self, collection: str | None, existing: Container[str] = ()) -> None:
        """NotFound for a collection the caller may not read: a refused one with why, one they may not see (or
        that does not exist, when the caller sees only some) as an unknown one, naming only theirs."""
        if collection is None:
            return
        if self.visible is not None and (collection not in self.visible or collection not in existing):
            mine = sorted(n for n in self.visible if n in existing and n not in self.refused)
            raise NotFound(f"No collection named '{collection[:200]}'. " + (
                f"Collections you can read: {', '.join(mine)}." if mine else NO_GRANTS))
        check_read(self.refused, collection)

    def rows(self, rows: Iterable[dict[str, Any]], key: str = "collection") -> list[dict[str, Any]]:
        """The rows (dicts with a collection name under `key`) the caller may read."""
        return [r for r in rows if self.allows(r.get(key))]

    def notes(self, existing: Iterable[str]) -> list[str]:
        """Why collections the caller could otherwise see are left out (never naming one they may not see)."""
        return [why for name, why in self.refused.items() if name in existing
                and (self.visible is None or name in self.visible)]


NO_GRANTS = ("No collections are shared with you on this server yet: ask its owner to grant you some "
             "(users.NAME.collections in config.yaml).")


def scope(paths: Paths) -> Scope:
    """The Scope of the caller of the request being answered (users.current())."""
    return Scope(refusals(paths), users.visible(paths))


def _message(paths: Paths, name: str, folder: str, target: Path, why: str) -> str:
    where = f"{folder}" if str(target) == folder else f"{folder}, which now leads to {target}"
    if why in (WHOLE_HOME, RAG_HOME):
        fix = f"Put {folder} back, or index another folder from a terminal (`local-rag index project NAME PATH`)."
    else:
        fix = (f"If that is intended, the user can add {target} to mcp.allowed_roots in {paths.config}, or index it "
               f"from a terminal under another name (`local-rag index project NAME {shlex.quote(str(target))}`); "
               f"otherwise put {folder} back.")
    outside = " (nor under mcp.allowed_roots)" if why == OUTSIDE else ""
    return f"Collection '{name}' was added by an AI assistant (rag_index) for {where}; {target} {why}{outside}. {fix}"


def _snapshot(paths: Paths) -> tuple[dict[str, list[str]], list[str]]:
    """(assistant-made collection → its recorded folders, allowed roots), re-read when a file behind it changes."""
    files = (paths.home / RECORD, paths.config, paths.home / "registry.yaml")
    stamp = tuple(_stamp(f) for f in files)
    cached = _snapshots.get(paths.home)
    if cached and cached[0] == stamp:
        return cached[1]
    recorded = _read(files[0])
    value: tuple[dict[str, list[str]], list[str]] = ({}, [])
    if recorded:
        try:
            settings = load_settings(paths.config)
            current = _current_paths(paths, settings)
            value = ({n: f for n, f in recorded.items() if current.get(n) == sorted(_resolved(f))},
                     list(settings.mcp.allowed_roots))
        except ConfigError:  # a config being edited: every recorded folder counts, only home is allowed
            value = (recorded, [])
    _snapshots[paths.home] = (stamp, value)
    return value


def _current_paths(paths: Paths, settings) -> dict[str, list[str]]:
    """Each configured collection's paths (config file and registry), resolved as the sources resolve them."""
    return {name: sorted(source_paths(entry)) for name, entry in declared(paths, settings, with_disabled=True).items()}


def _resolved(folders: list[str]) -> list[str]:
    return [str(Path(f).resolve()) for f in folders]


def _read(file: Path) -> dict[str, list[str]]:
    try:
        return _parse(file, file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise _unreadable(file, exc) from exc


def _parse(file: Path, text: str | None) -> dict[str, list[str]]:
    try:
        data = json.loads(text) if text is not None else {}
    except ValueError as exc:
        raise _unreadable(file, exc) from exc
    return {str(k): [str(p) for p in v] for k, v in (data.get("collections") or {}).items()}


def _unreadable(file: Path, exc: Exception) -> ConfigError:
    return ConfigError(f"Cannot read {file} ({exc}): it records the folders AI assistants added. Restore it, "
                       "or delete it (the collections it listed then count as the user's own).")


def _stamp(file: Path) -> tuple[int, int] | None:
    try:
        st = file.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size
