"""Hybrid retrieval: filters, keyword (FTS5), vector (sqlite-vec), fusion (RRF) and the engine."""

from rag_search.retrieval.engine import SearchEngine, SearchRequest, SearchResult
from rag_search.retrieval.filters import Filters, parse_date

__all__ = ["Filters", "SearchEngine", "SearchRequest", "SearchResult", "parse_date"]
