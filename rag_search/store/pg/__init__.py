"""The index on a PostgreSQL server (pgvector + Postgres full-text) behind the same Store interface as rag.db.

Chosen by `store: postgresql://...` in config.yaml; psycopg is imported only when such a store is opened.
"""
