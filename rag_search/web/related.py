"""Items beside an item on its page: the notes it links to and that link to it, similar items (retrieval.related),
and the rest of its mail thread or chat conversation; only from collections the principal may see.

A mail's thread is its `thread` metadata, else the messages it replies to and that reply to it (message ids); a
chat window's conversation is the windows whose key shares its conversation part (`<conversation>/<start>~<id>`).
"""

from __future__ import annotations

import json
from typing import Any

from rag_search.records import iso_utc
from rag_search.retrieval.related import related_items
from rag_search.web.backend import Backend

SIMILAR = 6
NEIGHBOURS = 4  # windows of a conversation shown before and after this one
THREAD_MAX = 30


def related(backend: Backend, item_id: int, allowed: frozenset[str] | None) -> dict[str, list[dict[str, Any]]]:
    """Similar items are found among the allowed collections only (inside the KNN: never fewer because of items
    the principal cannot see); links and backlinks are the item's own collection's."""
    found = related_items(backend.store, item_id, SIMILAR, collection_ids=_ids(backend, allowed))

    def seen(rows: list[dict]) -> list[dict]:
        return [r for r in rows if r.get("item_id") and (allowed is None or r.get("collection") in allowed)]

    with backend.store.lock:
        thread = _thread(backend.store.conn, item_id)
    return {"links": seen(found["links"]), "backlinks": seen(found["backlinks"]), "thread": thread,
            "similar": seen(found["similar"])}


def _ids(backend: Backend, allowed: frozenset[str] | None) -> tuple[int, ...]:
    """The allowed collections' ids (() for all; a principal allowed none gets an id no collection has)."""
    if allowed is None:
        return ()
    with backend.store.lock:
        ids = [r[0] for r in backend.store.conn.execute("SELECT id, name FROM collections") if r[1] in allowed]
    return tuple(ids) or (-1,)


def _thread(conn, item_id: int) -> list[dict[str, Any]]:
    """The other items of its mail thread or chat conversation, oldest first (same collection, so same access)."""
    row = conn.execute("SELECT i.collection_id, i.source_type, i.key, c.metadata FROM items i LEFT JOIN chunks c ON "
                       "c.item_id = i.id AND c.idx = 0 WHERE i.id = ?", (item_id,)).fetchone()
    if row is None:
        return []
    coll, kind, key, meta = row[0], row[1], row[2], json.loads(row[3] or "{}")
    if kind == "chat" and "/" in key:
        return _conversation(conn, coll, item_id, key.rsplit("/", 1)[0] + "/")
    if kind == "email":
        return _mail_thread(conn, coll, item_id, meta)
    return []


def _conversation(conn, coll: int, item_id: int, prefix: str) -> list[dict[str, Any]]:
    """The windows just before and after this one in the same conversation (not its threads' windows)."""
    base = ("SELECT i.id FROM items i WHERE i.collection_id = ? AND substr(i.key, 1, ?) = ? "
            "AND instr(substr(i.key, ? + 1), '/') = 0 AND i.status = 'indexed' AND i.id != ? AND i.key {} ? "
            "ORDER BY i.key {} LIMIT ?")
    key = conn.execute("SELECT key FROM items WHERE id = ?", (item_id,)).fetchone()[0]
    args = (coll, len(prefix), prefix, len(prefix), item_id, key, NEIGHBOURS)
    before = [r[0] for r in conn.execute(base.format("<", "DESC"), args)][::-1]
    after = [r[0] for r in conn.execute(base.format(">", "ASC"), args)]
    return [_item(conn, i) | {"when": "before"} for i in before] + [_item(conn, i) | {"when": "after"} for i in after]


def _mail_thread(conn, coll: int, item_id: int, meta: dict[str, Any]) -> list[dict[str, Any]]:
    pairs = [("meta.thread", meta.get("thread")), ("meta.message_id", meta.get("in_reply_to")),
             ("meta.in_reply_to", meta.get("message_id"))]
    pairs = [(name, str(value)) for name, value in pairs if value]
    if not pairs:
        return []
    where = " OR ".join("(f.name = ? AND f.value = ?)" for _ in pairs)
    rows = conn.execute(
        f"SELECT c.item_id, min(c.ts) AS t FROM chunk_facets f JOIN chunks c ON c.id = f.chunk_id WHERE ({where}) "
        "AND c.collection_id = ? AND c.item_id != ? GROUP BY c.item_id ORDER BY t LIMIT ?",
        (*[v for pair in pairs for v in pair], coll, item_id, THREAD_MAX)).fetchall()
    return [_item(conn, r[0]) for r in rows]


def _item(conn, item_id: int) -> dict[str, Any]:
    r = conn.execute("SELECT i.id, co.name, i.title, i.key, (SELECT min(ts) FROM chunks WHERE item_id = i.id) "
                     "FROM items i JOIN collections co ON co.id = i.collection_id WHERE i.id = ?", (item_id,)).fetchone()
    return {"item_id": r[0], "collection": r[1], "title": r[2] or r[3], "timestamp": iso_utc(r[4])}
