"""Items related to an item: nearest by the mean of its chunk vectors, plus its links and backlinks."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from rag_search.records import iso_utc
from rag_search.store import Store
from rag_search.store.vectors import as_blob, fetch_vectors

NEIGHBOURS = 200  # chunk neighbours fetched before grouping by item


def related_items(store: Store, item_id: int, top_k: int = 10, collection_ids: tuple[int, ...] = ()) -> dict[str, Any]:
    """Similar items (of the collections `collection_ids`, inside the KNN; all when empty), links and backlinks."""
    with store.lock:
        conn = store.conn
        chunk_ids = [r[0] for r in conn.execute("SELECT id FROM chunks WHERE item_id = ?", (item_id,))]
        similar: list[dict[str, Any]] = []
        recorded = store.embedder
        vecs = fetch_vectors(conn, chunk_ids, recorded[0]) if recorded else {}
        if vecs:
            centre = np.mean(np.stack(list(vecs.values())), axis=0)
            centre /= np.linalg.norm(centre) or 1.0
            rows = _neighbours(store, centre, collection_ids)
            best: dict[int, float] = {}
            for _, dist, other in sorted(rows, key=lambda r: r[1]):
                if other != item_id and other not in best:
                    best[other] = 1.0 - dist
            similar = [_item(conn, i) | {"similarity": round(s, 4)} for i, s in list(best.items())[:top_k]]
        return {"similar": similar, "links": _links(conn, item_id), "backlinks": _backlinks(conn, item_id)}


def _neighbours(store: Store, centre: np.ndarray, collection_ids: tuple[int, ...]) -> list[tuple[int, float, int]]:
    """(chunk id, cosine distance, item id) of the chunks nearest the centre (exact KNN), of the collections
    `collection_ids` (all when empty) inside the KNN."""
    only = f" AND v.collection_id IN ({','.join('?' * len(collection_ids))})" if collection_ids else ""
    if store.postgres:
        from rag_search.store.pg.connection import vector_text

        return store.conn.execute(
            "SELECT v.chunk_id, v.embedding <=> ?::vector AS d, c.item_id FROM chunk_vec v JOIN chunks c "
            f"ON c.id = v.chunk_id WHERE TRUE{only} ORDER BY d LIMIT ?",
            (vector_text(centre), *collection_ids, NEIGHBOURS)).fetchall()
    return store.conn.execute(
        "SELECT v.chunk_id, v.distance, c.item_id FROM chunk_vec v JOIN chunks c ON c.id = v.chunk_id "
        f"WHERE v.embedding MATCH ? AND k = ?{only}", (as_blob(centre), NEIGHBOURS, *collection_ids)).fetchall()


def _item(conn: Any, item_id: int) -> dict[str, Any]:
    r = conn.execute(
        "SELECT i.id, co.name, i.key, i.uri, i.title, (SELECT max(ts) FROM chunks WHERE item_id = i.id) "
        "FROM items i JOIN collections co ON co.id = i.collection_id WHERE i.id = ?", (item_id,)).fetchone()
    return {"item_id": r[0], "collection": r[1], "key": r[2], "uri": r[3], "title": r[4], "timestamp": iso_utc(r[5])}


def _names(key: str, title: str, metadata: str | None) -> set[str]:
    stem = key.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    names = {stem.lower(), key.rsplit(".", 1)[0].lower(), title.lower()}
    aliases = json.loads(metadata or "{}").get("aliases", [])
    return names | {a.lower() for a in aliases if isinstance(a, str)}


def _links(conn: Any, item_id: int) -> list[dict[str, Any]]:
    coll = conn.execute("SELECT collection_id FROM items WHERE id = ?", (item_id,)).fetchone()[0]
    out = []
    for (target,) in conn.execute("SELECT target FROM item_links WHERE item_id = ?", (item_id,)).fetchall():
        t = target.lower()
        row = conn.execute(
            "SELECT id FROM items WHERE collection_id = ? AND (lower(title) = ? OR lower(key) = ? OR lower(key) LIKE ? "
            "OR lower(key) = ?) ORDER BY length(key) LIMIT 1", (coll, t, t + ".md", "%/" + t + ".md", t)).fetchone()
        out.append(_item(conn, row[0]) if row else {"target": target, "resolved": False})
    return out


def _backlinks(conn: Any, item_id: int) -> list[dict[str, Any]]:
    key, title, coll = conn.execute("SELECT key, title, collection_id FROM items WHERE id = ?", (item_id,)).fetchone()
    meta = conn.execute("SELECT metadata FROM chunks WHERE item_id = ? LIMIT 1", (item_id,)).fetchone()
    names = _names(key, title, meta[0] if meta else None)
    marks = ",".join("?" * len(names))
    rows = conn.execute(
        f"SELECT DISTINCT l.item_id FROM item_links l JOIN items i ON i.id = l.item_id "
        f"WHERE i.collection_id = ? AND lower(l.target) IN ({marks}) AND l.item_id != ?", (coll, *names, item_id)).fetchall()
    return [_item(conn, r[0]) for r in rows]
