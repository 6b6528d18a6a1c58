"""How many rows hold a word, by PostgreSQL's own statistics of a tsvector column: common words told apart from rare
ones without counting their rows.

Counting a word's rows costs what its row count costs: GIN answers `tsv @@ q` with a bitmap only, so even a count up
to 5,001 builds the whole bitmap and, once it is lossy, rechecks every row on its pages, reading their tsvectors (at
1M chunks a word in 213k rows: 145-180 ms warm, up to 900 ms cold; the first search with a new common word paid this
once per word and threshold, the hybrid p95's tail). ANALYZE samples each tsvector column and keeps its most common
lexemes with their share of rows (`pg_stats.most_common_elems` / `most_common_elem_freqs`, up to 10 x the statistics
target: 1,000). A word listed there at well over a threshold's rows is over it; a word not listed is rarer than the
least common listed one (below ~0.9% of rows), so rare enough that counting it exactly is cheap.

The statistics are the store's, not one index state's: they are kept on the connection across writes and read again
after STATS_SECONDS (autovacuum's ANALYZE refreshes them as the table changes). A store never analyzed has none:
every word is counted, as before.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rag_search.store.pg.schema import TS_CONFIG

STATS_SECONDS = 300.0  # the statistics read again after this long (ANALYZE changes them only now and then)
MARGIN = 2.0  # an estimate says "over a threshold" only when it is this many times the threshold (sampling error)
STEMS_KEPT = 10_000  # words whose lexeme is remembered (to_tsvector's stem of a query word never changes)
_STATS_SQL = ("SELECT s.most_common_elems::text::text[], s.most_common_elem_freqs, "
              "(SELECT c.reltuples FROM pg_class c WHERE c.oid = to_regclass(s.tablename)) FROM pg_stats s "
              "WHERE s.schemaname = current_schema() AND s.tablename = ? AND s.attname = 'tsv'")
_STEMS_SQL = (f"SELECT w, array_to_string(tsvector_to_array(to_tsvector('{TS_CONFIG}', w)), ' ') "
              "FROM unnest(?::text[]) w")


@dataclass
class ColumnStats:
    """One tsvector column's sampled lexeme shares (ANALYZE's) and the table's estimated rows then."""

    shares: dict[str, float]
    least: float  # the least share listed: a lexeme not listed holds fewer rows than this share
    rows: float


@dataclass
class WordStats:
    """The statistics of the store's tsvector columns as one connection read them, and query words' stems."""

    tables: dict[str, tuple[float, ColumnStats | None]] = field(default_factory=dict)  # (read at, stats or None)
    stems: dict[str, str] = field(default_factory=dict)  # word -> its lexeme ("" for a stopword)

    def rows(self, conn: Any, word: str, table: str, n_rows: int | None = None) -> tuple[float, float] | None:
        """(at least, at most) rows of `table` holding the single word, as the statistics tell; None when they tell
        nothing (no statistics yet). n_rows: the table's rows now, if known (a table that shrank since ANALYZE)."""
        stats = self.column(conn, table)
        if stats is None:
            return None
        lexeme = self.stem(conn, word)
        if not lexeme or " " in lexeme:
            return None
        rows = stats.rows if n_rows is None else min(stats.rows, n_rows)
        if lexeme in stats.shares:
            return stats.shares[lexeme] * rows, stats.shares[lexeme] * rows
        return 0.0, stats.least * rows

    def column(self, conn: Any, table: str) -> ColumnStats | None:
        read_at, stats = self.tables.get(table, (-STATS_SECONDS, None))
        if time.monotonic() - read_at >= STATS_SECONDS:
            stats = read_stats(conn, table)
            self.tables[table] = (time.monotonic(), stats)
        return stats

    def stem(self, conn: Any, word: str) -> str:
        if word not in self.stems:
            if len(self.stems) >= STEMS_KEPT:
                self.stems.clear()
            self.stems.update(conn.execute(_STEMS_SQL, ([word],)).fetchall())
        return self.stems[word]

    def learn_stems(self, conn: Any, table: str, words: list[str]) -> None:
        """The stems of several words in one statement (a query's words, before their estimates), if the table's
        statistics will be asked about them."""
        new = [w for w in dict.fromkeys(words) if w not in self.stems]
        if new and self.column(conn, table) is not None:
            if len(self.stems) + len(new) > STEMS_KEPT:
                self.stems.clear()
            self.stems.update(conn.execute(_STEMS_SQL, (new,)).fetchall())


def read_stats(conn: Any, table: str) -> ColumnStats | None:
    """The column's statistics, or None when ANALYZE has not sampled it (or found no lexeme)."""
    row = conn.execute(_STATS_SQL, (table,)).fetchone()
    if row is None or not row[0] or not row[1] or row[2] is None or row[2] <= 0:
        return None
    elems, freqs, rows = row
    shares = dict(zip(elems, freqs))  # the freqs end with the least, the greatest and the null share
    return ColumnStats(shares, float(freqs[len(elems)]), float(rows))


def of(conn: Any) -> WordStats:
    """The connection's word statistics (kept on it: they outlive changes of the index)."""
    if conn.word_stats is None:
        conn.word_stats = WordStats()
    return conn.word_stats
