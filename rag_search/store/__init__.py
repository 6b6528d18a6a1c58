"""rag.db: schema, migrations, connection and every write (the only SQL that changes the index).

`open_store` opens the configured index: rag.db (embedded SQLite, the default) or, for a `postgresql://` URL
(`store:` in config.yaml), the same interface on a PostgreSQL server (rag_search.store.pg).
"""

from __future__ import annotations

from pathlib import Path

from rag_search.store.database import Store

__all__ = ["Store", "open_store", "is_url"]


def is_url(location: str | Path | None) -> bool:
    return isinstance(location, str) and location.startswith(("postgresql://", "postgres://"))


def open_store(location: str | Path, *, migrate: bool = True, indexing: bool = False) -> Store:
    """The index at `location`: a rag.db path, or a postgresql:// URL."""
    if is_url(location):
        from rag_search.store.pg.database import PgStore

        return PgStore.open(str(location), migrate=migrate, indexing=indexing)
    return Store.open(location, migrate=migrate, indexing=indexing)
