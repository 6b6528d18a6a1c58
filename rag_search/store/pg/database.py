"""PgStore: the Store interface over a PostgreSQL database (one connection; the schema created on open)."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator

from rag_search.store import vectors
from rag_search.store.database import Store
from rag_search.store.pg import schema
from rag_search.store.pg import writes as pg_writes
from rag_search.store.pg.connection import PgConnection, redact


class PgStore(Store):
    """A Store whose tables live on a PostgreSQL server with pgvector. `path` is the URL without its password."""

    postgres = True

    def __init__(self, conn: PgConnection, url: str):
        super().__init__(conn, redact(url))
        self.url = url
        self.lock = threading.RLock()

    @classmethod
    def open(cls, url: str, *, migrate: bool = True, indexing: bool = False) -> PgStore:  # type: ignore[override]
        conn = PgConnection.connect(url)
        schema.migrate(conn)  # idempotent: creates what is missing, never rewrites
        conn.register_vector()
        return cls(conn, url)

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """One write transaction: all of it lands, or none of it; searches see a new generation after it."""
        with self.lock:
            with self.conn.raw.transaction():
                yield self.conn
            self.conn.execute("SELECT nextval('store_generation')")

    def generation(self) -> int:
        """A number that changes after every committed write by any process (a sequence: never blocks writers)."""
        return self.conn.execute("SELECT last_value + CASE WHEN is_called THEN 1 ELSE 0 END "
                                 "FROM store_generation").fetchone()[0]

    def bind_embedder(self, embedder_id: str, dims: int) -> None:
        with self.lock:
            vectors.check_embedder(self.conn, embedder_id, dims, self.path)
            if schema.has_vector_table(self.conn) and vectors.recorded_embedder(self.conn):
                return
            # two processes binding at once: one creates the table. The lock is taken before the transaction
            # starts, so that transaction's catalog lookups see a table the other one committed meanwhile.
            self.conn.execute("SELECT pg_advisory_lock(727002)")
            try:
                with self.transaction() as conn:
                    if schema.has_vector_table(conn):
                        return
                    pg_writes.record_embedder(conn, embedder_id, dims)
                    schema.create_vector_table(conn, dims)
            finally:
                self.conn.execute("SELECT pg_advisory_unlock(727002)")
