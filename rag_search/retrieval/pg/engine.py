"""The hybrid engine on the PostgreSQL store: SearchEngine's stages (fusion, pinning, reranking, hits) unchanged,
its retrievers answered by Postgres full-text (pg_keyword) and pgvector (pg_vector) with the same filters."""

from __future__ import annotations

import math

from rag_search.retrieval.pg import keyword as pg_keyword
from rag_search.retrieval.pg import vector as pg_vector
from rag_search.retrieval.engine import SearchEngine, SearchResult
from rag_search.retrieval.filters import Filters, SqlFilter, build_where
from rag_search.retrieval.parallel import SecondConnection
from rag_search.retrieval.keyword import KeywordRun, Term
from rag_search.retrieval.rerank import _stem, query_words


class PgSearchEngine(SearchEngine):
    name_lookups = pg_keyword.NameLookups()
    scoped_stats = False  # word statistics are the whole store's (docs/server.md says so); corpus is always None

    def __init__(self, store, embedder, settings=None, reranker=None, long_running: bool = False):
        """long_running (a server): a second connection runs the vector side beside the keyword side, and in
        keyword-only searches the whole-item ranking beside the chunks' (retrieval/parallel.py)."""
        super().__init__(store, embedder, settings, reranker, bits_in_ram=False)
        self.second = SecondConnection(store) if long_running else None

    def _beside_ok(self) -> bool:
        return self.second is not None and self.second.available()

    def _items_beside(self, terms, where: SqlFilter, limit: int, n_items: int, hybrid: bool):
        if hybrid or not self._beside_ok():  # hybrid: the vector side has the second connection
            return None

        def rank(conn):
            with pg_keyword.index_scans(conn):
                return pg_keyword.search(conn, terms, where, limit, n_items, self._df_cache, pg_keyword.ITEMS)

        return self.second.submit(rank)

    def _stamp(self) -> tuple[int, int]:
        if self._now is not None:  # read at the start of this search
            return self._now
        return self.store.generation(), 0

    def _keyword(self, terms, filters, coll_ids, limit: int, result: SearchResult, got) -> None:
        with pg_keyword.index_scans(self.store.conn):  # one transaction for the stage's full-text statements
            super()._keyword(terms, filters, coll_ids, limit, result, got)

    def _keyword_chunks(self, terms, where: SqlFilter, limit: int, n_total: int, hybrid: bool, corpus=None) -> KeywordRun:
        return pg_keyword.search(self.store.conn, terms, where, limit, n_total, self._df_cache, pg_keyword.CHUNKS,
                                 may_skip=hybrid)

    def _keyword_items(self, terms, where: SqlFilter, limit: int, n_items: int, hybrid: bool, corpus=None) -> KeywordRun:
        return pg_keyword.search(self.store.conn, terms, where, limit, n_items, self._df_cache, pg_keyword.ITEMS,
                                 may_skip=hybrid)

    def item_df(self, term: Term) -> int:
        return pg_keyword.df(self.store.conn, term, self._df_cache, pg_keyword.ITEMS)

    def _exact_items(self, terms, where: SqlFilter) -> dict[int, list[str]]:
        return pg_keyword.exact_items(self.store.conn, terms, where, self.settings.exact_max_items, self._df_cache)

    def _knn(self, qvec, filters: Filters, coll_ids, limit: int, scope: int, eid: str | None = None,
             vectors: dict | None = None) -> tuple[list[tuple[int, float]], bool]:
        return pg_vector.knn(self._vconn, qvec, limit, scope, coll_ids, build_where(filters.without_collections()))

    def _idf(self, query: str) -> dict[str, float]:
        n_items, conn = self._items_count(), self.store.conn
        with pg_keyword.index_scans(conn):
            df = {w: pg_keyword.df(conn, Term(w), self._df_cache, pg_keyword.ITEMS) for w in query_words(query)}
        return {_stem(w): math.log(1 + n_items / max(n, 1)) for w, n in df.items()}

    def _best_chunks(self, item_ids: list[int], terms, where: SqlFilter, result: SearchResult) -> dict[int, int]:
        expr = result.keyword_expression or pg_keyword.expression(terms)
        return pg_keyword.best_chunks(self.store.conn, item_ids, expr, where)
