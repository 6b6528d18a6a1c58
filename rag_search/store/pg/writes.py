"""The writes whose SQL differs on PostgreSQL: vectors (pgvector), an item's whole-text row and its names.

Everything else an item write does (items, chunks, facets, links, texts) is rag.db's own SQL
(rag_search.store.writes), run through PgConnection.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from rag_search.store.names import item_names
from rag_search.store.pg.connection import vector_text
from rag_search.store.pg.schema import ITEM_DOC_SQL, create_vector_table, name_id


def insert_vectors(conn: Any, rows: Iterable[tuple[int, int, np.ndarray]]) -> None:
    """rows: (chunk_id, collection_id, vector)."""
    conn.executemany("INSERT INTO chunk_vec(chunk_id, collection_id, embedding) VALUES (?, ?, ?::vector)",
                     ((cid, coll, vector_text(v)) for cid, coll, v in rows))


def write_item_text(conn: Any, item_id: int) -> None:
    conn.execute("DELETE FROM item_docs WHERE item_id = ?", (item_id,))
    conn.execute(ITEM_DOC_SQL.format(where="i.id = ?"), (item_id,))


def write_item_names(conn: Any, item_id: int, title: str, key: str, source_type: str, metadata: dict,
                     authors: tuple[str, ...] = ()) -> None:
    conn.execute("DELETE FROM item_names WHERE item_id = ?", (item_id,))
    conn.executemany("INSERT INTO item_names(id, item_id, name, kind) VALUES (?, ?, ?, ?)",
                     [(name_id(item_id, n), item_id, name, kind) for n, (name, kind) in
                      enumerate(item_names(title, key, source_type, metadata, authors))])


def reset_vectors(conn: Any, embedder_id: str, dims: int) -> None:
    """An empty vector table for another embedder (`local-rag reembed`), recorded in meta."""
    conn.execute("DROP TABLE IF EXISTS chunk_vec")
    record_embedder(conn, embedder_id, dims)  # first: the index is centred as the embedder needs
    create_vector_table(conn, dims)


def record_embedder(conn: Any, embedder_id: str, dims: int) -> None:
    """The index's embedder, and the centre its sign bits are taken from (if the embedder has one)."""
    from rag_search.embedders.centres import bits_centre_of

    upsert = "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
    conn.executemany(upsert, [("embedder_id", embedder_id), ("dimensions", str(dims))])
    centre = bits_centre_of(embedder_id)
    if centre is None:
        conn.execute("DELETE FROM meta WHERE key = 'bits_centre'")
    else:
        conn.execute(upsert, ("bits_centre", vector_text(centre)))
