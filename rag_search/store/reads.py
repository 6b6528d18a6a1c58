"""Read-only questions about the index: collections, counts, failures, one item's text."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from typing import Any

from rag_search.errors import NotFound
from rag_search.keys import path_key
from rag_search.records import chunk_body, iso_utc
from rag_search.store import migrations
from rag_search.store.database import Store
from rag_search.store.vectors import recorded_embedder


@dataclass(frozen=True)
class CollectionSummary:
    name: str
    kind: str
    description: str
    items: int
    indexed: int
    failed: int
    chunks: int
    last_indexed: str | None
    created_at: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Failure:
    collection: str
    key: str
    uri: str
    error_kind: str
    message: str
    failed_at: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def list_collections(store: Store) -> list[CollectionSummary]:
    rows = store.conn.execute(
        """
        SELECT co.name, co.kind, co.description, co.created_at,
               (SELECT count(*) FROM items i WHERE i.collection_id = co.id),
               (SELECT count(*) FROM items i WHERE i.collection_id = co.id AND i.status = 'indexed'),
               (SELECT count(*) FROM items i WHERE i.collection_id = co.id AND i.status = 'failed'),
               (SELECT count(*) FROM chunks c WHERE c.collection_id = co.id),
               (SELECT max(indexed_at) FROM items i WHERE i.collection_id = co.id)
        FROM collections co ORDER BY co.name
        """
    ).fetchall()
    return [
        CollectionSummary(name=r[0], kind=r[1], description=r[2], created_at=r[3], items=r[4], indexed=r[5],
                          failed=r[6], chunks=r[7], last_indexed=r[8])
        for r in rows
    ]


def collection_info(store: Store, name: str, samples: int = 5) -> dict[str, Any]:
    summary = next((c for c in list_collections(store) if c.name == name), None)
    if summary is None:
        raise NotFound(f"No collection named '{name}'. {store.known_collections_hint()}")
    coll_id = store.collection_id(name)
    by_type = dict(
        store.conn.execute(
            "SELECT source_type, count(*) FROM items WHERE collection_id = ? GROUP BY source_type ORDER BY 2 DESC",
            (coll_id,),
        ).fetchall()
    )
    titles = [
        r[0]
        for r in store.conn.execute(
            "SELECT title FROM items WHERE collection_id = ? AND status = 'indexed' AND title != '' "
            "ORDER BY indexed_at DESC, id DESC LIMIT ?",
            (coll_id, samples),
        )
    ]
    return {
        **summary.to_dict(),
        "items_by_source_type": by_type,
        "sample_titles": titles,
        "failures": [f.to_dict() for f in failures(store, collection=name, limit=20)],
    }


def failures(store: Store, collection: str | None = None, limit: int = 50,
             within: tuple[str, ...] | None = None) -> list[Failure]:
    """The newest failed items (of one collection; of the collections `within` when given)."""
    sql = (
        "SELECT co.name, i.key, i.uri, COALESCE(i.error_kind, 'error'), COALESCE(i.error, ''), i.failed_at "
        "FROM items i JOIN collections co ON co.id = i.collection_id WHERE i.status = 'failed'"
    )
    params: list[Any] = []
    if collection:
        sql += " AND co.name = ?"
        params.append(collection)
    if within is not None:
        sql += f" AND co.name IN ({','.join('?' * len(within))})"
        params.extend(within)
    sql += " ORDER BY i.failed_at DESC, i.id DESC LIMIT ?"
    rows = store.conn.execute(sql, (*params, limit)).fetchall()
    return [Failure(*r) for r in rows]


@dataclass(frozen=True)
class ItemState:
    key: str
    uri: str
    size: int | None
    mtime_ns: int | None
    sha256: str | None
    status: str
    stamp: str | None = None
    source: str | None = None


def item_states(store: Store, collection: str) -> dict[str, ItemState]:
    """What the index knows of each item of a collection: the basis of change detection."""
    try:
        coll_id = store.collection_id(collection)
    except NotFound:
        return {}
    rows = store.conn.execute(
        "SELECT key, uri, size, mtime_ns, sha256, status, stamp, source FROM items WHERE collection_id = ?", (coll_id,)
    )
    return {r[0]: ItemState(*r) for r in rows}


def source_scans(store: Store, collection: str | None = None) -> list[dict[str, Any]]:
    """Each source's last scan (items matched, problems, error) and what the index holds from it."""
    sql = (
        "SELECT co.name, s.source, s.type, s.matched, s.problems, s.scanned_at, s.seconds, s.error, "
        "(SELECT count(*) FROM items i WHERE i.collection_id = s.collection_id AND i.source = s.source "
        " AND i.status = 'indexed'), "
        "(SELECT count(*) FROM items i WHERE i.collection_id = s.collection_id AND i.source = s.source "
        " AND i.status = 'failed'), "
        "(SELECT count(*) FROM chunks c JOIN items i ON i.id = c.item_id WHERE i.collection_id = s.collection_id "
        " AND i.source = s.source) "
        "FROM source_scans s JOIN collections co ON co.id = s.collection_id"
    )
    params: tuple = ()
    if collection:
        sql, params = sql + " WHERE co.name = ?", (collection,)
    names = ("collection", "source", "type", "matched", "problems", "scanned_at", "scan_seconds", "error",
             "indexed", "failed", "chunks")
    return [dict(zip(names, r)) for r in store.conn.execute(sql + " ORDER BY co.name, s.source", params)]


def knowledge_stats(store: Store) -> list[dict[str, Any]]:
    """Per collection and source: items, chunks, the items' own date range, last indexed, failures, last scan."""
    conn = store.conn
    items = conn.execute(
        "SELECT co.name, coalesce(i.source, ''), min(i.source_type), count(*), "
        "sum(CASE WHEN i.status = 'indexed' THEN 1 ELSE 0 END), sum(CASE WHEN i.status = 'failed' THEN 1 ELSE 0 END), max(i.indexed_at) FROM items i JOIN collections co ON co.id = i.collection_id "
        "GROUP BY co.id, i.source"
    ).fetchall()
    chunks = {(r[0], r[1]): r[2:] for r in conn.execute(
        "SELECT co.name, coalesce(i.source, ''), count(*), min(c.ts), max(c.ts) FROM chunks c "
        "JOIN items i ON i.id = c.item_id JOIN collections co ON co.id = c.collection_id GROUP BY co.id, i.source"
    )}
    scans = {(s["collection"], s["source"]): s for s in source_scans(store)}
    out = []
    for name, source, source_type, n, indexed, failed, last in items:
        n_chunks, first, newest = chunks.get((name, source), (0, None, None))
        scan = scans.get((name, source), {})
        out.append({
            "collection": name, "source": source or None, "type": scan.get("type") or source_type,
            "items": n, "indexed": indexed or 0, "failed": failed or 0, "chunks": n_chunks,
            "from": iso_utc(first), "to": iso_utc(newest), "last_indexed": last,
            "last_scan": scan.get("scanned_at"), "source_error": scan.get("error"),
        })
    return sorted(out, key=lambda r: (r["collection"], r["source"] or ""))


def status(store: Store) -> dict[str, Any]:
    """Everything `local-rag status` shows."""
    collections = list_collections(store)
    embedder = recorded_embedder(store.conn)
    if store.postgres:  # the database's size on the server; its schema is created whole when opened
        db_bytes, pending = store.conn.execute("SELECT pg_database_size(current_database())").fetchone()[0], []
    else:
        db_bytes = sum(os.path.getsize(store.path + ext) for ext in ("", "-wal") if os.path.exists(store.path + ext))
        pending = migrations.pending(store.conn)
    return {
        "db_path": store.path,
        "db_bytes": db_bytes,
        "schema_version": migrations.SCHEMA_VERSION,
        "pending_migrations": pending,
        "embedder": {"id": embedder[0], "dimensions": embedder[1]} if embedder else None,
        "collections": [c.to_dict() for c in collections],
        "totals": {
            "collections": len(collections),
            "items": sum(c.items for c in collections),
            "chunks": sum(c.chunks for c in collections),
            "failed": sum(c.failed for c in collections),
        },
        "last_indexed": max((c.last_indexed for c in collections if c.last_indexed), default=None),
        "recent_failures": [f.to_dict() for f in failures(store, limit=10)],
        "sources": source_scans(store),
    }


def find_item(store: Store, path_or_id: str, collection: str | None = None,
              within: tuple[str, ...] | None = None) -> tuple[int, str]:
    """(item id, collection) of an *indexed item* named by id, key or path; never touches the file system.

    Only rows of the items table can match, so no path (traversal, symlink, anything) reaches a file; with
    `within`, only items of those collections (the others are as if not indexed).
    """
    ref = str(path_or_id).strip()
    params: list[Any] = []
    where = "1 = 1"
    if collection:
        where, params = "co.name = ?", [collection]
        store.collection_id(collection)  # unknown collection → NotFound listing the known ones
    if within is not None:
        where += f" AND co.name IN ({','.join('?' * len(within))})"
        params.extend(within)
    base = f"SELECT i.id, co.name FROM items i JOIN collections co ON co.id = i.collection_id WHERE {where} AND "
    candidates = []
    if ref.removeprefix("item:").isdigit():
        candidates = store.conn.execute(base + "i.id = ?", (*params, int(ref.removeprefix("item:")))).fetchall()
    if not candidates:
        expanded = os.path.expanduser(ref)
        candidates = store.conn.execute(base + "(i.uri = ? OR i.key IN (?, ?))",  # a relative path is its key
                                        (*params, expanded, ref, path_key(ref))).fetchall()
    if not candidates:
        raise NotFound(f"'{ref}' is not an indexed item. Use a path or key from search results, or an item id "
                       "(search first, e.g. rag_search / `local-rag search`).")
    if len(candidates) > 1:
        names = ", ".join(sorted(c for _, c in candidates))
        raise NotFound(f"'{ref}' names items in several collections ({names}); say which collection.")
    return candidates[0]


def get_document(store: Store, path_or_id: str, collection: str | None = None) -> dict[str, Any]:
    """One indexed item with its full text as written (stored at indexing; the source is not read).

    Items indexed before texts were stored get their text rebuilt from chunks (context lines and overlaps
    removed) until they are re-indexed.
    """
    item_id, coll = find_item(store, path_or_id, collection)
    row = store.conn.execute(
        "SELECT key, uri, title, source_type, status, indexed_at FROM items WHERE id = ?", (item_id,)
    ).fetchone()
    chunks = store.conn.execute(
        "SELECT text, title, heading_path, page, ts, tags, metadata FROM chunks WHERE item_id = ? ORDER BY idx",
        (item_id,),
    ).fetchall()
    stored = store.conn.execute("SELECT text FROM item_texts WHERE item_id = ?", (item_id,)).fetchone()
    text = stored[0] if stored else _join_without_overlap([chunk_body(text, title) for text, title, *_ in chunks])
    first = chunks[0] if chunks else None
    return {
        "item_id": item_id, "collection": coll, "key": row[0], "uri": row[1], "title": row[2],
        "source_type": row[3], "status": row[4], "indexed_at": row[5], "chunks": len(chunks),
        "timestamp": iso_utc(first[4]) if first else None,
        "tags": json.loads(first[5]) if first else [], "metadata": json.loads(first[6]) if first else {},
        "text": text,
    }


def _join_without_overlap(parts: list[str], max_overlap: int = 2000) -> str:
    out: list[str] = []
    for part in parts:
        if out:
            prev = out[-1]
            for n in range(min(len(prev), len(part), max_overlap), 20, -1):
                if prev.endswith(part[:n]):
                    part = part[n:].lstrip()
                    break
        if part:
            out.append(part)
    return "\n\n".join(out)


def recent_items(store: Store, collection: str | None = None, days: int = 7, limit: int = 20,
                 within: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """Items dated (or, if undated, indexed) within the last `days`, newest first (of the collections `within`)."""
    since = int(time.time()) - days * 86400
    params: list[Any] = []
    where = ""
    if collection:
        params.append(store.collection_id(collection))
        where = " AND i.collection_id = ?"
    indexed = ("CAST(extract(epoch FROM i.indexed_at::timestamptz) AS BIGINT)" if store.postgres
               else "CAST(strftime('%s', i.indexed_at) AS INTEGER)")
    when = f"COALESCE(max(c.ts), {indexed})"
    if within is not None:
        params.extend(within)
        where += f" AND co.name IN ({','.join('?' * len(within))})"
    rows = store.conn.execute(
        "SELECT i.id, co.name, i.key, i.uri, i.title, i.source_type, "
        f"{when} AS t "
        "FROM items i JOIN collections co ON co.id = i.collection_id LEFT JOIN chunks c ON c.item_id = i.id "
        f"WHERE i.status = 'indexed'{where} GROUP BY i.id, co.name HAVING {when} >= ? ORDER BY t DESC LIMIT ?",
        (*params, since, limit),
    ).fetchall()
    return [{"item_id": r[0], "collection": r[1], "key": r[2], "uri": r[3], "title": r[4], "source_type": r[5],
             "timestamp": iso_utc(r[6])} for r in rows]


def metadata_values(store: Store, per_key: int = 25) -> dict[str, dict[str, list[str]]]:
    """Per collection, the metadata keys and their most frequent values (what filters can use)."""
    rows = store.conn.execute(
        "SELECT co.name, substr(f.name, 6), f.value, count(*) AS n FROM chunk_facets f "
        "JOIN chunks c ON c.id = f.chunk_id JOIN collections co ON co.id = c.collection_id "
        "WHERE f.name LIKE 'meta.%' GROUP BY 1, 2, 3 ORDER BY 1, 2, n DESC, 3"
    ).fetchall()
    out: dict[str, dict[str, list[str]]] = {}
    for coll, key, value, _ in rows:
        values = out.setdefault(coll, {}).setdefault(key, [])
        if len(values) < per_key:
            values.append(value)
    return out


def tag_counts(store: Store, limit: int = 200) -> list[tuple[str, int]]:
    return store.conn.execute(
        "SELECT value, count(DISTINCT c.item_id) FROM chunk_facets f JOIN chunks c ON c.id = f.chunk_id "
        "WHERE f.name = 'tag' GROUP BY value ORDER BY 2 DESC, 1 LIMIT ?", (limit,)
    ).fetchall()
