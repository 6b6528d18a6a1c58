"""Keyword retrieval on the PostgreSQL store: the same terms as rag.db's FTS5 side (keyword.parse_terms), as a
tsquery over `chunks.tsv` and `item_docs.tsv`, ranked by BM25 as FTS5's bm25() (k1 1.2, b 0.75, the title counting
twice), filters inside. BM25 is computed from what a tsvector holds: a word's count in the row from ts_rank (ZETA2),
the row's length as its tsvector's size.

A term is a phrase of its words (`'kube' <-> 'proxy'`), a prefix ends in `:*`, a mixed-case identifier also
matches its split form; terms are ORed. The budgets are rag.db's (keyword.search): on large indexes single words
in more than COMMON_MIN_DOCS rows are left out while rarer words remain; if every word is common they are ANDed,
in hybrid search skipped when that AND would rank more than RANK_BUDGET rows (the vector side carries the query),
and the OR of common words is the fallback only when it would rank at most RANK_BUDGET × 5 rows. Those row counts
cost what the rows cost (GIN answers with a whole bitmap): a word the column's statistics put well over a threshold
is not counted (word_stats.py), and an AND's or OR's rows are counted only when its words' rows do not bound them.
Scores are negated (lower is better, as FTS5's rank).

Ranking reads each matching row's tsvector (an item's is ~10 kB, compressed out of line: ~8 us a row), so at
most ROW_BUDGET rows are ranked: candidates are taken from the GIN index in a cheap order of likely relevance
(rows holding every term, then rows of each term from the rarest up) and only they are scored. Where fewer rows
match, every one is ranked (the same hits as an unbounded ranking). Statements run with sequential scans off:
the planner does not count the cost of reading those tsvectors, and picks a scan that reads them all. A server holds
the index's common words in RAM (pg/common_words.py, `held`): an unfiltered expression of them is counted and ranked
there, over every row it matches.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Any, Iterator

from rag_search.retrieval.filters import SqlFilter
from rag_search.retrieval.pg import word_stats
from rag_search.retrieval.keyword import (AND_MAX_DOCS, COMMON_MIN_DOCS, RANK_BUDGET, STOPWORDS, UNRANKABLE_FRACTION,
                                          KeywordRun, Term, _literally)
from rag_search.store.pg.schema import TS_CONFIG

CHUNKS, ITEMS, NAMES = "chunks", "item_docs", "item_names"
WEIGHTS = "'{0.1, 0.25, 0.5, 1.0}'"  # D, C (keywords), B (text), A (title): FTS5's bm25(2.0, 1.0, 0.5) by ratio
QUERY = f"to_tsquery('{TS_CONFIG}', ?)"
_ID = {CHUNKS: "id", ITEMS: "item_id", NAMES: "id"}
ROW_BUDGET = 2_000  # rows ranked per statement at most (ranking reads each one's tsvector)
K1, B = 1.2, 0.75  # BM25's (FTS5's bm25())
# ts_rank of one word with every weight 1 and no normalization is sum(1/j^2 for j <= tf) / ZETA2: tf = round(1 /
# (ZETA2 * (1 - rank)) - 0.5) recovers the word's count in the row (a term in the title counts once more, as FTS5's
# title weight 2)
ZETA2 = 1.6449341
AVG_SAMPLE = 1_000
# A row's tsvector read once into memory, unchanged (setweight of no lexemes copies it as it is). `tsv || ''` did the
# same at twice the cost: concatenation rebuilds the vector (2,000 item tsvectors of ~10 kB at 100k chunks, a 4-term
# score: 66 ms with `|| ''`, 27 ms this way, 12 reads from storage without either)
DETOASTED = "setweight(r.tsv, 'A', '{}'::text[])"
# A filter given as the chunk ids passing it (pg/engine.py: PgSearchEngine._listed), one array parameter
LISTED_CHUNKS = "c.id = ANY(?)"


def _words(text: str, prefix: bool, weight: str = "") -> str:
    words = text.split()
    quoted = [f"'{w}'" + (f":{weight}" if weight else "") for w in words]
    if prefix and quoted:
        quoted[-1] = f"'{words[-1]}':*{weight}"
    joined = " <-> ".join(quoted)
    return f"({joined})" if len(quoted) > 1 else joined


def term_query(t: Term, weight: str = "") -> str:
    """One term in to_tsquery syntax (its words are \\w+ runs: nothing to escape but the quoting)."""
    own = _words(t.text, t.prefix, weight)
    return f"({own} | {_words(t.split, t.prefix, weight)})" if t.split else own


def expression(terms: list[Term], joiner: str = " | ") -> str | None:
    return joiner.join(term_query(t) for t in terms) if terms else None


@contextmanager
def index_scans(conn: Any) -> Iterator[None]:
    """Statements inside read full-text matches through the GIN indexes (sequential scans off, in a transaction):
    a seq scan evaluates @@ on every row's tsvector, which the planner prices as free (a word in 45% of 100k
    items, counted to 5,001: 31 ms by seq scan, 2 ms by the index). Nested uses share the outer transaction (a
    search stage pays its three round trips once)."""
    if conn.index_scans:
        yield
        return
    with conn.raw.transaction():
        conn.execute("SELECT set_config('enable_seqscan', 'off', true)")
        conn.index_scans = True
        try:
            yield
        finally:
            conn.index_scans = False


def count(conn: Any, table: str, expr: str, cap: int) -> int:
    """Rows matching the expression, counted up to `cap`."""
    with index_scans(conn):
        return conn.execute(f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE tsv @@ {QUERY} LIMIT ?) m",
                            (expr, cap)).fetchone()[0]


def df(conn: Any, term: Term, cache: dict[str, int], table: str = CHUNKS, upto: int | None = None,
       n_rows: int | None = None, held: Any = None) -> int:
    """Rows holding the term, counted up to one past `upto` (COMMON_MIN_DOCS), cached per index state (as keyword._df);
    a word the column's statistics put at well over `upto` rows is `upto + 1` uncounted (word_stats: its count costs
    what its rows cost); a word held in RAM (`held`, pg/common_words.py) is counted there."""
    upto = COMMON_MIN_DOCS if upto is None else upto
    key = f"pg:{table}:{upto}:{term.text}"
    if key not in cache:
        low, _ = estimate(conn, term, table, n_rows) or (0.0, None)
        if low > word_stats.MARGIN * upto:
            cache[key] = upto + 1
        else:
            cache[key] = _count(conn, table, [term], " | ", upto + 1, held)
    return cache[key]


def _count(conn: Any, table: str, terms: list[Term], joiner: str, cap: int, held: Any) -> int:
    """Rows matching the terms' AND or OR, up to `cap`: from RAM when every term is held, else counted."""
    n = held.count(conn, table, terms, joiner == " & ") if held is not None else None
    return count(conn, table, expression(terms, joiner), cap) if n is None else min(n, cap)


def estimate(conn: Any, term: Term, table: str, n_rows: int | None = None) -> tuple[float, float] | None:
    """(at least, at most) rows holding a single plain word by the column's statistics; None: unknown."""
    if not estimable(term):
        return None
    return word_stats.of(conn).rows(conn, term.text, table, n_rows)


def over(conn: Any, term: Term, cache: dict[str, int], table: str, cap: int, n_rows: int | None = None,
         held: Any = None) -> bool:
    """Whether more than `cap` rows hold the term. A cost decision (AND_MAX_DOCS): the statistics' estimate decides
    when they list the word or put it well under `cap`; otherwise it is counted."""
    low, high = estimate(conn, term, table, n_rows) or (0.0, math.inf)
    if low > 0:
        return low > cap
    if high * word_stats.MARGIN < cap:
        return False
    return df(conn, term, cache, table, cap, n_rows, held) > cap


def matches_over(conn: Any, terms: list[Term], joiner: str, cap: int, counted: dict[Term, int],
                 cache: dict[str, Any], table: str, n_rows: int | None = None, held: Any = None) -> bool:
    """Whether the AND (joiner " & ") or OR (" | ") of the terms matches more than `cap` rows. Each term's rows bound
    it (an AND holds at most its rarest term's rows; an OR at least its commonest's, at most their sum): only
    between the bounds is it counted, once per index state."""
    bounds = [_bounds(conn, t, counted, table, n_rows) for t in terms]
    if joiner == " & " and min(hi for _, hi in bounds) <= cap:
        return False
    if joiner == " | " and (max(lo for lo, _ in bounds) > cap or sum(hi for _, hi in bounds) <= cap):
        return max(lo for lo, _ in bounds) > cap
    expr = expression(terms, joiner)
    key = f"pg:{table}:{cap}:{expr}"
    if key not in cache:
        cache[key] = _count(conn, table, terms, joiner, cap + 1, held)
    return cache[key] > cap


def _bounds(conn: Any, term: Term, counted: dict[Term, int], table: str, n_rows: int | None) -> tuple[float, float]:
    """(at least, at most) rows holding the term: its count when under COMMON_MIN_DOCS (exact), else the statistics'
    estimate, else "over COMMON_MIN_DOCS"."""
    if counted[term] <= COMMON_MIN_DOCS:
        return counted[term], counted[term]
    low, high = estimate(conn, term, table, n_rows) or (0.0, math.inf)
    return max(low, counted[term]), max(high, counted[term])


def _scope(where: SqlFilter, table: str) -> tuple[str, str, str]:
    """(alias, joins, AND-condition) that keep a statement over `table` to the rows passing the filters; an item
    passes when one of its chunks does. A filter may be the chunk ids that pass (LISTED_CHUNKS)."""
    if where.sql == LISTED_CHUNKS and table != ITEMS:
        return "c", "", f" AND {where.sql}"
    if table == ITEMS:
        cond = "" if where.empty else (" AND EXISTS (SELECT 1 FROM chunks c JOIN items i ON i.id = c.item_id "
                                        f"WHERE c.item_id = d.item_id AND {where.sql})")
        return "d", "", cond
    if where.empty:
        return "c", "", ""
    return "c", " JOIN items i ON i.id = c.item_id", f" AND {where.sql}"


def ranked_sql(where: SqlFilter, table: str, idfs: list[float], avgdl: float, parts: int = 1) -> str:
    """Ids and their negated BM25, best first. Params: per part `?` (a tsquery text), the filters' params and `?`
    (that part's row limit); `?` (rows ranked at most); per term `?` `?` (its tsquery text, twice) and `?` (the
    same in the title, weight A); `?` (limit). A phrase's ts_rank is no count of it: a matching phrase counts 1.
    Each candidate's tsvector is read once (DETOASTED makes it a value in memory: the functions after it would each
    read it from its compressed, out-of-line storage again), from the row the candidate scan read: fetching the
    candidates again by id cost 2,000 index lookups (~30 of a chunk ranking's 60 ms at 100k chunks)."""
    alias, joins, cond = _scope(where, table)
    rows, key = (f"item_docs {alias}", "item_id") if table == ITEMS else (f"chunks {alias}{joins}", "id")
    part = f"(SELECT {alias}.{key} AS k, {alias}.tsv FROM {rows} WHERE {alias}.tsv @@ {QUERY}{cond} LIMIT ?)"
    tf = tf_sql("r.tsv", QUERY)
    xs = ", ".join(f"greatest({tf}, (r.tsv @@ {QUERY})::int) + (r.tsv @@ {QUERY})::int AS x{i}"
                   for i in range(len(idfs)))
    norm = norm_sql("dl", avgdl)
    score = " + ".join(f"{w:.6f} * x{i} * {K1 + 1} / (x{i} + {norm})" for i, w in enumerate(idfs))
    return (f"WITH cand AS (SELECT DISTINCT ON (k) k, tsv FROM (SELECT k, tsv FROM "
            f"({' UNION ALL '.join([part] * parts)}) p LIMIT ?) p ORDER BY k) "
            f"SELECT k, -({score}) AS score FROM (SELECT r.k, pg_column_size(r.tsv) AS dl, {xs} FROM "
            f"(SELECT r.k, {DETOASTED} AS tsv FROM cand r OFFSET 0) r) s ORDER BY score, k LIMIT ?")


def tf_sql(tsv: str, query: str) -> str:
    """A word's count in the row, recovered from ts_rank (ZETA2); 0 where the word is not in the row."""
    return f"round(1 / greatest({ZETA2} * (1 - ts_rank('{{1,1,1,1}}', {tsv}, {query}, 0)), 0.004) - 0.5)"


def norm_sql(dl: str, avgdl: float) -> str:
    """BM25's length normalisation of a row of size `dl` (numeric arithmetic, as the ranking computes it)."""
    return f"{K1} * ({1 - B} + {B} * {dl} / {max(avgdl, 1.0):.3f})"


def idf(n_total: int, rows: int) -> float:
    """BM25's inverse document frequency."""
    return math.log(1 + (n_total - rows + 0.5) / (rows + 0.5))


def search(conn: Any, terms: list[Term], where: SqlFilter, limit: int, n_total: int, df_cache: dict[str, int],
           table: str = CHUNKS, may_skip: bool = False, held: Any = None) -> KeywordRun:
    """Ids best first for the terms, with rag.db's budgets (keyword.search; may_skip: hybrid search). held: the
    index's most common words in RAM (pg/common_words.py, a server's): an unfiltered expression of them only is
    counted and ranked there, over all its rows."""
    run = KeywordRun()
    if not terms:
        return run
    word_stats.of(conn).learn_stems(conn, table, [t.text for t in terms if estimable(t)])  # one statement for all
    counted = {t: df(conn, t, df_cache, table, n_rows=n_total, held=held) for t in terms}  # up to COMMON_MIN_DOCS + 1
    common = [t for t in terms if n_total > COMMON_MIN_DOCS and not (t.phrase or t.prefix)
              and counted[t] > COMMON_MIN_DOCS]
    rare = [t for t in terms if t not in common]
    if rare:
        run.dropped = [t.text for t in common]
        run.rare = n_total <= COMMON_MIN_DOCS or not any(t.phrase or t.prefix for t in rare)
        return _fill(run, _ranked(conn, rare, " | ", where, table, limit, n_total, counted, run, df_cache, held))
    ranked = common
    if may_skip:  # a word in very many rows leaves the AND (rag.db: its whole doclist is read per ranked query)
        ranked = [t for t in common if not over(conn, t, df_cache, table, AND_MAX_DOCS, n_total, held)]
        run.dropped = [t.text for t in common if t not in ranked]
    budget = int(min(RANK_BUDGET, UNRANKABLE_FRACTION * n_total))
    if may_skip and (not ranked or matches_over(conn, ranked, " & ", budget, counted, df_cache, table, n_total,
                                                held)):
        run.dropped = [t.text for t in common]
        return run
    rows = _ranked(conn, ranked, " & ", where, table, limit, n_total, counted, run, df_cache, held)
    if len(rows) < limit and not (rows and matches_over(conn, terms, " | ", RANK_BUDGET * 5, counted, df_cache,
                                                        table, n_total, held)):  # the OR of very common words
        rows = _ranked(conn, terms, " | ", where, table, limit, n_total, counted, run, df_cache, held)
    return _fill(run, rows)


def estimable(term: Term) -> bool:
    """A single plain word: the statistics may know its rows."""
    return not (term.phrase or term.prefix or term.split or term.gram)


def _fill(run: KeywordRun, rows: list) -> KeywordRun:
    run.ids, run.scores = [r[0] for r in rows], [float(r[1]) for r in rows]
    return run


def _ranked(conn: Any, terms: list[Term], joiner: str, where: SqlFilter, table: str, limit: int, n_total: int,
            counted: dict[Term, int], run: KeywordRun, cache: dict[str, Any], held: Any = None) -> list:
    """The terms' rows, best first; at most ROW_BUDGET candidates ranked (the module docstring), or all of them
    in RAM when every term is a held word and nothing filters."""
    run.expression = expression(terms, joiner)
    idfs = [idf(n_total, counted[t]) for t in terms]
    if held is not None and where.empty:
        rows = held.rank(conn, table, terms, joiner == " & ", limit, idfs, avg_size(conn, table, cache), counted)
        if rows is not None:
            return rows
    parts = [run.expression]
    if joiner == " | " and len(terms) > 1:  # rows holding every term first, then each term's, rarest first
        parts = [expression(terms, " & ")] + [term_query(t) for t in sorted(terms, key=lambda t: counted[t])]
    params = (*(p for q in parts for p in (q, *where.params, ROW_BUDGET)), ROW_BUDGET,
              *(p for t in terms for p in (term_query(t), term_query(t), term_query(t, "A"))), limit)
    sql = ranked_sql(where, table, idfs, avg_size(conn, table, cache), len(parts))
    with index_scans(conn):
        return conn.execute(sql, params).fetchall()


def avg_size(conn: Any, table: str, cache: dict[str, Any]) -> float:
    """The mean size of the table's tsvectors in bytes (BM25's average length: a tsvector's size grows with its
    words and their positions), from its first AVG_SAMPLE rows, cached per index state (as df)."""
    key = f"pg:{table}:avg_size"
    if key not in cache:
        cache[key] = float(conn.execute(f"SELECT COALESCE(avg(pg_column_size(tsv || ''::tsvector)), 1) FROM "
                                        f"(SELECT tsv FROM {table} LIMIT {AVG_SAMPLE}) s").fetchone()[0])
    return cache[key]


def exact_items(conn: Any, terms: list[Term], where: SqlFilter, max_items: int,
                cache: dict[str, int] | None = None) -> dict[int, list[str]]:
    """Items holding a query term that at most `max_items` items in scope hold (keyword.exact_items). Without filters
    a term whose items were counted already (`cache`, df's) at over max_items is not looked up again: a lookup of a
    common word builds its whole bitmap however few rows it reads (6-10 ms at 1M chunks)."""
    out: dict[int, list[str]] = {}
    _, _, cond = _scope(where, ITEMS)
    sql = f"SELECT d.item_id FROM item_docs d WHERE d.tsv @@ {QUERY}{cond} LIMIT ?"
    for t in terms:
        if t.prefix or t.gram or (t.text in STOPWORDS and not t.phrase):
            continue
        if where.empty and (cache or {}).get(f"pg:{ITEMS}:{COMMON_MIN_DOCS}:{t.text}", 0) > max_items:
            continue
        with index_scans(conn):
            ids = [r[0] for r in conn.execute(sql, (term_query(t), *where.params, max_items + 1))]
        if 0 < len(ids) <= max_items:
            for item in ids:
                if _literally(conn, item, t):
                    out.setdefault(item, []).append(t.text)
    return out


def best_chunks(conn: Any, item_ids: list[int], expr: str | None, where: SqlFilter, common: bool = False
                ) -> dict[int, int]:
    """Per item, its chunk that best matches the expression, else its first chunk passing the filters. common: the
    expression holds a common word; then the items' chunks are read and tested one by one, not through the GIN index
    (which builds the word's whole bitmap to AND it with the items': 52k rows at 1M chunks, 77 ms for 10 items
    whose ~100 chunks are tested in under 1 ms)."""
    cond = "" if where.empty else f" AND {where.for_rows}"
    out: dict[int, int] = {}
    if expr:
        source = "(SELECT * FROM chunks WHERE item_id = ANY(?) OFFSET 0) c" if common else "chunks c"
        own = "" if common else "c.item_id = ANY(?) AND "
        rows = conn.execute(
            f"SELECT DISTINCT ON (c.item_id) c.item_id, c.id FROM {QUERY} q, {source} JOIN items i ON i.id = c.item_id "
            f"WHERE {own}c.tsv @@ q{cond} "
            f"ORDER BY c.item_id, ts_rank({WEIGHTS}, c.tsv, q, 1) DESC, c.id", (expr, list(item_ids), *where.params))
        out.update(dict(rows.fetchall()))
    rest = [i for i in item_ids if i not in out]
    if rest:
        rows = conn.execute("SELECT DISTINCT ON (c.item_id) c.item_id, c.id FROM chunks c JOIN items i ON i.id = c.item_id "
                            f"WHERE c.item_id = ANY(?){cond} ORDER BY c.item_id, c.idx", (rest, *where.params))
        out.update(dict(rows.fetchall()))
    return out


# -- names (retrieval/titles.py's three lookups) ------------------------------------------------------------------

class NameLookups:
    """titles.search's backend on PostgreSQL: document frequencies, candidate name rows, and stems."""

    def df(self, conn: Any, term: Term, cache: dict[str, int], table: str) -> int:
        return df(conn, term, cache, ITEMS)

    def candidates(self, conn: Any, terms: list[Term], rare: list[Term], where: SqlFilter) -> list[tuple[int, str]]:
        cond = "" if where.empty else (" AND EXISTS (SELECT 1 FROM chunks c JOIN items i ON i.id = c.item_id "
                                        f"WHERE c.item_id = n.item_id AND {where.sql})")
        sql = f"SELECT n.id, n.name FROM {QUERY} q, item_names n WHERE n.tsv @@ q{cond}"
        phrase = _words(" ".join(t.text for t in terms), False)
        from rag_search.retrieval.titles import EXACT_ROWS, NAME_ROWS

        rows = dict(conn.execute(f"{sql} LIMIT ?", (phrase, *where.params, EXACT_ROWS)).fetchall())
        if rare:
            rows.update(conn.execute(f"{sql} ORDER BY ts_rank(n.tsv, q) DESC, n.id LIMIT ?",
                                     (expression(rare), *where.params, NAME_ROWS)).fetchall())
        return list(rows.items())

    def stems(self, conn: Any, texts: dict[int, str]) -> dict[int, list[str]]:
        """Each text's lexemes in order, as to_tsvector makes them (what @@ compares)."""
        keys, values = list(texts), list(texts.values())
        rows = conn.execute(
            f"SELECT k, v.lexeme FROM unnest(?::bigint[], ?::text[]) AS t(k, txt), "
            f"unnest(to_tsvector('{TS_CONFIG}', t.txt)) AS v, unnest(v.positions) AS p ORDER BY k, p", (keys, values))
        out: dict[int, list[str]] = {}
        for k, lexeme in rows:
            out.setdefault(k, []).append(lexeme)
        return out
