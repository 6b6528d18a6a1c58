"""What the filters offer: the collections the principal may see, their source types and tags, the people of the
people directory (for a principal who sees only some collections: those who appear in them), and relative dates;
counted again only when the index changed."""

from __future__ import annotations

import threading
from typing import Any

from rag_search.web.backend import Backend

TAGS_OFFERED = 200
DATES_OFFERED = ("today", "yesterday", "7d", "30d", "3m", "1y", "this week", "last week", "this month", "last month",
                 "this year", "last year")
_cache: dict[tuple, dict[str, Any]] = {}
_guard = threading.Lock()


def options(backend: Backend, allowed: frozenset[str] | None) -> dict[str, Any]:
    conn, directory = backend.store.conn, backend.people
    with backend.store.lock:
        stamp = (id(backend.store), conn.execute("PRAGMA data_version").fetchone()[0], conn.total_changes,
                 None if allowed is None else tuple(sorted(allowed)), id(directory))
        with _guard:
            if stamp in _cache:
                return _cache[stamp]
        found = _read(conn, allowed)
        found["people"] = _people(conn, directory, allowed)
    found["dates"] = DATES_OFFERED
    with _guard:
        _cache.clear()  # one index state at a time
        _cache[stamp] = found
    return found


def _read(conn, allowed: frozenset[str] | None) -> dict[str, Any]:
    ids = [r for r in conn.execute("SELECT id, name FROM collections ORDER BY name")
           if allowed is None or r[1] in allowed]
    marks, values = ",".join("?" * len(ids)), [r[0] for r in ids]
    if not ids:
        return {"collections": [], "types": [], "tags": []}
    types = [r[0] for r in conn.execute(f"SELECT DISTINCT source_type FROM items WHERE collection_id IN ({marks}) "
                                        "AND status = 'indexed' ORDER BY 1", values)]
    tags = [r[0] for r in conn.execute(
        "SELECT f.value FROM chunk_facets f JOIN chunks c ON c.id = f.chunk_id WHERE f.name = 'tag' AND "
        f"c.collection_id IN ({marks}) GROUP BY f.value ORDER BY count(DISTINCT c.item_id) DESC, 1 LIMIT ?",
        (*values, TAGS_OFFERED))]
    return {"collections": [r[1] for r in ids], "types": types, "tags": tags}


def _people(conn, directory, allowed: frozenset[str] | None) -> list[str]:
    """The directory's people; for a principal who sees only some collections, those named (by an identifier or
    their name) as an author or participant in them: the directory is the owner's address book."""
    people = directory.people if directory else []
    if allowed is None or not people:
        return sorted(p.name for p in people)
    ids = [r[0] for r in conn.execute("SELECT id, name FROM collections") if r[1] in allowed]
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    seen = " ".join(r[0] for r in conn.execute(
        f"SELECT DISTINCT f.value FROM chunk_facets f JOIN chunks c ON c.id = f.chunk_id WHERE f.name = 'participant' "
        f"AND c.collection_id IN ({marks}) UNION SELECT DISTINCT author FROM chunks WHERE collection_id IN ({marks}) "
        "AND author IS NOT NULL", (*ids, *ids))).lower()
    return sorted(p.name for p in people if any(i and i.lower() in seen for i in (*p.identifiers, p.name)))
