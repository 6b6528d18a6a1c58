"""Code groups: the config's `code_groups: {group: [repo paths]}` as collections, and what `index group` selects.

Each repository is a collection named after its folder, holding a `code` source (rag_pipelines/sources/git.py)
with its files and, with `git_history_in_months` above 0, its commits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping


def group_collections(settings, taken: set[str]) -> dict[str, dict]:
    """code_groups {group: [repo paths]} → one collection per repository, named after its folder.

    A folder name that several repositories share, or that another collection has, gets its group appended
    (`api-work`), then a number while that is taken. Each collection holds the repository's files and, with
    git_history_in_months above 0, its commits of that many months; its chunks carry the group (metadata
    `group`, and a tag).
    """
    entries = [(str(group), Path(p).expanduser()) for group, paths in (settings.code_groups or {}).items()
               for p in (paths or [])]
    counts: dict[str, int] = {}
    for _, path in entries:
        counts[path.name] = counts.get(path.name, 0) + 1
    out: dict[str, dict] = {}
    for group, path in entries:
        base = path.name or "repository"
        name = base if counts[base] == 1 and base not in taken else f"{base}-{group}"
        n = 2
        while name in out or name in taken:
            name, n = f"{base}-{group}-{n}", n + 1
        source = {"type": "code", "path": str(path), "group": group, "history_months": settings.git_history_in_months}
        out[name] = {"kind": "project", "description": f"Git repository {path} (code group {group})",
                     "sources": [source]}
    return out


def code_collections(collections: Mapping, group: str | None = None) -> list[str]:
    """Names of the collections made from code groups (of one group); ConfigError when there are none."""
    from rag_search.errors import ConfigError

    found = [n for n, c in collections.items() if any(s.type == "code" and (group is None or s.group == group)
                                                      for s in c.sources)]
    if not found:
        groups = sorted({s.group for c in collections.values() for s in c.sources if s.type == "code" and s.group})
        what = f"code group named '{group}'" if group else "code group"
        raise ConfigError(f"No {what} is configured (groups: {', '.join(groups) or 'none'}). Add repositories under "
                          "`code_groups: {group: [paths]}` in config.yaml.")
    return found


def file_keys(cfg, store) -> list[str]:
    """Every file key of a code collection, indexed or on disk (not its commits): `index group` without --history."""
    from rag_search.store import reads

    from rag_pipelines.indexing.scan import open_sources
    from rag_pipelines.sources.base import SourceUnavailable

    keys = set(reads.item_states(store, cfg.name))
    sources = [s for s in open_sources(cfg) if hasattr(s, "file_keys")]  # the git sources (sources/git.py)
    for src in sources:
        try:
            keys |= set(src.file_keys())
        except SourceUnavailable:
            continue  # the sync reports it
    return sorted(k for k in keys if not any(s.owns(k) and s.is_commit(k) for s in sources))
