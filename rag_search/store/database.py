"""The Store: one open rag.db with its schema current and its embedder identity checked."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from rag_search.errors import NotFound, StoreError
from rag_search.store import migrations, vectors
from rag_search.store.connection import INDEXING_MEMORY, SEARCH_MEMORY, connect


class Store:
    """A connection to rag.db plus the few facts every caller needs (path, embedder dims)."""

    postgres = False  # rag_search.store.pg.PgStore: the same interface on a PostgreSQL server

    def __init__(self, conn: Any, path: Path | str):
        self.conn = conn
        self.path = str(path)
        self.lock = threading.RLock()
        self._collection_ids: dict[str, int] = {}

    @classmethod
    def open(cls, path: Path | str, *, migrate: bool = True, indexing: bool = False) -> Store:
        """`indexing`: the connection of an indexing run (a small page cache, no memory map)."""
        conn = connect(path, memory=INDEXING_MEMORY if indexing else SEARCH_MEMORY)
        store = cls(conn, path)
        if migrate:
            with store.lock:
                migrations.migrate(conn)
        elif migrations.pending(conn):
            raise StoreError(f"The index at {path} needs a schema upgrade. Run `local-rag doctor --fix`.")
        return store

    closed = False

    def close(self) -> None:
        """Under the lock: a background reader of this connection (the server's bit matrix) never runs a statement
        on it while it closes (that crashed the process)."""
        with self.lock:
            self.closed = True
            self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """One write transaction: all of it lands, or none of it."""
        with self.lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")

    # -- embedder identity -------------------------------------------------------------------

    def bind_embedder(self, embedder_id: str, dims: int) -> None:
        """Check the index's embedder; on a fresh index, record it and create the vector table."""
        with self.lock:
            vectors.check_embedder(self.conn, embedder_id, dims, self.path)
            if vectors.has_vector_table(self.conn) and vectors.recorded_embedder(self.conn):
                return
            with self.transaction() as conn:
                vectors.record_embedder(conn, embedder_id, dims)
                vectors.create_vector_table(conn, dims)

    @property
    def embedder(self) -> tuple[str, int] | None:
        return vectors.recorded_embedder(self.conn)

    # -- collections -------------------------------------------------------------------------

    def collection_id(self, name: str) -> int:
        if name not in self._collection_ids:
            row = self.conn.execute("SELECT id FROM collections WHERE name = ?", (name,)).fetchone()
            if row is None:
                raise NotFound(f"No collection named '{name}'. {self.known_collections_hint()}")
            self._collection_ids[name] = row[0]
        return self._collection_ids[name]

    def known_collections_hint(self) -> str:
        names = [r[0] for r in self.conn.execute("SELECT name FROM collections ORDER BY name")]
        if not names:
            return "The index has no collections yet; index a folder first: `local-rag index project NAME PATH`."
        return "Known collections: " + ", ".join(names) + " (`local-rag collections list`)."

    def forget_collection(self, name: str) -> None:
        self._collection_ids.pop(name, None)

