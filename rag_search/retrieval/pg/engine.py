"""The hybrid engine on the PostgreSQL store: SearchEngine's stages (fusion, pinning, reranking, hits) unchanged,
its retrievers answered by Postgres full-text (pg_keyword) and pgvector (pg_vector) with the same filters."""

from __future__ import annotations

import math
import threading

from rag_search.retrieval.engine import FACET_IDS_MAX, SearchEngine, SearchResult
from rag_search.retrieval.filters import Filters, SqlFilter, build_where
from rag_search.retrieval.keyword import KeywordRun, Term
from rag_search.retrieval.parallel import SecondConnection
from rag_search.retrieval.pg import keyword as pg_keyword
from rag_search.retrieval.pg import vector as pg_vector
from rag_search.retrieval.pg.common_words import PgCommonWords
from rag_search.retrieval.rerank import _stem, query_words


class PgSearchEngine(SearchEngine):
    name_lookups = pg_keyword.NameLookups()
    scoped_stats = False  # word statistics are the whole store's (docs/server.md says so); corpus is always None

    def __init__(self, store, embedder, settings=None, reranker=None, long_running: bool = False):
        """long_running (a server): a second connection runs the vector side beside the keyword side, and in
        keyword-only searches the whole-item ranking beside the chunks' (retrieval/parallel.py); the index's most
        common words are held in RAM (pg/common_words.py)."""
        super().__init__(store, embedder, settings, reranker, bits_in_ram=False)
        self.second = SecondConnection(store) if long_running else None
        self.common_words = PgCommonWords(store) if long_running else None
        self._listing: tuple[tuple, SqlFilter] | None = None  # (index state and filter, listed): _listed's
        self._listing_lock = threading.Lock()  # both sides of a hybrid search ask for it at once

    def _listed(self, where: SqlFilter, conn=None) -> SqlFilter:
        """A filter of facets only (tags, metadata) as the list of chunk ids holding them (up to FACET_IDS_MAX), read
        once per search from the facet index, as rag.db does (engine._knn_bits). Given as `c.id IN (SELECT ...)`,
        the planner cannot tell how many chunks pass (it guesses 200 for the UNION ALL) and tests `tsv @@ q` on each
        of them, reading their tsvectors (a 2% tag at 1M chunks: 20k rows, 370 ms for a word in 7 of them); given
        as an array of ids it knows their number and ANDs them with the word's GIN bitmap (69 ms). Whole items
        keep the chunk ids too: as an array of item ids the planner tests a rare word on each item's 10 kB tsvector
        (1 s). conn: the caller's (the vector side's runs beside)."""
        if where.ids_sql is None:
            return where
        key = (self._now, where.ids_sql, where.params)
        with self._listing_lock:
            if self._listing is None or self._listing[0] != key:
                ids = [r[0] for r in (conn or self.store.conn).execute(f"{where.ids_sql} LIMIT ?",
                                                                       (*where.params, FACET_IDS_MAX + 1))]
                self._listing = (key, SqlFilter(pg_keyword.LISTED_CHUNKS, (ids,)) if len(ids) <= FACET_IDS_MAX
                                 else where)
            return self._listing[1]

    def _beside_ok(self) -> bool:
        return self.second is not None and self.second.available()

    def _items_beside(self, terms, where: SqlFilter, limit: int, n_items: int, hybrid: bool):
        if hybrid or not self._beside_ok():  # hybrid: the vector side has the second connection
            return None
        where, held = self._listed(where), self._held

        def rank(conn):
            with pg_keyword.index_scans(conn):
                return pg_keyword.search(conn, terms, where, limit, n_items, self._df_cache, pg_keyword.ITEMS,
                                         held=held)

        return self.second.submit(rank)

    def _stamp(self) -> tuple[int, int]:
        if self._now is not None:  # read at the start of this search
            return self._now
        return self.store.generation(), 0

    def _keyword(self, terms, filters, coll_ids, limit: int, result: SearchResult, got) -> None:
        with pg_keyword.index_scans(self.store.conn):  # one transaction for the stage's full-text statements
            super()._keyword(terms, filters, coll_ids, limit, result, got)

    def _keyword_chunks(self, terms, where: SqlFilter, limit: int, n_total: int, hybrid: bool,
                        corpus=None) -> KeywordRun:
        return pg_keyword.search(self.store.conn, terms, self._listed(where), limit, n_total, self._df_cache,
                                 pg_keyword.CHUNKS, may_skip=hybrid, held=self._held)

    def _keyword_items(self, terms, where: SqlFilter, limit: int, n_items: int, hybrid: bool,
                       corpus=None) -> KeywordRun:
        return pg_keyword.search(self.store.conn, terms, self._listed(where), limit, n_items,
                                 self._df_cache, pg_keyword.ITEMS, may_skip=hybrid, held=self._held)

    def item_df(self, term: Term) -> int:
        return pg_keyword.df(self.store.conn, term, self._df_cache, pg_keyword.ITEMS)

    def _exact_items(self, terms, where: SqlFilter) -> dict[int, list[str]]:
        return pg_keyword.exact_items(self.store.conn, terms, self._listed(where),
                                      self.settings.exact_max_items, self._df_cache)

    def _knn(self, qvec, filters: Filters, coll_ids, limit: int, scope: int, eid: str | None = None,
             vectors: dict | None = None, memo: dict | None = None) -> tuple[list[tuple[int, float]], bool]:
        """pgvector's KNN (memo: the bits in RAM's, nothing here to reuse)."""
        rest = build_where(filters.without_collections())
        listed = self._listed(rest, conn=self._vconn)
        if listed is not rest:  # exact among the listed chunks (pgvector's filtered HNSW scan would walk far)
            return pg_vector.knn(self._vconn, qvec, limit, 0, coll_ids, listed)
        return pg_vector.knn(self._vconn, qvec, limit, scope, coll_ids, rest)

    def _idf(self, query: str) -> dict[str, float]:
        n_items, conn = self._items_count(), self.store.conn
        with pg_keyword.index_scans(conn):
            df = {w: pg_keyword.df(conn, Term(w), self._df_cache, pg_keyword.ITEMS) for w in query_words(query)}
        return {_stem(w): math.log(1 + n_items / max(n, 1)) for w, n in df.items()}

    def _best_chunks(self, item_ids: list[int], terms, where: SqlFilter, result: SearchResult) -> dict[int, int]:
        expr = result.keyword_expression or pg_keyword.expression(terms)
        return pg_keyword.best_chunks(self.store.conn, item_ids, expr, where, common=not result.keyword_rare)
