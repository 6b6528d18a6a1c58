"""Keyword retrieval on the PostgreSQL store: the same terms as rag.db's FTS5 side (keyword.parse_terms), as a
tsquery over `chunks.tsv` and `item_docs.tsv`, ranked by ts_rank with the same column weights, filters inside.

A term is a phrase of its words (`'kube' <-> 'proxy'`), a prefix ends in `:*`, a mixed-case identifier also
matches its split form; terms are ORed. On large indexes single words in more than COMMON_MIN_DOCS rows are
left out while rarer words remain (as on rag.db: ranking every row of a very common word is what costs);
if every word is common they are ANDed. Scores are negated (lower is better, as FTS5's rank).
"""

from __future__ import annotations

import math
from typing import Any

from rag_search.retrieval.filters import SqlFilter
from rag_search.retrieval.keyword import COMMON_MIN_DOCS, STOPWORDS, KeywordRun, Term, _literally
from rag_search.store.pg.schema import TS_CONFIG

CHUNKS, ITEMS, NAMES = "chunks", "item_docs", "item_names"
WEIGHTS = "'{0.1, 0.25, 0.5, 1.0}'"  # D, C (keywords), B (text), A (title): FTS5's bm25(2.0, 1.0, 0.5) by ratio
QUERY = f"to_tsquery('{TS_CONFIG}', ?)"
_ID = {CHUNKS: "id", ITEMS: "item_id", NAMES: "id"}


def _words(text: str, prefix: bool) -> str:
    quoted = [f"'{w}'" for w in text.split()]
    if prefix and quoted:
        quoted[-1] += ":*"
    joined = " <-> ".join(quoted)
    return f"({joined})" if len(quoted) > 1 else joined


def term_query(t: Term) -> str:
    """One term in to_tsquery syntax (its words are \\w+ runs: nothing to escape but the quoting)."""
    own = _words(t.text, t.prefix)
    return f"({own} | {_words(t.split, t.prefix)})" if t.split else own


def expression(terms: list[Term], joiner: str = " | ") -> str | None:
    return joiner.join(term_query(t) for t in terms) if terms else None


def count(conn: Any, table: str, expr: str, cap: int) -> int:
    """Rows matching the expression, counted up to `cap`."""
    return conn.execute(f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE tsv @@ {QUERY} LIMIT ?) m",
                        (expr, cap)).fetchone()[0]


def df(conn: Any, term: Term, cache: dict[str, int], table: str = CHUNKS, upto: int = COMMON_MIN_DOCS) -> int:
    """Rows holding the term, counted up to one past `upto`, cached per index state (as keyword._df)."""
    key = f"pg:{table}:{upto}:{term.text}"
    if key not in cache:
        cache[key] = count(conn, table, term_query(term), upto + 1)
    return cache[key]


def ranked_sql(where: SqlFilter, table: str, idfs: list[float] = ()) -> str:
    """Ids and their negated score for: one `?` per idf (each term's tsquery text), `?` (the whole expression), the
    filters' params, `?` (limit). The score sums each term's ts_rank times its IDF (ts_rank alone weighs every word
    the same: a word in half the rows counts as much as a rare one, where BM25 would hardly count it); without idfs
    it is the expression's ts_rank."""
    alias = "d" if table == ITEMS else "c"
    rank = " + ".join(f"{idf:.6f} * ts_rank({WEIGHTS}, {alias}.tsv, to_tsquery('{TS_CONFIG}', ?), 1)" for idf in idfs)
    score = f"-({rank})" if idfs else f"-ts_rank({WEIGHTS}, {alias}.tsv, q, 1)"
    if table == ITEMS:
        cond = "" if where.empty else (" AND EXISTS (SELECT 1 FROM chunks c JOIN items i ON i.id = c.item_id "
                                        f"WHERE c.item_id = d.item_id AND {where.sql})")
        return (f"SELECT d.item_id, {score} AS score FROM {QUERY} q, item_docs d "
                f"WHERE d.tsv @@ q{cond} ORDER BY score, d.item_id LIMIT ?")
    joins = "" if where.empty else " JOIN items i ON i.id = c.item_id"
    cond = "" if where.empty else f" AND {where.sql}"
    return (f"SELECT c.id, {score} AS score FROM {QUERY} q, chunks c{joins} "
            f"WHERE c.tsv @@ q{cond} ORDER BY score, c.id LIMIT ?")


def idf(n_total: int, rows: int) -> float:
    """BM25's inverse document frequency."""
    return math.log(1 + (n_total - rows + 0.5) / (rows + 0.5))


def search(conn: Any, terms: list[Term], where: SqlFilter, limit: int, n_total: int, df_cache: dict[str, int],
           table: str = CHUNKS) -> KeywordRun:
    run = KeywordRun()
    if not terms:
        return run
    counted = {t: df(conn, t, df_cache, table) for t in terms}  # up to COMMON_MIN_DOCS + 1, cached
    common = [t for t in terms if n_total > COMMON_MIN_DOCS and not (t.phrase or t.prefix)
              and counted[t] > COMMON_MIN_DOCS]
    rare = [t for t in terms if t not in common]
    run.dropped = [t.text for t in common] if rare else []
    run.rare = bool(rare) and (n_total <= COMMON_MIN_DOCS or not any(t.phrase or t.prefix for t in rare))
    rows = _ranked(conn, rare or common, " | " if rare else " & ", where, table, limit, n_total, counted, run)
    if not rare and len(rows) < limit:  # every word common and their AND too narrow: any of them
        rows = _ranked(conn, terms, " | ", where, table, limit, n_total, counted, run)
    run.ids, run.scores = [r[0] for r in rows], [float(r[1]) for r in rows]
    return run


def _ranked(conn: Any, terms: list[Term], joiner: str, where: SqlFilter, table: str, limit: int, n_total: int,
            counted: dict[Term, int], run: KeywordRun) -> list:
    run.expression = expression(terms, joiner)
    idfs = [idf(n_total, counted[t]) for t in terms]
    params = (*(term_query(t) for t in terms), run.expression, *where.params, limit)
    return conn.execute(ranked_sql(where, table, idfs), params).fetchall()


def exact_items(conn: Any, terms: list[Term], where: SqlFilter, max_items: int) -> dict[int, list[str]]:
    """Items holding a query term that at most `max_items` items in scope hold (keyword.exact_items)."""
    out: dict[int, list[str]] = {}
    sql = ranked_sql(where, ITEMS).replace(" ORDER BY score, d.item_id", "")
    for t in terms:
        if t.prefix or t.gram or (t.text in STOPWORDS and not t.phrase):
            continue
        ids = [r[0] for r in conn.execute(sql, (term_query(t), *where.params, max_items + 1))]
        if 0 < len(ids) <= max_items:
            for item in ids:
                if _literally(conn, item, t):
                    out.setdefault(item, []).append(t.text)
    return out


def best_chunks(conn: Any, item_ids: list[int], expr: str | None, where: SqlFilter) -> dict[int, int]:
    """Per item, its chunk that best matches the expression, else its first chunk passing the filters."""
    cond = "" if where.empty else f" AND {where.for_rows}"
    out: dict[int, int] = {}
    if expr:
        rows = conn.execute(
            f"SELECT DISTINCT ON (c.item_id) c.item_id, c.id FROM {QUERY} q, chunks c JOIN items i ON i.id = c.item_id "
            f"WHERE c.item_id = ANY(?) AND c.tsv @@ q{cond} "
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
