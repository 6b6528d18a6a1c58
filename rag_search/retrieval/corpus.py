"""Word statistics of the collections a caller may see, so that no score a person sees depends on items they cannot.

How many rows hold a word, how many rows there are and how long they are on average weigh every keyword score:
BM25, the pruning of common words, name matches, the reranker's word features and a hit's relevance. Taken over
the whole index they would tell one user about another's private items (a word only another user's notes hold
would lower the weight of the first user's own words). A `Corpus` is those figures over a scope: the collections
the caller may see. The owner, who sees everything, keeps the whole index's figures (no Corpus), as before.

FTS5's bm25() weighs by whole-table figures. `rescore` asks it per phrase, turns each answer back into the
phrase's weighted count in the row (from the row's length and the table's figures: exact, up to rounding) and
weighs that with the scope's figures: the score FTS5 would give if the index held only the scope's collections
(tests/test_corpus_scope.py checks it against such an index). At most CAP rows of the scope are rescored per
statement; where more match, the whole index's BM25 picks which CAP (so past CAP matching rows, which rows enter
the ranking can still depend on other collections).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from rag_search.retrieval.filters import SqlFilter
from rag_search.retrieval.keyword import CHUNKS, COMMON_MIN_DOCS, ITEMS, Term, keyword_sql
from rag_search.retrieval.rerank import _stem, query_words

CAP = 5_000  # rows of the scope rescored per statement
K1, B = 1.2, 0.75  # FTS5's bm25()
_PHRASE = re.compile(r'"(?:[^"]|"")*"\*?')
_OWNER = {CHUNKS: ("chunks", "id"), ITEMS: ("items", "id")}  # the row each FTS table's rowid is, with its collection


def varints(blob: bytes) -> list[int]:
    """SQLite's varints (FTS5's sizes and totals): 7 bits a byte, big-endian, the ninth byte whole."""
    out, i = [], 0
    while i < len(blob):
        value = 0
        for n in range(9):
            byte = blob[i]
            i += 1
            if n == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        out.append(value)
    return out


def bm25_idf(rows: int, hits: int) -> float:
    """FTS5's inverse document frequency of a phrase in `hits` of `rows` rows (never below 1e-6)."""
    value = math.log((rows - hits + 0.5) / (hits + 0.5)) if rows else 0.0
    return value if value > 0 else 1e-6


def phrases(expression: str) -> list[str]:
    """The phrases of a MATCH expression built by keyword.match_expression (quoted, maybe with a trailing *)."""
    return _PHRASE.findall(expression or "")


def table_totals(conn: Any, table: str) -> tuple[int, int]:
    """(rows, tokens over all columns) of the whole FTS table: its averages record."""
    row = conn.execute(f"SELECT block FROM {table}_data WHERE id = 1").fetchone()
    values = varints(bytes(row[0])) if row and row[0] else [0]
    return values[0], sum(values[1:])


def row_sizes(conn: Any, table: str, ids: list[int]) -> dict[int, int]:
    """Tokens per row (all columns) of those rows."""
    rows = conn.execute(f"SELECT id, sz FROM {table}_docsize WHERE id IN (SELECT value FROM json_each(?))",
                        (json.dumps(ids),))
    return {i: sum(varints(bytes(sz))) for i, sz in rows}


class Corpus:
    """The figures of one scope over one state of the index (the engine keeps one per scope until it changes).
    Call with the store's lock held."""

    def __init__(self, conn: Any, collection_ids: tuple[int, ...]):
        self.conn, self.ids = conn, tuple(sorted(set(collection_ids)))
        self._marks = ",".join("?" * len(self.ids)) or "NULL"
        self._totals: dict[str, tuple[int, int]] = {}
        self._counts: dict[tuple, int] = {}

    # -- the scope's figures ------------------------------------------------------------------------------

    def rows(self, table: str) -> int:
        return self._scope_totals(table)[0]

    def _scope_totals(self, table: str) -> tuple[int, int]:
        if table not in self._totals:
            owner, key = _OWNER[table]
            sizes = self.conn.execute(f"SELECT d.sz FROM {table}_docsize d JOIN {owner} o ON o.{key} = d.id "
                                      f"WHERE o.collection_id IN ({self._marks})", self.ids)
            n = tokens = 0
            for (sz,) in sizes:
                n, tokens = n + 1, tokens + sum(varints(bytes(sz)))
            self._totals[table] = (n, tokens)
        return self._totals[table]

    def count(self, table: str, expression: str, cap: int | None = None) -> int:
        """Rows of the scope matching the expression (counted up to `cap`)."""
        key = (table, expression, cap)
        if key not in self._counts:
            owner, col = _OWNER[table]
            inner = (f"SELECT 1 FROM {table} JOIN {owner} o ON o.{col} = {table}.rowid WHERE {table} MATCH ? "
                     f"AND o.collection_id IN ({self._marks})")
            limit = " LIMIT ?" if cap is not None else ""
            self._counts[key] = self.conn.execute(f"SELECT count(*) FROM ({inner}{limit})",
                                                  (expression, *self.ids, *([cap] if cap is not None else []))
                                                  ).fetchone()[0]
        return self._counts[key]

    def df(self, term: Term, table: str = CHUNKS, upto: int | None = None) -> int:
        """keyword._df over the scope: rows holding the term, counted up to one past `upto`."""
        upto = COMMON_MIN_DOCS if upto is None else upto
        return self.count(table, term.fts(), upto + 1)

    def query_idf(self, query: str) -> dict[str, float]:
        """rerank.query_idf over the scope: the query's stems → log(1 + items / items holding the word)."""
        n = self.rows(ITEMS)
        return {_stem(w): math.log(1 + n / max(self.df(Term(w), ITEMS), 1)) for w in query_words(query)}

    # -- BM25 over the scope -------------------------------------------------------------------------------

    def ranked(self, table: str, expression: str, where: SqlFilter, limit: int) -> list[tuple[int, float]]:
        """(row id, BM25 as FTS5's rank: lower is better) of the rows matching the expression and the filters, best
        first, weighed by the scope's figures."""
        sql = keyword_sql(where, table)
        unranked = sql.replace(f" ORDER BY {table}.rank", "").replace(f", {table}.rank FROM", " FROM")
        ids = [r[0] for r in self.conn.execute(unranked, (expression, *where.params, CAP + 1))]
        if len(ids) > CAP:  # too many to rescore: the whole index's BM25 picks which
            ids = [r[0] for r in self.conn.execute(sql, (expression, *where.params, CAP))]
        scores = self.rescore(table, expression, ids)
        return sorted(scores.items(), key=lambda r: (r[1], r[0]))[:limit]

    def rescore(self, table: str, expression: str, ids: list[int]) -> dict[int, float]:
        """The rows' BM25 (FTS5's rank: negative) for the expression, with the scope's figures."""
        if not ids:
            return {}
        n_all, tokens_all = table_totals(self.conn, table)
        n_scope, tokens_scope = self._scope_totals(table)
        size = row_sizes(self.conn, table, ids)
        score = dict.fromkeys(ids, 0.0)
        for phrase in phrases(expression):
            idf_all = bm25_idf(n_all, self._all_hits(table, phrase))
            idf_scope = bm25_idf(n_scope, self.count(table, phrase))
            # `+rowid`: one pass over the phrase's matches, the ids a filter. A plain `rowid IN` let SQLite open one
            # FTS5 cursor per id, each counting the phrase's rows again for bm25(): 10 s for 5,000 ids of a word in
            # 47k of 100k chunks, 15 ms this way (a person's search on the page took 14 s at p95).
            rows = self.conn.execute(f"SELECT rowid, rank FROM {table} WHERE {table} MATCH ? AND +rowid IN "
                                     "(SELECT value FROM json_each(?))", (phrase, json.dumps(ids)))
            for rowid, rank in rows:
                d = size.get(rowid, 0)
                freq = _frequency(-rank / idf_all, _norm(d, tokens_all / max(n_all, 1)))
                score[rowid] += idf_scope * freq * (K1 + 1) / (freq + _norm(d, tokens_scope / max(n_scope, 1)))
        return {i: -s for i, s in score.items()}

    def _all_hits(self, table: str, phrase: str) -> int:
        key = (table, phrase, "all")
        if key not in self._counts:
            self._counts[key] = self.conn.execute(f"SELECT count(*) FROM {table} WHERE {table} MATCH ?",
                                                  (phrase,)).fetchone()[0]
        return self._counts[key]


def _norm(size: int, average: float) -> float:
    """BM25's length normalisation K of a row of `size` tokens."""
    return K1 * (1 - B + B * size / (average or 1.0))


def _frequency(share: float, norm: float) -> float:
    """The phrase's weighted count in the row (FTS5's aFreq) from its BM25 share f = aFreq(k1+1)/(aFreq+K): exact
    counts times column weights, so rounding to 1e-6 takes away only the floating-point noise."""
    freq = share * norm / max(K1 + 1 - share, 1e-12)
    return round(freq * 1e6) / 1e6
