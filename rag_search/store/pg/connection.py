"""A psycopg connection that takes the store's SQLite-flavoured statements: `?` parameters, LIKE, id lists.

The store's shared SQL (writes, item states, filters, hydration) is written once with `?` placeholders; this
wrapper rewrites the few SQLite idioms it uses into their PostgreSQL equivalents before psycopg sees them:
`?` -> `%s` (a literal `%` doubled), LIKE -> ILIKE (SQLite's LIKE ignores ASCII case), `INDEXED BY name`
dropped (a SQLite planner hint), and `(SELECT value FROM json_each(?))` over a JSON list of ids -> the same
list read by jsonb_array_elements_text. Vectors (pgvector `vector`) are read as float32 numpy arrays. Every statement
is planned for its own parameters (_CUSTOM_PLANS).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Iterable, Sequence

import numpy as np

from rag_search.errors import StoreError

_JSON_IDS = "(SELECT value FROM json_each(?))"
_PG_IDS = "(SELECT value::bigint FROM jsonb_array_elements_text(?::jsonb))"
_INDEXED_BY = re.compile(r"\s+INDEXED BY \w+")
_LIKE = re.compile(r"(?<![A-Za-z_])LIKE(?![A-Za-z_])")
# psycopg prepares a statement run 5 times; PostgreSQL then plans it once for any parameters when that generic plan
# looks cheaper. Without the tsquery a full-text statement's generic plan guesses a word's rows (5,003) and ANDs the
# GIN bitmap of `tsv @@ $1` with the other conditions: for a common word (400k rows at 1M chunks) a best-chunk lookup
# among 4 items took 112-140 ms instead of 0.5. Each statement is planned for its own parameters instead.
_CUSTOM_PLANS = "SET plan_cache_mode = force_custom_plan"
_FIX = ("Check that the server is running and reachable, that the URL's user, password and database are right, "
        "and that the pgvector extension is installed on the server (`CREATE EXTENSION vector` must work).")


@lru_cache(maxsize=512)
def translate(sql: str) -> str:
    """A statement of the store's SQLite dialect as PostgreSQL runs it (see the module docstring)."""
    sql = _INDEXED_BY.sub("", sql.replace(_JSON_IDS, _PG_IDS))
    sql = _LIKE.sub("ILIKE", sql)
    return sql.replace("%", "%%").replace("?", "%s")


class PgConnection:
    """The subset of a DB-API connection the store uses, over one psycopg connection in autocommit mode
    (transactions are explicit: PgStore.transaction)."""

    dialect = "postgres"

    def __init__(self, raw: Any):
        self.raw = raw
        self.index_scans = False  # inside pg_keyword.index_scans: full-text reads through the GIN indexes
        self.word_stats: Any = None  # retrieval/pg/word_stats.py's, read on first use (they outlive index changes)

    @classmethod
    def connect(cls, url: str) -> PgConnection:
        try:
            import psycopg
        except ImportError as exc:
            raise StoreError("A PostgreSQL store needs psycopg: `pip install 'local-rag[postgres]'`.") from exc
        try:
            raw = psycopg.connect(url, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            raise StoreError(f"Cannot connect to the PostgreSQL store {redact(url)}: {exc}. {_FIX}") from exc
        raw.execute(_CUSTOM_PLANS)
        return cls(raw)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.raw.execute(translate(sql), tuple(params))

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        rows = [tuple(r) for r in rows]
        if rows:
            with self.raw.cursor() as cur:
                cur.executemany(translate(sql), rows)

    def script(self, sql: str) -> None:
        """Several statements without parameters (the schema), sent as they are."""
        self.raw.execute(sql)

    def register_vector(self) -> None:
        """Read pgvector's `vector` as float32 numpy arrays (its text form '[1,2,3]')."""
        from psycopg.adapt import Loader

        row = self.raw.execute("SELECT oid FROM pg_type WHERE typname = 'vector'").fetchone()
        if row is None:
            return

        class VectorLoader(Loader):
            def load(self, data: Any) -> np.ndarray:
                return np.array(bytes(data)[1:-1].split(b","), dtype=np.float32)

        self.raw.adapters.register_loader(row[0], VectorLoader)

    def close(self) -> None:
        self.raw.close()


def vector_text(vector: np.ndarray) -> str:
    """A vector as pgvector's text input ('[0.1,0.2,...]'), exact for float32 (9 significant digits)."""
    return "[" + ",".join(f"{x:.9g}" for x in np.asarray(vector, dtype=np.float32).tolist()) + "]"


def redact(url: str) -> str:
    """The URL without its password (for messages and `status`)."""
    return re.sub(r"(postgres(?:ql)?://[^:/@]*):[^@/]*@", r"\1:***@", url)
