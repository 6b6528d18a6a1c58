"""local-rag's search side: the store, the embedders, hybrid retrieval and the interfaces (no Dagster)."""

from rag_search import privacy  # noqa: F401  (first: telemetry off before any library loads)

__version__ = "0.1.0"
