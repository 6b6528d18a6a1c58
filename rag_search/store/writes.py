"""Every write to rag.db: collections, one item's chunks and vectors in one transaction, failures, deletes."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Iterable, Sequence

import numpy as np

from rag_search.errors import StoreError
from rag_search.records import Chunk, Fingerprint, ItemRef, dumps
from rag_search.store import vectors
from rag_search.store.database import Store
from rag_search.store.derived_rows import chunk_keywords, write_item_names, write_item_text


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def ensure_collection(store: Store, name: str, kind: str = "project", description: str = "") -> int:
    """Create the collection if it is new; update kind/description if given. Returns its id."""
    with store.transaction() as conn:
        conn.execute(
            "INSERT INTO collections(name, kind, description, created_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(name) DO UPDATE SET kind = excluded.kind, "
            "description = CASE WHEN excluded.description = '' THEN collections.description ELSE excluded.description END",
            (name, kind, description, now_iso()),
        )
    return store.collection_id(name)


def delete_collection(store: Store, name: str) -> int:
    """Remove a collection with its items, chunks, FTS rows and vectors. Returns the items removed."""
    coll_id = store.collection_id(name)
    with store.transaction() as conn:
        (n_items,) = conn.execute("SELECT count(*) FROM items WHERE collection_id = ?", (coll_id,)).fetchone()
        conn.execute("DELETE FROM chunks WHERE collection_id = ?", (coll_id,))
        conn.execute("DELETE FROM collections WHERE id = ?", (coll_id,))
    store.forget_collection(name)
    return n_items


def replace_item(
    store: Store,
    ref: ItemRef,
    fingerprint: Fingerprint | None,
    title: str,
    chunks: Sequence[Chunk],
    vecs: np.ndarray,
    links: Iterable[str] = (),
    text: str | None = None,
) -> int:
    """Replace one item's chunks, facets, links, vectors and whole-item text in one transaction; mark it indexed.

    `text` is the item as written (what rag_get_document returns); None stores none (file-path ingest).
    """
    if len(chunks) != len(vecs):
        raise StoreError(f"{ref.uri}: {len(chunks)} chunks but {len(vecs)} vectors; nothing was written.")
    if len(chunks) and store.embedder is None:
        raise StoreError("No embedder is bound to this index; call Store.bind_embedder first.")
    coll_id = store.collection_id(ref.collection)
    with store.transaction() as conn:
        item_id = _upsert_item(conn, coll_id, ref, fingerprint, title, status="indexed")
        conn.execute("DELETE FROM chunks WHERE item_id = ?", (item_id,))
        conn.execute("DELETE FROM item_links WHERE item_id = ?", (item_id,))
        chunk_ids = [_insert_chunk(conn, item_id, coll_id, ch) for ch in chunks]
        ops = _dialect(store)
        ops.insert_vectors(conn, zip(chunk_ids, [coll_id] * len(chunk_ids), vecs))
        conn.executemany(
            "INSERT INTO item_links(item_id, target) VALUES (?, ?)", [(item_id, t) for t in dict.fromkeys(links)]
        )
        ops.write_item_text(conn, item_id)
        first = chunks[0] if chunks else None
        ops.write_item_names(conn, item_id, title, ref.key, ref.source_type, first.metadata if first else {},
                         first.participants if first else ())
        conn.execute("DELETE FROM item_texts WHERE item_id = ?", (item_id,))
        if text is not None:
            conn.execute("INSERT INTO item_texts(item_id, text) VALUES (?, ?)", (item_id, text))
    return item_id


def _dialect(store: Store) -> Any:
    """The module holding the writes whose SQL differs by store: this one (rag.db) or the PostgreSQL store's."""
    if store.postgres:
        from rag_search.store.pg import writes as pg_writes

        return pg_writes
    return _SQLITE


class _SQLITE:  # noqa: N801  (rag.db's dialect of the writes above)
    insert_vectors = staticmethod(vectors.insert_vectors)
    write_item_text = staticmethod(write_item_text)
    write_item_names = staticmethod(write_item_names)


def _upsert_item(
    conn: Any, coll_id: int, ref: ItemRef, fp: Fingerprint | None, title: str, status: str
) -> int:
    size, mtime, sha, stamp = (fp.size, fp.mtime_ns, fp.sha256, fp.change_stamp) if fp else (None,) * 4
    indexed_at = now_iso() if status == "indexed" else None
    row = conn.execute(
        "INSERT INTO items(collection_id, source_type, key, uri, title, size, mtime_ns, sha256, stamp, source, "
        "status, error_kind, error, failed_at, indexed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, NULL, ?) "
        "ON CONFLICT(collection_id, key) DO UPDATE SET source_type = excluded.source_type, uri = excluded.uri, "
        "title = excluded.title, size = excluded.size, mtime_ns = excluded.mtime_ns, sha256 = excluded.sha256, "
        "stamp = excluded.stamp, source = excluded.source, "
        "status = excluded.status, error_kind = NULL, error = NULL, failed_at = NULL, "
        "indexed_at = COALESCE(excluded.indexed_at, items.indexed_at) RETURNING id",
        (coll_id, ref.source_type, ref.key, ref.uri, title, size, mtime, sha, stamp, ref.source, status, indexed_at),
    ).fetchone()
    return row[0]


def _insert_chunk(conn: Any, item_id: int, coll_id: int, ch: Chunk) -> int:
    (chunk_id,) = conn.execute(
        "INSERT INTO chunks(item_id, collection_id, idx, title, text, heading_path, page, ts, author, "
        "participants, tags, metadata, content_hash, keywords) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "RETURNING id",
        (
            item_id, coll_id, ch.index, ch.title, ch.text, dumps(list(ch.heading_path)), ch.page, ch.ts,
            ch.author, dumps(list(ch.participants)), dumps(list(ch.tags)), dumps(ch.metadata), ch.content_hash,
            chunk_keywords(ch.keywords, ch.title, ch.text),
        ),
    ).fetchone()
    conn.executemany(
        "INSERT INTO chunk_facets(chunk_id, name, value) VALUES (?, ?, ?)",
        [(chunk_id, name, value) for name, value in facets(ch)],
    )
    return chunk_id


MAX_FACET_VALUE = 200  # characters: longer values are text, not something to filter on
MAX_META_FACET_KEYS = 64  # metadata keys of one chunk that become filters
MAX_VALUES_PER_KEY = 50  # values of one list-valued key (and tags, participants) that become filters


def facets(ch: Chunk) -> list[tuple[str, str]]:
    """The filterable values of a chunk: tags (lower-cased), participants, and scalar metadata.

    Bounded, so one hostile item cannot write millions of rows: short values only, at most
    MAX_META_FACET_KEYS metadata keys and MAX_VALUES_PER_KEY values per key.
    """
    out = {("tag", t.lstrip("#").lower()) for t in _short(ch.tags) if t.strip("#")}
    out |= {("participant", p) for p in _short(ch.participants) if p}
    for key, value in list(ch.metadata.items())[:MAX_META_FACET_KEYS]:
        if len(str(key)) > MAX_FACET_VALUE:
            continue
        values = value if isinstance(value, (list, tuple)) else [value]
        for v in values[:MAX_VALUES_PER_KEY]:
            if isinstance(v, (str, int, float, bool)) and str(v) != "" and len(str(v)) <= MAX_FACET_VALUE:
                out.add((f"meta.{key}", str(v).lower() if isinstance(v, bool) else str(v)))
    return sorted(out)


def _short(values) -> list[str]:
    return [v for v in list(values)[: MAX_VALUES_PER_KEY * 4] if isinstance(v, str) and len(v) <= MAX_FACET_VALUE]


def mark_failed(
    store: Store, ref: ItemRef, error_kind: str, message: str, fingerprint: Fingerprint | None = None
) -> int:
    """Record that an item could not be indexed; its previous chunks (if any) stay searchable."""
    coll_id = store.collection_id(ref.collection)
    with store.transaction() as conn:
        row = conn.execute(
            "INSERT INTO items(collection_id, source_type, key, uri, source, status, error_kind, error, failed_at, "
            "size, mtime_ns, sha256, stamp) VALUES (?, ?, ?, ?, ?, 'failed', ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(collection_id, key) DO UPDATE SET status = 'failed', error_kind = excluded.error_kind, "
            "error = excluded.error, failed_at = excluded.failed_at, uri = excluded.uri, source = excluded.source, "
            "stamp = COALESCE(excluded.stamp, items.stamp) RETURNING id",
            (
                coll_id, ref.source_type, ref.key, ref.uri, ref.source, error_kind, message, now_iso(),
                *((fingerprint.size, fingerprint.mtime_ns, fingerprint.sha256, fingerprint.change_stamp)
                  if fingerprint else (None,) * 4),
            ),
        ).fetchone()
    return row[0]


def touch_item(store: Store, collection: str, key: str, stamp: str, size: int | None = None,
               mtime_ns: int | None = None, uri: str | None = None) -> None:
    """Record a new change stamp (and size/mtime, and where it now lives) for an item whose content (sha256)
    did not change: a touched file, or a file of a folder that moved (`--replace`)."""
    coll_id = store.collection_id(collection)
    with store.transaction() as conn:
        conn.execute("UPDATE items SET stamp = ?, size = COALESCE(?, size), mtime_ns = COALESCE(?, mtime_ns), "
                     "uri = COALESCE(?, uri) WHERE collection_id = ? AND key = ?",
                     (stamp, size, mtime_ns, uri, coll_id, key))


def record_scan(store: Store, collection: str, source: str, type_: str, matched: int, problems: int,
                seconds: float, error: str | None = None) -> None:
    """Remember a source's last scan: items matched, or why it could not be read."""
    coll_id = store.collection_id(collection)
    with store.transaction() as conn:
        conn.execute(
            "INSERT INTO source_scans(collection_id, source, type, matched, problems, scanned_at, seconds, error) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(collection_id, source) DO UPDATE SET type = excluded.type, "
            "matched = CASE WHEN excluded.error IS NULL THEN excluded.matched ELSE source_scans.matched END, "
            "problems = excluded.problems, scanned_at = excluded.scanned_at, seconds = excluded.seconds, "
            "error = excluded.error",
            (coll_id, source, type_, matched, problems, now_iso(), round(seconds, 3), error))


def delete_items(store: Store, collection: str, keys: Sequence[str]) -> int:
    """Remove items by key with their chunks, FTS rows and vectors. Returns how many existed."""
    coll_id = store.collection_id(collection)
    removed = 0
    with store.transaction() as conn:
        for key in keys:
            row = conn.execute("SELECT id FROM items WHERE collection_id = ? AND key = ?", (coll_id, key)).fetchone()
            if row is None:
                continue
            conn.execute("DELETE FROM chunks WHERE item_id = ?", (row[0],))
            conn.execute("DELETE FROM items WHERE id = ?", (row[0],))
            removed += 1
    return removed
