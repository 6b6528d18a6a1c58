"""A long-running server's second, read-only connection to the index and its thread: work beside the index's own
connection within one search (SQLite lets go of the GIL while a statement runs, numpy while it computes).

- SplitRanker: a keyword-only search ranks the matches of very common words in two rowid halves at once. FTS5
  scores every row an expression matches (~1.5 us a row: a word in half of 100k chunks is ~50k rows, 60-70 ms on
  one core); the best `limit` of both halves by (score, rowid) are exactly the whole statement's rows, since BM25's
  statistics (rows, average length, each phrase's row count) are the whole table's in either half.
- The engine's hybrid search runs its vector side (sign bits, rescoring; pgvector on PostgreSQL) here while its
  keyword side runs on the index's connection (engine.retrieve); on PostgreSQL a keyword-only search ranks whole
  items here while chunks are ranked there (pg/engine.py).
"""

from __future__ import annotations

import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable

from rag_search.retrieval.filters import SqlFilter
from rag_search.retrieval.keyword import CHUNKS, keyword_sql

_TOP = {CHUNKS: "SELECT max(id) FROM chunks"}  # chunks_fts's rowid is the chunk's id, items_fts's the item's
_ITEMS_TOP = "SELECT max(id) FROM items"


class SecondConnection:
    """Opened on first use, read-only; one thread runs what is given to it (one search at a time: the store's
    lock is held by the caller)."""

    def __init__(self, store: Any):
        self.store = store
        self.connection: Any = None  # open once used (tests count its statements too)
        self._pool: ThreadPoolExecutor | None = None
        self.failed = False  # it could not be opened (an in-memory index): callers work on the index's connection

    def available(self) -> bool:
        if self.connection is None and not self.failed:
            try:
                self.connection = _open(self.store)
            except Exception:
                self.failed = True
                return False
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="index-beside")
            weakref.finalize(self, _close, self.connection, self._pool)
        return self.connection is not None

    def submit(self, fn: Callable, *args: Any) -> Future:
        """fn(connection, *args) in the thread; call available() first."""
        assert self._pool is not None
        return self._pool.submit(fn, self.connection, *args)


class SplitRanker:
    """keyword.search's `split`: ranks an expression's matches in two rowid halves, one per connection, at once."""

    def __init__(self, second: SecondConnection):
        self.second = second

    def __call__(self, table: str, where: SqlFilter, expression: str, limit: int) -> list:
        main = self.second.store.conn
        top = main.execute(_TOP.get(table, _ITEMS_TOP)).fetchone()[0] or 0
        if top < 2 or not self.second.available():
            return main.execute(keyword_sql(where, table), (expression, *where.params, limit)).fetchall()
        sql, mid = keyword_sql(where, table, rowids=True), top // 2
        upper = self.second.submit(lambda conn: conn.execute(sql, (expression, mid, top, *where.params, limit))
                                   .fetchall())
        lower = main.execute(sql, (expression, -1, mid, *where.params, limit)).fetchall()
        return sorted(lower + upper.result(), key=lambda r: (r[1], r[0]))[:limit]


def _open(store: Any) -> Any:
    if store.postgres:
        from rag_search.store.pg.connection import PgConnection

        conn = PgConnection.connect(store.url)
        conn.register_vector()
        return conn
    from rag_search.store.connection import connect

    return connect(store.path, readonly=True)


def _close(conn: Any, pool: ThreadPoolExecutor) -> None:
    pool.shutdown(wait=False)
    conn.close()
