"""Ranking many full-text matches in two halves at once (a long-running server's keyword-only searches).

FTS5 scores every row an expression matches (~1.5 us a row): a word in half of 100k chunks is ~50k rows, 60-70 ms
on one core. A second, read-only connection ranks the upper half of the rowids while the index's own connection
ranks the lower half (SQLite lets go of the GIL while a statement runs); the best `limit` of both halves by
(score, rowid) are exactly the whole statement's rows, since BM25's statistics (rows, average length, each
phrase's row count) are the whole table's in either half.
"""

from __future__ import annotations

import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rag_search.retrieval.filters import SqlFilter
from rag_search.retrieval.keyword import CHUNKS, keyword_sql

_TOP = {CHUNKS: "SELECT max(id) FROM chunks"}  # chunks_fts's rowid is the chunk's id, items_fts's the item's
_ITEMS_TOP = "SELECT max(id) FROM items"


class SplitRanker:
    """keyword.search's `split`: ranks an expression's matches in two rowid halves, one per connection, at once."""

    def __init__(self, store: Any):
        self.store = store
        self._conn: Any = None
        self._pool: ThreadPoolExecutor | None = None
        self.failed = False  # a second connection could not be opened: rank in one statement

    def __call__(self, table: str, where: SqlFilter, expression: str, limit: int) -> list:
        sql = keyword_sql(where, table, rowids=True)
        main = self.store.conn
        top = main.execute(_TOP.get(table, _ITEMS_TOP)).fetchone()[0] or 0
        other = self._other()
        if other is None or top < 2:
            return main.execute(keyword_sql(where, table), (expression, *where.params, limit)).fetchall()
        mid = top // 2
        upper = self._pool.submit(lambda: other.execute(sql, (expression, mid, top, *where.params, limit)).fetchall())
        lower = main.execute(sql, (expression, -1, mid, *where.params, limit)).fetchall()
        return sorted(lower + upper.result(), key=lambda r: (r[1], r[0]))[:limit]

    def _other(self) -> Any:
        """The second connection (opened once; read-only)."""
        if self._conn is None and not self.failed:
            from rag_search.store.connection import connect

            try:
                self._conn = connect(self.store.path, readonly=True)
            except Exception:  # an in-memory or vanished index: one statement does it
                self.failed = True
                return None
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fts-half")
            weakref.finalize(self, _close, self._conn, self._pool)
        return self._conn

    @property
    def connection(self) -> Any:
        """The second connection if open (tests count its statements too)."""
        return self._conn


def _close(conn: Any, pool: ThreadPoolExecutor) -> None:
    pool.shutdown(wait=False)
    conn.close()
