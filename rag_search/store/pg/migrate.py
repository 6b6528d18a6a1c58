"""`local-rag migrate-store`: copy a rag.db into an empty PostgreSQL store, vectors included (nothing re-embedded).

Rows keep their ids, so item ids in links, names and the embedding cache stay valid. Everything lands in one
transaction: a failure leaves the PostgreSQL store as it was. The rag.db is only read. The copy is analyzed at the end:
the keyword side tells common words from rare ones by those statistics (retrieval/pg/word_stats.py), and counts
every word's rows until autovacuum would have sampled it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from rag_search.errors import StoreError
from rag_search.store.names import MAX_NAMES
from rag_search.store import migrations
from rag_search.store.connection import connect
from rag_search.store.pg import schema
from rag_search.store.pg import writes as pg_writes
from rag_search.store.pg.connection import vector_text
from rag_search.store.pg.database import PgStore
from rag_search.store.vectors import from_blob, has_vector_table, recorded_embedder

# (table, columns) copied as they are, parents first
TABLES = [
    ("collections", "id, name, kind, description, created_at"),
    ("items", "id, collection_id, source_type, key, uri, title, size, mtime_ns, sha256, status, error_kind, error, "
              "failed_at, indexed_at, stamp, source"),
    ("chunks", "id, item_id, collection_id, idx, title, text, heading_path, page, ts, author, participants, tags, "
               "metadata, content_hash, keywords"),
    ("chunk_facets", "chunk_id, name, value"),
    ("embedding_cache", "id, embedder_id, text_hash, vector"),
    ("item_links", "item_id, target"),
    ("item_texts", "item_id, text"),
    ("source_scans", "collection_id, source, type, matched, problems, scanned_at, seconds, error"),
]
IDENTITY = ("collections", "items", "chunks", "embedding_cache")


@dataclass
class MigrationReport:
    rows: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


def migrate_store(db_path: Path | str, url: str, progress: Callable[[str], None] | None = None) -> MigrationReport:
    """Copy every row of the rag.db at `db_path` into the empty PostgreSQL store at `url`."""
    t0, report = time.perf_counter(), MigrationReport()
    src = _open_source(db_path)
    target = PgStore.open(url)
    try:
        _check_empty(target)
        embedder = recorded_embedder(src)
        with target.transaction() as conn:
            for table, columns in TABLES:
                report.rows[table] = _copy(conn, table, columns, src.execute(f"SELECT {columns} FROM {table}"))
                _say(progress, f"{table}: {report.rows[table]:,} rows")
            report.rows["item_names"] = _copy(conn, "item_names", "id, item_id, name, kind", (
                (rowid, rowid // MAX_NAMES, name, kind) for rowid, name, kind in
                src.execute("SELECT rowid, name, kind FROM item_names")))
            conn.execute(schema.ITEM_DOC_SQL.format(where="TRUE"))
            if embedder is not None:
                pg_writes.record_embedder(conn, *embedder)
                report.rows["chunk_vec"] = _copy_vectors(conn, src, embedder[1])
                _say(progress, f"vectors: {report.rows['chunk_vec']:,}; indexing their sign bits")
            for table in IDENTITY:
                conn.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                             f"(SELECT COALESCE(max(id), 0) + 1 FROM {table}), false)")
        _say(progress, "sampling the tables (ANALYZE)")
        target.conn.execute("ANALYZE")  # the first searches get the planner's and the word statistics (pg/word_stats)
        report.seconds = round(time.perf_counter() - t0, 2)
        return report
    finally:
        target.close()
        src.close()


def _open_source(db_path: Path | str) -> Any:
    if not Path(db_path).is_file():
        raise StoreError(f"No index at {db_path}. Say which rag.db to copy: `local-rag migrate-store --from PATH`.")
    conn = connect(db_path, readonly=True)
    if migrations.pending(conn):
        conn.close()
        raise StoreError(f"The index at {db_path} needs a schema upgrade first: run `local-rag doctor --fix` "
                         "with LOCAL_RAG_DB pointing at it, then migrate-store again.")
    return conn


def _check_empty(target: PgStore) -> None:
    (items,) = target.conn.execute("SELECT count(*) FROM collections").fetchone()
    if items or schema.has_vector_table(target.conn):
        raise StoreError(f"The PostgreSQL store {target.path} is not empty ({items} collections). migrate-store "
                         "copies into an empty database: create a new one (CREATE DATABASE ...) and point the URL at it.")


def _copy(conn: Any, table: str, columns: str, rows: Iterable[tuple]) -> int:
    n = 0
    with conn.raw.cursor() as cur, cur.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
            n += 1
    return n


def _copy_vectors(conn: Any, src: Any, dims: int) -> int:
    schema.create_vector_table(conn, dims, index=False)
    if not has_vector_table(src):
        return 0
    rows = src.execute("SELECT chunk_id, collection_id, embedding FROM chunk_vec")
    n = _copy(conn, "chunk_vec", "chunk_id, collection_id, embedding",
              ((cid, coll, vector_text(from_blob(blob))) for cid, coll, blob in rows))
    schema.create_vector_index(conn, dims)
    return n


def _say(progress: Callable[[str], None] | None, message: str) -> None:
    if progress:
        progress(message)
