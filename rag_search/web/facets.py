"""What the filters offer: the collections the principal may see, their source types and tags, the people of the
people directory, and relative dates; counted again only when the index changed."""

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
    conn = backend.store.conn
    with backend.store.lock:
        stamp = (id(backend.store), conn.execute("PRAGMA data_version").fetchone()[0], conn.total_changes,
                 None if allowed is None else tuple(sorted(allowed)))
        with _guard:
            if stamp in _cache:
                return _cache[stamp]
        found = _read(conn, allowed)
    found["people"] = sorted(p.name for p in (backend.people.people if backend.people else []))
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
