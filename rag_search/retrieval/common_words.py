"""The rows of the index's most common words held in RAM by a long-running server: their BM25 rankings without FTS5.

FTS5 scores every row an expression matches before its LIMIT applies (~1-2 us a row): a query made only of words
in half of 100k chunks ranks ~47k rows, 35-90 ms however few hits are wanted (keyword p95 at 100k, issue 33). For
the most common words the server holds, per table (chunks_fts, items_fts), each word's rows and its weighted count
in each (title 2, text 1, keywords 0.5: the tables' bm25() weights, keyword.WEIGHTS), with every row's length and
the table's row count and average length; an expression made only of held words (AND or OR of single words) is
then scored in numpy with FTS5's own bm25() arithmetic, in its order of operations, so the ranking is the one FTS5
returns (same ids, same scores, equal scores by rowid), in ~1-3 ms.

Held: the words in more than `min_docs` rows (a fifth of keyword.COMMON_MIN_DOCS, where keyword search treats a
word as common: the rarer words a query keeps cost FTS5 up to 5,000 rows too), most common first, up to
POSTINGS_MAX rows per table (8 bytes each: at 100k chunks ~4M + ~2.5M rows, ~55 MB; at 1M the budget holds the
~15 and ~65 most common words, ~110 MB); stopwords are left to FTS5 (a query keeps them only when it holds nothing
else). Like the sign bits (bit_matrix.py), what is held is valid only while the index is unchanged: it is read in a
background thread on its own read-only connection (fts5vocab's instance table, ~1 us a word occurrence: 15-20 s at
100k chunks, ~65 s at 1M), and after any write searches go to FTS5 until it is read again (once writes settle).

A word in fewer rows than the floor is read the first time a query asks for it (one small statement) and kept with
the held ones, so an expression of rarer and common words is ranked here too. Under a filter of dates, collections
or facets (tags, metadata) the rows that pass come as a flag per rowid from the facts held with the sign bits and the
facet's chunks, listed once per filter (bit_matrix.BitMatrix.rows_passing): BM25 does not depend on the filter, so
ranking only those rows is FTS5's ranking with the filter in its WHERE (100k chunks, a date filter: the keyword
stage's p95 46-50 -> 8 ms).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rag_search.retrieval import keyword
from rag_search.retrieval.held import HeldInRam, words_held
from rag_search.retrieval.keyword import CHUNKS, ITEMS, STOPWORDS, WEIGHTS, Term

POSTINGS_MAX = 6_000_000  # word-rows held per table at most (8 bytes each)
# rarer words read for queries and kept per table, then forgotten: at most this many words, and this many of their
# rows (8 bytes each: 16 MB; a word holds at most `floor` rows, most a few dozen)
FETCHED_MAX, FETCHED_ROWS_MAX = 20_000, 2_000_000
# Held: words in more rows than a fifth of keyword.COMMON_MIN_DOCS (1,000), so a query's rarer words (those kept
# when common ones are dropped: up to 5,000 rows, 10-20 ms of FTS5 ranking for chunks and items) come from RAM too
FLOOR_SHARE = 5
REREAD_QUIET_S = 30.0  # after a write, re-read once the index has been left alone this long (the first read: at once)
K1, B = 1.2, 0.75  # FTS5's bm25()


@dataclass
class _Table:
    """One FTS5 table's figures, as its bm25() reads them."""

    ids: np.ndarray  # every rowid, ascending (the table's docsize rows)
    lengths: np.ndarray  # float64: each row's tokens over all columns (xColumnSize(-1))
    n_rows: int  # the averages record's row count (xRowCount)
    avgdl: float  # total tokens / rows (xColumnTotalSize(-1) / xRowCount)
    words: dict[str, tuple[np.ndarray, np.ndarray]]  # token -> (positions in ids, ascending; weighted counts)
    floor: int = 0  # every word in more rows than this is held (unless past the budget)
    fetched: dict[str, tuple[np.ndarray, np.ndarray] | None] = field(default_factory=dict)  # rarer words read since
    fetched_rows: int = 0  # their rows


class CommonWords(HeldInRam):
    """Rankings of expressions over the index's most common words, from RAM (call rank/count only while ready)."""

    thread_name = "common-words"

    def __init__(self, store: Any, min_docs: int | None = None, budget: int | None = None):
        """min_docs, budget: the words held (None: keyword.COMMON_MIN_DOCS / FLOOR_SHARE and POSTINGS_MAX, as they are
        when read)."""
        super().__init__(store)
        self.min_docs, self.budget = min_docs, budget
        self._tables: dict[str, _Table] | None = None
        self._tokens: dict[str, str | None] = {}  # a term's text -> its one token (None: not a single token)
        self._masks: dict[str, tuple[np.ndarray, _Table, np.ndarray]] = {}  # per table: flags, table, _mask's
        self.quiet = REREAD_QUIET_S

    def ready(self, stamp: tuple[int, int] | None = None) -> bool:
        """True when what is held matches the index now (`stamp`: its state, if the caller read it already);
        otherwise starts a (re)read and returns False. A re-read waits until the index has not been written for
        `quiet` seconds: while it is being written, each re-read would be dropped by the next write."""
        stamp = stamp or self.stamp()
        if self._tables is not None and stamp == self._stamp:
            return True
        if self._tables is not None and self.quiet > 0 and time.time() - _last_write(self.store.path) < self.quiet:
            return False
        self._start(stamp)
        return False

    def size(self) -> str:
        """What is held: words and rows per table, and the bytes."""
        return words_held(self._tables or {}, "lengths")

    def held(self, table: str, terms: list[Term], counted: Any = None) -> list[tuple[np.ndarray, np.ndarray]] | None:
        """Each term's (positions, weighted counts), or None when one of them is not a held single word.
        counted(term): its rows as the caller counted them already (keyword._df, up to one past its cap), or None."""
        tables = self._tables
        if tables is None or table not in tables:
            return None
        self._learn([t for t in terms if t.text not in self._tokens])
        t = tables[table]
        tokens = []
        for term in terms:
            token = None if (term.phrase or term.prefix or term.split) else self._tokens.get(term.text)
            if token is None:
                return None
            tokens.append(token)
        missing = {token: term for token, term in zip(tokens, terms) if token not in t.words and token not in t.fetched}
        if missing:
            self._fetch(t, table, missing, counted)
        out = []
        for token in tokens:
            posting = t.words.get(token) or t.fetched.get(token)
            if posting is None:
                return None
            out.append(posting)
        return out

    def _fetch(self, t: _Table, table: str, missing: dict[str, Term], counted: Any = None) -> None:
        """Words in at most `floor` rows (rarer than those held), read from the index the first time a query asks
        for them and kept with what is held: a count of each that stops past the floor, then their rows in one
        statement (FTS5 ranking them beside held words, or under a filter, walked each of their rows: ~30 ms at 100k
        chunks with a date filter). A word in more rows (left out by the budget, or a stopword) is kept as None:
        FTS5 answers for it."""
        if len(t.fetched) + len(missing) > FETCHED_MAX or t.fetched_rows > FETCHED_ROWS_MAX:
            t.fetched.clear()
            t.fetched_rows = 0
        conn = self.store.conn  # fts5vocab in TEMP: no change of the index (its stamp stays: test_common_words)
        conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{table}_instances USING fts5vocab(main, {table}, "
                     "'instance')")
        rare = [token for token, term in missing.items() if _rows_of(conn, table, term, t.floor, counted) <= t.floor]
        rows_of: dict[str, list] = {token: [] for token in rare}
        if rare:
            for token, doc, count in conn.execute(_INSTANCES_MANY_SQL[table].format(marks=",".join("?" * len(rare))),
                                                  rare):
                rows_of[token].append((doc, count))
        for token in missing:
            t.fetched[token] = _posting(t.ids, rows_of[token]) if token in rows_of else None
            t.fetched_rows += len(rows_of.get(token, ()))

    def rank(self, table: str, terms: list[Term], anded: bool, limit: int,
             passing: dict[str, np.ndarray] | None = None, counted: Any = None) -> list[tuple[int, float]] | None:
        """(rowid, bm25) best first, as `SELECT rowid, bm25(...) ... MATCH <the terms> ORDER
        BY bm25, rowid LIMIT limit` returns them (ANDed or ORed); None when a term is not held (FTS5 answers).
        passing: per table, a flag per rowid of those a filter lets through (bit_matrix.BitMatrix.rows_passing): only
        those are ranked (BM25 does not depend on the filter, so this is FTS5's ranking with the filter in its WHERE).
        counted: see held()."""
        postings = self.held(table, terms, counted)
        if postings is None:
            return None
        t = self._tables[table]
        rows = _rows(postings, len(t.ids), anded)
        if passing is not None:
            rows = rows[self._mask(table, t, passing[table])[rows]]
        if not len(rows) or limit <= 0:
            return []
        norm = K1 * ((1 - B) + B * t.lengths[rows] / t.avgdl)
        score = np.zeros(len(rows))
        for positions, counts in postings:  # bm25()'s loop over the expression's phrases, in their order
            df = len(positions)
            if not df:  # a word in no row (read on demand: _fetch) adds 0 to every row's score
                continue
            idf = math.log((t.n_rows - df + 0.5) / (df + 0.5))
            idf = idf if idf > 0.0 else 1e-6
            at = np.searchsorted(positions, rows).clip(0, len(positions) - 1)
            freq = np.where(positions[at] == rows, counts[at], 0.0).astype(np.float64)
            score += idf * ((freq * (K1 + 1.0)) / (freq + norm))
        score = -1.0 * score
        if len(rows) > limit:
            edge = np.partition(score, limit - 1)[limit - 1]
            keep = np.flatnonzero(score <= edge)
            rows, score = rows[keep], score[keep]
        ids = t.ids[rows]
        order = np.lexsort((ids, score))[:limit]
        return list(zip(ids[order].tolist(), score[order].tolist()))

    def _mask(self, table: str, t: _Table, flags: np.ndarray) -> np.ndarray:
        """Which of the table's rows a filter's flags (by rowid) let through, by position; kept for the last flags
        seen (bit_matrix keeps a filter's flags while the index is unchanged)."""
        kept = self._masks.get(table)
        if kept is None or kept[0] is not flags or kept[1] is not t:
            kept = self._masks[table] = (flags, t, _among(t.ids, flags))
        return kept[2]

    def holding(self, table: str, term: Term, ids: list[int]) -> list[int] | None:
        """Those of `ids` whose rows hold the term, in their order; None when the term is not held."""
        postings = self.held(table, [term])
        if postings is None:
            return None
        positions, t = postings[0][0], self._tables[table]
        wanted = np.asarray(ids, dtype=np.int64)
        if not len(wanted) or not len(t.ids) or not len(positions):
            return []
        # a few ids looked up in the sorted arrays (gathering a common word's ids to compare took ~1 ms per 100k rows)
        at = np.searchsorted(t.ids, wanted).clip(0, len(t.ids) - 1)
        at = np.where(t.ids[at] == wanted, at, -1)
        where = np.searchsorted(positions, at).clip(0, len(positions) - 1)
        return wanted[positions[where] == at].tolist()

    def count(self, table: str, terms: list[Term], anded: bool) -> int | None:
        """Rows matching the terms ANDed or ORed; None when a term is not held."""
        postings = self.held(table, terms)
        if postings is None:
            return None
        return len(_rows(postings, len(self._tables[table].ids), anded))

    def _learn(self, terms: list[Term]) -> None:
        """The tokens the index makes of the terms' texts (the same stemming MATCH applies)."""
        if not terms:
            return
        from rag_search.retrieval.titles import _stems

        stems = _stems(self.store.conn, {n: t.text for n, t in enumerate(terms)})
        if len(self._tokens) > 100_000:
            self._tokens.clear()
        for n, t in enumerate(terms):
            got = stems.get(n, [])
            self._tokens[t.text] = got[0] if len(got) == 1 else None

    def _load(self, stamp: tuple[int, int]) -> None:
        from rag_search.store.connection import connect

        try:
            conn = connect(str(self.store.path), readonly=True)
            try:
                conn.execute("BEGIN")  # one snapshot of both tables
                floor = keyword.COMMON_MIN_DOCS // FLOOR_SHARE if self.min_docs is None else self.min_docs
                budget = POSTINGS_MAX if self.budget is None else self.budget
                tables = {table: _read(conn, table, floor, budget) for table in (CHUNKS, ITEMS)}
                conn.execute("COMMIT")
            finally:
                conn.close()
            with self.store.lock:
                if not getattr(self.store, "closed", False) and self.stamp() == stamp:  # nothing written meanwhile
                    self._tables, self._stamp = tables, stamp
        except Exception:  # the database is busy or gone: FTS5 keeps answering
            pass
        finally:
            with self._lock:
                self._loading = False


def _rows_of(conn: Any, table: str, term: Term, floor: int, counted: Any = None) -> int:
    """The term's rows, or floor + 1 when in more: the caller's count when it has one (keyword._df counts every query
    term up to a higher cap), else one that stops past the floor."""
    known = counted(term) if counted is not None else None
    if known is not None:
        return min(known, floor + 1)
    return keyword._count(conn, table, term.fts(), floor + 1)


def _last_write(path: Any) -> float:
    """When the database (or its write-ahead log) was last written, as a Unix time."""
    times = []
    for name in (str(path), f"{path}-wal"):
        try:
            times.append(os.stat(name).st_mtime)
        except OSError:
            pass
    return max(times, default=0.0)


def _rows(postings: list[tuple[np.ndarray, np.ndarray]], n: int, anded: bool) -> np.ndarray:
    """The positions holding every term (anded) or any, ascending: marks in an array of the table's rows (np.unique
    of three 45k-row lists hashes them: 20 ms; this: ~0.3 ms)."""
    if len(postings) == 1:
        return postings[0][0]
    marks = np.zeros(n, dtype=np.uint8 if len(postings) < 256 else np.uint16)
    for positions, _ in postings:
        marks[positions] += 1  # a term's positions are distinct
    return np.flatnonzero(marks == len(postings) if anded else marks)


def _among(ids: np.ndarray, flags: np.ndarray) -> np.ndarray:
    """Which of `ids` are flagged (`flags` indexed by id; an id past its end is not)."""
    if not len(flags):
        return np.zeros(len(ids), dtype=bool)
    return np.take(flags, ids, mode="clip") & (ids < len(flags))


def _read(conn: Any, table: str, min_docs: int, budget: int) -> _Table:
    """The table's lengths and statistics, and the rows of its most common words."""
    ids_of, lengths_of = [], []
    for rowid, sizes in conn.execute(f"SELECT id, sz FROM {table}_docsize ORDER BY id"):  # streamed: 1M rows
        ids_of.append(rowid)
        lengths_of.append(sum(_varints(sizes)))
    ids, lengths = np.array(ids_of, dtype=np.int64), np.array(lengths_of, dtype=np.float64)
    del ids_of, lengths_of
    averages = _varints(conn.execute(f"SELECT block FROM {table}_data WHERE id = 1").fetchone()[0])
    n_rows, tokens = averages[0], sum(averages[1:])
    t = _Table(ids, lengths, n_rows, tokens / n_rows if n_rows else 1.0, {})
    vocab, instances = f"temp.{table}_rows", f"temp.{table}_instances"
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {vocab} USING fts5vocab(main, {table}, 'row')")
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {instances} USING fts5vocab(main, {table}, 'instance')")
    stop = set(_stopword_tokens(conn))
    t.floor = min_docs
    held = 0
    for token, docs in conn.execute(f"SELECT term, doc FROM {vocab} WHERE doc > ? ORDER BY doc DESC, term",
                                    (min_docs,)).fetchall():
        if token in stop:
            continue
        if held + docs > budget:
            continue
        rows = conn.execute(_INSTANCES_SQL[table], (token,)).fetchall()
        t.words[token] = _posting(ids, rows)
        held += len(rows)
    return t


def _instances_sql(table: str, many: bool) -> str:
    """A token's rows and its weighted count in each (the table's bm25() weights), by rowid (parameter: the token);
    `many`: several tokens' (token, rowid, count), `{marks}` to fill with a placeholder per token (one term = ? seek
    per held word reads them ~1.5x faster than IN: the load)."""
    weight = " ".join(f"WHEN '{c}' THEN {w!r}" for c, w in WEIGHTS[table].items())
    if many:
        return (f"SELECT term, doc, sum(CASE col {weight} ELSE 0.0 END) FROM temp.{table}_instances "
                "WHERE term IN ({marks}) GROUP BY term, doc ORDER BY term, doc")
    return (f"SELECT doc, sum(CASE col {weight} ELSE 0.0 END) FROM temp.{table}_instances WHERE term = ? "
            "GROUP BY doc ORDER BY doc")


_INSTANCES_SQL = {table: _instances_sql(table, False) for table in (CHUNKS, ITEMS)}
_INSTANCES_MANY_SQL = {table: _instances_sql(table, True) for table in (CHUNKS, ITEMS)}


def _posting(ids: np.ndarray, rows: list) -> tuple[np.ndarray, np.ndarray]:
    """(positions in `ids`, weighted counts) of a token's (rowid, count) rows; rows no longer in the table (FTS5's
    deleted rows) left out."""
    docs_of = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    counts = np.fromiter((r[1] for r in rows), dtype=np.float32, count=len(rows))
    pos = np.searchsorted(ids, docs_of).clip(0, max(len(ids) - 1, 0))
    present = ids[pos] == docs_of if len(ids) else np.zeros(len(rows), dtype=bool)
    return pos[present].astype(np.int32), counts[present]


def _stopword_tokens(conn: Any) -> list[str]:
    from rag_search.retrieval.titles import _stems

    stems = _stems(conn, dict(enumerate(sorted(STOPWORDS))))
    return [s for got in stems.values() for s in got]


def _varints(blob: bytes) -> list[int]:
    """SQLite's varints (FTS5's docsize and averages records): 7 bits a byte, high bit set while more follow,
    a ninth byte's 8 bits whole."""
    out, value, n = [], 0, 0
    for byte in blob:
        if n == 8:
            out.append((value << 8) | byte)
            value, n = 0, 0
            continue
        value = (value << 7) | (byte & 0x7F)
        n += 1
        if not byte & 0x80:
            out.append(value)
            value, n = 0, 0
    return out
