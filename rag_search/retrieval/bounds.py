"""Bounds on what a search may ask (query length, filter sizes, counts, spans), shared by the CLI and the MCP server.

The MCP server shows them in each tool's JSON schema (mcp/args.py) and refuses a value past them before any
work; the CLI and any other caller of the library check them here. Each bound is far above real use and below
what would cost seconds or break SQLite:

- MAX_QUERY_CHARS: the semantic side reads a query's first 256 word-pieces (the builtin model's window; about
  1,000 characters of English), the keyword side ORs every distinct word. 2,000 characters hold a long pasted
  paragraph or error message; a 1 MB query took 10-19 s and held the index lock from every other client.
- MAX_FILTER_VALUES: each tag, participant or metadata key is one more condition in every retriever's WHERE
  (SQLite's expression depth is 1,000; 10,000 tags failed); 50 is more than anyone combines.
- MAX_SUBQUERIES, MAX_SUBQUERY_CHARS, MAX_INTENT_CHARS: a query plan runs each sub-query as one search (the intent
  as one more), so 8 of at most 1,000 characters (what semantic search reads) cost at most 9 searches' time.
- MAX_BATCH_QUERIES: one rag_batch_search call answers up to 20 queries (each a search, under one lock; the output
  budget is shared among them).
- MAX_CONTEXT_CHUNKS: chunks before or after a hit that one context call returns.
- MAX_DAYS: 365,000 days (about 1,000 years) keeps date arithmetic inside the calendar (a 20-digit day count
  overflowed); older items are reached with an absolute date (date_from='1850').
"""

from __future__ import annotations

from rag_search.errors import QueryError

MAX_QUERY_CHARS = 2_000
MAX_TOP_K = 200  # hits per search (the engine's own limit)
MAX_DAYS = 365_000
MAX_FILTER_VALUES = 50  # collections, source types, tags, participants, metadata keys, values of one key
MAX_VALUE_CHARS = 200  # one collection name, source type, tag, author, participant, metadata key or value
MAX_PATH_CHARS = 4_096  # a path or item id (PATH_MAX on Linux)
MAX_SUBQUERIES = 8  # typed sub-queries of one query plan
MAX_SUBQUERY_CHARS = 1_000
MAX_INTENT_CHARS = 500
MAX_BATCH_QUERIES = 20
MAX_CONTEXT_CHUNKS = 10
MAX_DATE_CHARS = 64  # a date as written: '2024-03-15T10:00:00+01:00', 'last month', '3 days ago'


def check_query(query: str) -> str:
    """The query, or QueryError when it is longer than MAX_QUERY_CHARS (never echoing it)."""
    if len(query) > MAX_QUERY_CHARS:
        raise QueryError(f"The query is {len(query):,} characters long; at most {MAX_QUERY_CHARS:,} are searched "
                         "(semantic search reads about the first 1,000). Search with the words that matter, or "
                         "quote an exact phrase.")
    return query
