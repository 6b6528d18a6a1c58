"""The sign-bit HNSW index of the PostgreSQL store is built with the memory its graph needs
(schema.create_vector_index): with the server's default (64 MB) pgvector builds a graph of more than ~86k rows on
disk, far slower."""

from __future__ import annotations

import uuid

import pytest
from postgres_server import fresh_database

from rag_search.store import open_store
from rag_search.store.pg import schema

pytestmark = pytest.mark.postgres


def test_the_index_build_gets_memory_for_its_rows_in_its_transaction_only(postgres_url, monkeypatch):
    monkeypatch.setattr(schema, "GRAPH_BYTES_PER_ROW", 1 << 20)  # scaled up: 100 rows "need" 100 MB
    with open_store(fresh_database(postgres_url, f"t_{uuid.uuid4().hex[:12]}")) as store:
        conn = store.conn
        default = conn.execute("SELECT current_setting('maintenance_work_mem')").fetchone()[0]
        conn.execute("INSERT INTO collections(name, created_at) VALUES ('c', 'now')")
        with conn.raw.transaction():
            schema.create_vector_table(conn, 8, index=False)
            conn.execute("INSERT INTO items(id, collection_id, source_type, key, uri) SELECT 1, id, 't', 'k', 'u' "
                         "FROM collections")
            conn.execute("INSERT INTO chunks(id, item_id, collection_id, idx, text, content_hash) SELECT g, 1, 1, g, "
                         "'x', 'h' FROM generate_series(1, 100) g")
            conn.execute("INSERT INTO chunk_vec SELECT g, 1, ('[' || array_to_string(array_fill(g % 3 - 1, "
                         "ARRAY[8]), ',') || ']')::vector FROM generate_series(1, 100) g")
            schema.create_vector_index(conn, 8)
            assert conn.execute("SELECT current_setting('maintenance_work_mem')").fetchone()[0] == "100MB"
        assert conn.execute("SELECT current_setting('maintenance_work_mem')").fetchone()[0] == default
        assert conn.execute("SELECT to_regclass('chunk_vec_bits') IS NOT NULL").fetchone()[0]
