"""The chunks' rows a search shows and its reranker reads, each read once per query.

A hit needs its chunk's row (text, title, headings, its item's key and address, its collection's name); the reranker
reads the same chunks' texts first. Both take them from one per-query cache (`Retrieved.rows`), so the hits read only
the rows the reranker did not (100k bench: of the ~30 rows a search's hits show, ~9 are read again instead of all).
"""

from __future__ import annotations

import functools
import json
from typing import Any

ROW_SQL = ("SELECT c.id, c.item_id, coll.name, i.source_type, i.key, i.uri, c.title, c.text, c.idx, "
           "c.heading_path, c.page, c.ts, c.author, c.tags, c.metadata FROM chunks c "
           "JOIN items i ON i.id = c.item_id JOIN collections coll ON coll.id = c.collection_id "
           "WHERE c.id IN (SELECT value FROM json_each(?))")
TITLE, TEXT, HEADING_PATH = 6, 7, 9  # columns of a row


def rows(conn: Any, chunk_ids: list[int], cache: dict[int, tuple]) -> dict[int, tuple]:
    """The rows of `chunk_ids` that exist, by id; those `cache` lacks are read in one statement and kept there."""
    missing = [c for c in dict.fromkeys(chunk_ids) if c not in cache]
    if missing:
        for r in conn.execute(ROW_SQL, (json.dumps(missing),)).fetchall():
            cache[r[0]] = r
    return {c: cache[c] for c in chunk_ids if c in cache}


@functools.lru_cache(maxsize=4096)
def heading(path_json: str) -> str:
    """A chunk's heading path as the reranker reads it ("A > B"); many chunks share one."""
    return " > ".join(json.loads(path_json))
