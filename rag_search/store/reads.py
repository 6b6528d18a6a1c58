"""Read-only questions about the index: collections, counts, failures, one item's text."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

from rag_search.errors import NotFound
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


def failures(store: Store, collection: str | None = None, limit: int = 50) -> list[Failure]:
    sql = (
        "SELECT co.name, i.key, i.uri, COALESCE(i.error_kind, 'error'), COALESCE(i.error, ''), i.failed_at "
        "FROM items i JOIN collections co ON co.id = i.collection_id WHERE i.status = 'failed'"
    )
    params: list[Any] = []
    if collection:
        sql += " AND co.name = ?"
        params.append(collection)
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


def item_states(store: Store, collection: str) -> dict[str, ItemState]:
    """What the index knows of each item of a collection: the basis of change detection."""
    try:
        coll_id = store.collection_id(collection)
    except NotFound:
        return {}
    rows = store.conn.execute(
        "SELECT key, uri, size, mtime_ns, sha256, status FROM items WHERE collection_id = ?", (coll_id,)
    )
    return {r[0]: ItemState(*r) for r in rows}


def status(store: Store) -> dict[str, Any]:
    """Everything `local-rag status` shows."""
    collections = list_collections(store)
    embedder = recorded_embedder(store.conn)
    db_bytes = sum(os.path.getsize(store.path + ext) for ext in ("", "-wal") if os.path.exists(store.path + ext))
    return {
        "db_path": store.path,
        "db_bytes": db_bytes,
        "schema_version": migrations.SCHEMA_VERSION,
        "pending_migrations": migrations.pending(store.conn),
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
    }
