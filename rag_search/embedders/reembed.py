"""Re-embedding: switch the index to another embedder from the stored chunks, without re-reading sources.

New vectors go through the embedding cache batch by batch (an interrupted run resumes where it
stopped); the switch itself — new vector table, new recorded embedder — is one transaction, so
searches see either the old index or the new one, never a mix.

Chunks were cut to fit the old embedder's window. Those longer than the new one's (multilingual-e5-small's
400-token chunks under MiniLM's 256 word-pieces) would lose their tail from the vector, so their items are
marked changed: the next sync of their sources chunks them again for the new window.
"""

from __future__ import annotations

from typing import Any, Callable

from rag_search.embedders.base import Embedder, Progress
from rag_search.embedders.cached import embed_texts
from rag_search.records import text_hash
from rag_search.store import Store, vectors
from rag_search.store.vectors import from_blob

BATCH = 256
SPECIAL_TOKENS = 2  # the places the model's own tokens take in its window (as the chunker reserves)


def reembed(store: Store, embedder: Embedder, progress: Progress | None = None,
            total: Callable[[int], None] | None = None) -> dict[str, int]:
    """Embed every distinct chunk text with `embedder` and make it the index's embedder."""
    rows = store.conn.execute("SELECT DISTINCT text, content_hash FROM chunks").fetchall()
    texts = [text for text, h in rows if text_hash(text) == h]
    # chunks whose vector was made from other text than they store (file-path ingest) need their source
    # re-read, and so do chunks too long for the new window: their items are marked changed, so the next sync
    # re-indexes them
    cap = embedder.max_input_tokens - SPECIAL_TOKENS
    foreign = [h for text, h in rows if text_hash(text) != h]
    too_long = [text_hash(t) for t in texts if embedder.count_tokens(t) > cap]
    if total:
        total(len(texts))
    embedded = 0
    for start in range(0, len(texts), BATCH):
        _, fresh = embed_texts(store, embedder, texts[start : start + BATCH], progress)
        embedded += fresh
    with store.transaction() as conn:
        insert = _new_vector_table(store, conn, embedder)
        rows = conn.execute(
            "SELECT c.id, c.collection_id, e.vector FROM chunks c JOIN embedding_cache e "
            "ON e.embedder_id = ? AND e.text_hash = c.content_hash",
            (embedder.id,),
        ).fetchall()
        insert(conn, ((cid, coll, from_blob(v)) for cid, coll, v in rows))
        again = foreign + too_long
        for start in range(0, len(again), 500):
            part = again[start : start + 500]
            conn.execute(f"UPDATE items SET stamp = NULL, sha256 = NULL WHERE id IN (SELECT item_id FROM chunks "
                         f"WHERE content_hash IN ({','.join('?' * len(part))}))", part)
    return {"texts": len(texts), "embedded": embedded, "reused": len(texts) - embedded, "vectors": len(rows),
            "too_long": len(too_long)}


def _new_vector_table(store: Store, conn: Any, embedder: Embedder) -> Callable:
    """An empty vector table for the embedder's dimensions, recorded as the index's embedder; the inserter."""
    if store.postgres:
        from rag_search.store.pg import writes as pg_writes

        pg_writes.reset_vectors(conn, embedder.id, embedder.dimensions)
        return pg_writes.insert_vectors
    vectors.drop_vector_table(conn)
    vectors.create_vector_table(conn, embedder.dimensions)
    vectors.record_embedder(conn, embedder.id, embedder.dimensions)
    return vectors.insert_vectors
