"""Hybrid retrieval: filters, keyword (FTS5), vector (sqlite-vec), fusion (RRF) and the engine."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rag_search.retrieval.engine import SearchEngine, SearchRequest, SearchResult
from rag_search.retrieval.filters import Filters, parse_date

if TYPE_CHECKING:
    from rag_search.config import SearchSettings
    from rag_search.embedders.base import Embedder
    from rag_search.retrieval.rerank import Reranker
    from rag_search.store import Store

__all__ = ["Filters", "SearchEngine", "SearchRequest", "SearchResult", "parse_date", "search_engine"]


def search_engine(store: Store, embedder: Embedder | None, settings: SearchSettings | None = None,
                  reranker: Reranker | None = None, bits_in_ram: bool = False) -> SearchEngine:
    """The engine for a store: rag.db's, or the PostgreSQL store's (rag_search.retrieval.pg.engine)."""
    if store.postgres:
        from rag_search.retrieval.pg.engine import PgSearchEngine

        return PgSearchEngine(store, embedder, settings, reranker, long_running=bits_in_ram)
    return SearchEngine(store, embedder, settings, reranker, bits_in_ram=bits_in_ram)
