"""The rows of the PostgreSQL index's most common words held in RAM by a long-running server: their BM25 rankings
without reading tsvectors (retrieval/common_words.py is rag.db's).

A ranking statement reads every candidate row's tsvector (~8 us a row for an item's, compressed out of line): at
100k chunks a query made of words in thousands of rows ranked 2,000 chunks and 2,000 items per search, 25-55 ms each
(pg/keyword.py's ROW_BUDGET). For the words in more than `min_docs` rows the server holds, per table (chunks,
item_docs), each word's rows and its BM25 count in each (what the statement's ts_rank recovers, plus one when the word
is in the title: pg_keyword.tf_sql), with every row's size as the ranking measures it (its tsvector in memory). An
unfiltered AND or OR of held single words is then scored in numpy with the statement's arithmetic in its order
(the length normalisation read from PostgreSQL once per average: numeric there), over EVERY row it matches: the
statement run without a row budget, ids and scores equal. Where more than ROW_BUDGET rows match, that is a better
ranking than the statement's, which scored the first 2,000 the index gave.

Held: the words in more than FLOOR_ROWS rows (ts_stat), most common first, up to POSTINGS_MAX rows per table, stopwords
left to the statements; a term in at most FETCH_ROWS rows ranked beside held words has its rows read by one statement.
Valid for one index state (store.generation()): read in a background thread on its own connection in one snapshot
(100k chunks: 26-30 s, 81 MB; 1M: 140 s, 104 MB), and after a write searches go to the statements until it is read
again, once the generation has not moved for REREAD_QUIET_S.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rag_search.retrieval.held import HeldInRam, words_held
from rag_search.retrieval.keyword import STOPWORDS, Term
from rag_search.retrieval.pg import word_stats
from rag_search.retrieval.pg.keyword import (
    _ID,
    CHUNKS,
    DETOASTED,
    ITEMS,
    K1,
    QUERY,
    index_scans,
    norm_sql,
    term_query,
    tf_sql,
)

POSTINGS_MAX = 6_000_000  # word-rows held per table at most (8 bytes each)
# held: words in more than FLOOR_ROWS rows, most common first while the budget lasts (a statement ranking a rarer word
# reads at most that many tsvectors, ~1 ms; rag.db holds only words over 1,000 rows: FTS5 reads rare words' doclists)
FLOOR_ROWS = 50
REREAD_QUIET_S = 30.0  # after a write, re-read once the generation has stood still this long (the first read: at once)
MAX_POSITIONS = 256  # a tsvector keeps at most this many positions of a lexeme
# A term in at most FETCH_ROWS rows that is not held (rarer than the floor, or past the budget) is read by one
# statement when it is ranked beside held words (~2 ms; ranking the OR by statement read 2,000 rows: 20-40 ms)
FETCH_ROWS = 200
FETCHED_KEPT = 5_000  # rare terms' rows kept per table while what is held is current
_FETCH_SQL = (f"SELECT r.KEY, greatest({tf_sql('r.tsv', QUERY)}, 1) + (r.tsv @@ {QUERY})::int FROM TABLE r "
              f"WHERE r.tsv @@ {QUERY}")  # KEY, TABLE: the table's
_TF_SQL = ("SELECT n, " + tf_sql("('a:' || array_to_string(ARRAY(SELECT generate_series(1, n)), ','))::tsvector",
                                  "'a'::tsquery") + " FROM generate_series(1, ?) n ORDER BY n")  # per positions n


@dataclass
class _Table:
    """One tsvector column's figures, as the ranking statement reads them."""

    ids: np.ndarray  # int64: every row's id, ascending
    sizes: np.ndarray  # int32: each row's tsvector size in memory (the statement's dl)
    words: dict[str, tuple[np.ndarray, np.ndarray]]  # lexeme -> (positions in ids, ascending; BM25 counts)
    norms: dict[str, np.ndarray] = field(default_factory=dict)  # the average's text -> each row's normalisation
    fetched: dict[Term, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # rare terms' rows (_fetch)


class PgCommonWords(HeldInRam):
    """Rankings and counts of expressions over the index's most common words, from RAM (only while ready)."""

    thread_name = "pg-common-words"

    def __init__(self, store: Any, min_docs: int | None = None, budget: int | None = None):
        """min_docs, budget: the words held (None: FLOOR_ROWS and POSTINGS_MAX)."""
        super().__init__(store)
        self.min_docs, self.budget = min_docs, budget
        self._tables: dict[str, _Table] | None = None
        self.quiet = REREAD_QUIET_S
        self._seen: tuple[int, int] | None = None  # the last generation a search saw, and since when
        self._seen_at = 0.0
        self.reads = 0  # completed reads (tests count them)
        self._failed_at = -REREAD_QUIET_S  # a failed read is tried again only after `quiet` seconds

    def stamp(self) -> tuple[int, int]:
        return self.store.generation(), 0

    def ready(self, stamp: tuple[int, int] | None = None) -> bool:
        """True when what is held matches the index now (`stamp`: PgSearchEngine._stamp, if read already);
        otherwise starts a (re)read, once the index has been left alone for `quiet` seconds, and returns False."""
        stamp = stamp or self.stamp()
        if self._tables is not None and stamp == self._stamp:
            return True
        now = time.monotonic()
        if stamp != self._seen:
            self._seen, self._seen_at = stamp, now
        if self._tables is not None and self.quiet > 0 and now - self._seen_at < self.quiet:
            return False
        if now - self._failed_at < self.quiet:
            return False
        self._start(stamp)
        return False

    def size(self) -> str:
        """What is held: words and rows per table, and the bytes."""
        return words_held(self._tables or {}, "sizes")

    def held(self, conn: Any, table: str, terms: list[Term], rows: dict[Term, int] | None = None
             ) -> list[tuple[np.ndarray, np.ndarray]] | None:
        """Each term's (positions, counts), or None when one of them is neither a held single word nor in at most
        FETCH_ROWS rows by `rows` (its counted rows: those are read by one statement, _fetch)."""
        tables = self._tables
        if tables is None or table not in tables:
            return None
        stats, out = word_stats.of(conn), []
        for t in terms:
            plain = not (t.phrase or t.prefix or t.split or t.gram)
            got = tables[table].words.get(stats.stem(conn, t.text)) if plain else None
            if got is None and (rows or {}).get(t, FETCH_ROWS + 1) <= FETCH_ROWS:
                got = self._fetch(conn, tables[table], table, t)
            if got is None:
                return None
            out.append(got)
        return out

    def _fetch(self, conn: Any, t: _Table, table: str, term: Term) -> tuple[np.ndarray, np.ndarray] | None:
        """A rare term's rows and counts, as the ranking statement computes them (it reads their few tsvectors),
        kept while what is held is current; None if a row is not among those held (then the statement ranks)."""
        if term not in t.fetched:
            if len(t.fetched) >= FETCHED_KEPT:
                t.fetched.clear()
            with index_scans(conn):
                got = conn.execute(_FETCH_SQL.replace("KEY", _ID[table]).replace("TABLE", table),
                                   (term_query(term), term_query(term, "A"), term_query(term))).fetchall()
            ids = np.array(sorted(got), dtype=np.int64).reshape(-1, 2)
            pos = np.searchsorted(t.ids, ids[:, 0]).clip(0, max(len(t.ids) - 1, 0))
            if len(t.ids) == 0 or not (t.ids[pos] == ids[:, 0]).all():
                return None
            t.fetched[term] = (pos.astype(np.int32), ids[:, 1].astype(np.float32))
        return t.fetched[term]

    def count(self, conn: Any, table: str, terms: list[Term], anded: bool) -> int | None:
        """Rows matching the terms ANDed or ORed; None when a term is not held."""
        postings = self.held(conn, table, terms)
        if postings is None:
            return None
        return len(_rows(postings, len(self._tables[table].ids), anded))

    def rank(self, conn: Any, table: str, terms: list[Term], anded: bool, limit: int, idfs: list[float],
             avgdl: float, rows: dict[Term, int] | None = None) -> list[tuple[int, float]] | None:
        """(id, negated BM25) best first, as pg_keyword.ranked_sql's statement scores them, over every matching row;
        None when a term is not held nor rare (`rows`: counted rows; the statement answers)."""
        postings = self.held(conn, table, terms, rows)
        if postings is None:
            return None
        t = self._tables[table]
        rows = _rows(postings, len(t.ids), anded)
        if not len(rows) or limit <= 0:
            return []
        norm = self._norms(conn, t, avgdl)[rows]
        score = None
        for w, (positions, counts) in zip(idfs, postings):  # the statement's sum, term by term, in its order
            x = np.zeros(len(rows))  # a term in no row (read by _fetch) counts 0 in each, as in the statement
            if len(positions):
                at = np.searchsorted(positions, rows).clip(0, len(positions) - 1)
                x = np.where(positions[at] == rows, counts[at], 0.0).astype(np.float64)
            part = float(f"{w:.6f}") * x * float(f"{K1 + 1}") / (x + norm)
            score = part if score is None else score + part
        score = -score
        if len(rows) > limit:
            edge = np.partition(score, limit - 1)[limit - 1]
            keep = np.flatnonzero(score <= edge)
            rows, score = rows[keep], score[keep]
        ids = t.ids[rows]
        order = np.lexsort((ids, score))[:limit]
        return list(zip(ids[order].tolist(), score[order].tolist()))

    def _norms(self, conn: Any, t: _Table, avgdl: float) -> np.ndarray:
        """Each row's BM25 length normalisation for this average, computed by PostgreSQL (numeric arithmetic, then
        a float8, as in the statement) once per distinct size."""
        key = norm_sql("dl", avgdl)
        if key not in t.norms:
            sizes, inverse = np.unique(t.sizes, return_inverse=True)
            got = dict(conn.execute(f"SELECT d, ({norm_sql('d', avgdl)})::float8 FROM unnest(?::int[]) AS d",
                                    (sizes.tolist(),)).fetchall())
            t.norms = {key: np.array([got[s] for s in sizes.tolist()], dtype=np.float64)[inverse]}
        return t.norms[key]

    def _load(self, stamp: tuple[int, int]) -> None:
        from rag_search.store.pg.connection import PgConnection

        try:
            conn = PgConnection.connect(self.store.url)
            try:
                with conn.raw.transaction():  # one snapshot of both tables
                    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    floor = FLOOR_ROWS if self.min_docs is None else self.min_docs
                    budget = POSTINGS_MAX if self.budget is None else self.budget
                    tables = {table: _read(conn, table, floor, budget) for table in (CHUNKS, ITEMS)}
            finally:
                conn.close()
            with self.store.lock:
                if not getattr(self.store, "closed", False) and self.stamp() == stamp:  # nothing written meanwhile
                    self._tables, self._stamp = tables, stamp
                    self.reads += 1
        except Exception:  # the server is busy or gone: the statements keep answering, a read is tried again later
            self._failed_at = time.monotonic()
        finally:
            with self._lock:
                self._loading = False


def _rows(postings: list[tuple[np.ndarray, np.ndarray]], n: int, anded: bool) -> np.ndarray:
    """The positions holding every term (anded) or any, ascending (marks over the table's rows)."""
    if len(postings) == 1:
        return postings[0][0]
    marks = np.zeros(n, dtype=np.uint8 if len(postings) < 256 else np.uint16)
    for positions, _ in postings:
        marks[positions] += 1
    return np.flatnonzero(marks == len(postings) if anded else marks)


def _read(conn: Any, table: str, min_docs: int, budget: int) -> _Table:
    """The table's row sizes and the rows of its most common words, with each one's BM25 count."""
    key = _ID[table]
    ids, sizes = _sizes(conn, table, key)
    stop = {r[1] for r in conn.execute(word_stats._STEMS_SQL, (sorted(STOPWORDS),)).fetchall()}
    chosen, held = [], 0
    for lexeme, docs in conn.execute(f"SELECT word, ndoc FROM ts_stat('SELECT tsv FROM {table}') WHERE ndoc > ? "
                                     "ORDER BY ndoc DESC, word", (min_docs,)).fetchall():
        if lexeme not in stop and held + docs <= budget:
            chosen.append(lexeme)
            held += docs
    # the statement's count of a word in a row depends only on its positions there (n), and the title (weight A)
    tf = np.zeros(MAX_POSITIONS + 1)
    tf[1:] = [r[1] for r in conn.execute(_TF_SQL, (MAX_POSITIONS,)).fetchall()]
    tf = np.maximum(tf, 1.0)  # a matching word counts at least 1 (the statement's greatest(tf, matches))
    t = _Table(ids, sizes, {})
    rows = conn.execute(
        f"SELECT u.lexeme, array_agg(t.{key})::text, array_agg(least(coalesce(array_length(u.positions, 1), 1), "
        f"{MAX_POSITIONS}) * 2 + ('A' = ANY(u.weights))::int)::text FROM {table} t, unnest(t.tsv) u "
        "WHERE u.lexeme = ANY(?) GROUP BY u.lexeme", (chosen,))
    for lexeme, of_ids, codes in rows:
        docs = np.fromstring(of_ids[1:-1], dtype=np.int64, sep=",")
        code = np.fromstring(codes[1:-1], dtype=np.int64, sep=",")
        order = np.argsort(docs, kind="stable")
        docs, code = docs[order], code[order]
        pos = np.searchsorted(ids, docs).clip(0, max(len(ids) - 1, 0))
        t.words[lexeme] = (pos.astype(np.int32), (tf[code >> 1] + (code & 1)).astype(np.float32))
    return t


def _sizes(conn: Any, table: str, key: str) -> tuple[np.ndarray, np.ndarray]:
    """Every row's id, ascending, and its tsvector's size in memory (pg_column_size of the ranking's copy)."""
    ids, sizes = conn.execute(
        f"SELECT coalesce(array_agg(k ORDER BY k), '{{}}')::text, coalesce(array_agg(s ORDER BY k), '{{}}')::text "
        f"FROM (SELECT r.{key} AS k, pg_column_size({DETOASTED}) AS s FROM {table} r) x").fetchone()
    return (np.fromstring(ids[1:-1], dtype=np.int64, sep=",") if len(ids) > 2 else np.zeros(0, dtype=np.int64),
            np.fromstring(sizes[1:-1], dtype=np.int32, sep=",") if len(sizes) > 2 else np.zeros(0, dtype=np.int32))
