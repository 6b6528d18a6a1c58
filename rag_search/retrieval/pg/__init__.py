"""The hybrid engine's retrievers on the PostgreSQL store: full text and pgvector."""
