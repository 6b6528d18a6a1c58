"""rag.db: schema, migrations, connection and every write (the only SQL that changes the index)."""

from rag_search.store.database import Store

__all__ = ["Store"]
