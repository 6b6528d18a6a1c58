"""local-rag's search side: the store, the embedders, hybrid retrieval and the interfaces (no Dagster)."""

__version__ = "0.1.0"
