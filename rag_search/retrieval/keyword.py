"""Keyword retrieval: user text → a safe FTS5 expression, and the BM25 query with filters inside.

User text never reaches MATCH raw. Words become quoted terms joined with OR (natural-language
queries need OR; FTS5's bare-word default is AND); stopwords are dropped when other words remain.
Quoted "exact phrases" stay phrases; identifiers such as kube-proxy, snake_case_name or
INV-2024-0042 become phrases of their parts, so they match only in sequence; a trailing * asks
for a prefix. A camelCase word also matches its split form (parseConfig OR "parse config"), which
code chunks hold as keywords (identifiers.py): parseConfig, parse_config and "parse config" meet.

Two indexes answer the same expression: chunks_fts (passages) and items_fts (each item's whole text,
so a query whose words fall into different chunks of one item still matches it as a whole).

On large indexes, words that occur in very many chunks (a corpus-specific stopword list) are dropped
from the OR when rarer words are present: they add little to BM25 yet make FTS5 score most of the index.
If every word is that common, all of them are required (AND), and OR is the fallback when the AND finds
too few (unless the OR would rank most of the index: then the AND's rows stand).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from rag_search import cjk
from rag_search.retrieval.filters import SqlFilter
from rag_search.retrieval.identifiers import is_mixed_case, split_identifier

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most my
    myself no nor not now of off on once only or other our ours ourselves out over own same she should so
    some such than that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with would you your yours
    yourself yourselves""".split()
)

_PHRASE = re.compile(r'"([^"]*)"')
_EDGE_PUNCT = "\"'`.,;:!?()[]{}<>«»“”‘’"
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class Term:
    text: str  # the words of the term, space-joined, lower-case
    phrase: bool = False  # several words that must appear in order
    prefix: bool = False
    split: str | None = None  # a mixed-case identifier's words (parseConfig → "parse config"), matched as well
    gram: bool = False  # a bigram of a run of unspaced script (Chinese, Japanese: rag_search.cjk)

    def fts(self) -> str:
        quoted = '"' + self.text.replace('"', '""') + '"' + ("*" if self.prefix else "")
        if not self.split:
            return quoted
        return f'({quoted} OR "{self.split}"{"*" if self.prefix else ""})'


# A query's keyword side ORs its terms, and each costs a doclist read (and the reranker a pass over the candidates'
# text): a pasted 2,000-character query of 667 distinct words held the index 3.9 s. The first terms typed count.
MAX_TERMS = 32


def parse_terms(query: str) -> list[Term]:
    """The searchable terms of a user query, stopwords dropped unless nothing else is left."""
    terms: list[Term] = []
    for phrase in _PHRASE.findall(query):
        words = [g for w in _WORD.findall(phrase.lower()) for g in _grams_or_word(w)]
        if words:
            terms.append(Term(" ".join(words), phrase=len(words) > 1))
    rest = _PHRASE.sub(" ", query)
    for raw in rest.split():
        token = raw.strip(_EDGE_PUNCT)
        if cjk.has_cjk(token):
            terms += _cjk_terms(token)
            continue
        prefix = token.endswith("*")
        words = _WORD.findall(token.rstrip("*").lower())
        if not words:
            continue
        terms.append(Term(" ".join(words), phrase=len(words) > 1, prefix=prefix, split=_split(token.rstrip("*"))))
    meaningful = [t for t in terms if t.phrase or t.prefix or t.text not in STOPWORDS]
    return list(dict.fromkeys(meaningful or terms))[:MAX_TERMS]


def _grams_or_word(word: str) -> list[str]:
    return [g for piece, is_cjk in cjk.split_runs(word) for g in (cjk.grams(piece) if is_cjk else [piece])]


def _cjk_terms(token: str) -> list[Term]:
    """A word holding unspaced script: its other parts as words, each of its runs' bigrams a term of its own (OR:
    text holding more of them ranks first; their chunks hold the same bigrams as keywords, rag_search.cjk)."""
    out = []
    for piece, is_cjk in cjk.split_runs(token.lower()):
        if is_cjk:
            out += [Term(g, gram=True) for g in cjk.grams(piece)]
        else:
            words = _WORD.findall(piece)
            if words:
                out.append(Term(" ".join(words), phrase=len(words) > 1))
    return out


def _split(token: str) -> str | None:
    """parseConfig → "parse config" (its chunks' keywords hold that form; see identifiers.py); else None."""
    if not is_mixed_case(token):
        return None
    return " ".join(split_identifier(token)) or None


def match_expression(terms: list[Term]) -> str | None:
    if not terms:
        return None
    return " OR ".join(t.fts() for t in terms)


# A word is "common" when it is in more rows than this (on indexes of more rows). FTS5 scores every row that
# matches a MATCH ... ORDER BY rank (~2.5 us a row at 1M chunks), so this bounds a query's cost whatever the index
# size: up to 100k chunks it is the 5% it used to be; at 1M a 5% threshold let words of 50k rows in (p95 ~400 ms).
COMMON_MIN_DOCS = 5_000
UNRANKABLE_FRACTION = 0.2  # all-common words matching more than this share: no keyword ranking in hybrid
# In hybrid, a word in more rows than this leaves an all-common AND: FTS5's bm25 counts the rows of every phrase
# of a ranked query by reading its whole doclist (a word in 470k of 1M chunks: 25 ms per table and query)
AND_MAX_DOCS = 50_000
RANK_BUDGET = 5_000  # ... or more rows than this (their AND, counted up to it): the vector side carries the query


CHUNKS, ITEMS = "chunks_fts", "items_fts"
PROBE_MAX = 200  # up to this many chunks, the best chunk of an item is found by probing each of them


@dataclass
class KeywordRun:
    ids: list[int] = field(default_factory=list)  # chunk ids (chunks_fts) or item ids (items_fts), best first
    expression: str | None = None
    dropped: list[str] = field(default_factory=list)  # common words left out of the MATCH
    scores: list[float] = field(default_factory=list)  # BM25 per id (FTS5 rank: lower is better)
    rare: bool = False  # the expression holds no common word (FTS5 reads each phrase's whole doclist per statement)


def search(conn: Any, terms: list[Term], where: SqlFilter, limit: int, n_total: int,
           df_cache: dict[str, int], may_skip: bool = False, table: str = CHUNKS,
           split: Callable | None = None, corpus: Any = None, held: Any = None, passing: Any = None) -> KeywordRun:
    """Ids best first for the terms, with common words pruned on large indexes.

    table: chunks_fts (chunk ids; n_total = chunks) or items_fts (item ids; n_total = items).
    corpus: the caller's collections' word statistics (retrieval/corpus.py): counts, pruning and BM25 over those
    collections only (then n_total is ignored); None: the whole index's.
    may_skip (hybrid search): when every word is common and together they still match more than
    UNRANKABLE_FRACTION of the index or RANK_BUDGET rows, BM25 cannot tell those rows apart (and would
    score them all) — the keyword side is skipped and the vector side carries the query.
    split(table, where, expression, limit): ranks the rows of an all-common expression (many: FTS5 scores each)
    in parts at once, with the same result (engine: a long-running server's second connection).
    held: the index's most common words in RAM (common_words.py, a server's): an unfiltered expression of them
    only is ranked and counted there, with FTS5's scores (~2 ms where FTS5 takes 20-90 ms at 100k chunks).
    passing: `where` as a flag per rowid of those it lets through, per table (a filter of dates, collections and
    facets tested on the facts in RAM: bit_matrix.BitMatrix.rows_passing), so that held words are ranked in RAM under
    it.
    Row counts stop at the limit they are compared with: counting a word in 470k of 1M chunks takes 36 ms,
    learning that it is in more than 5,000 takes 0.4 ms.
    """
    run = KeywordRun()
    if not terms:
        return run
    if corpus is not None:
        n_total = corpus.rows(table)
    df = (lambda t, upto=None: corpus.df(t, table, upto)) if corpus is not None else \
        (lambda t, upto=None: _df(conn, t, df_cache, table, upto))
    fts_count = corpus.count if corpus is not None else (lambda tbl, expr, cap: _count(conn, tbl, expr, cap))
    if corpus is not None:
        held = None  # the scope's statistics are not the whole index's

    def count(tbl: str, expr: str, cap: int, these: list[Term], anded: bool) -> int:
        n = held.count(tbl, these, anded) if held is not None else None
        return fts_count(tbl, expr, cap) if n is None else min(n, cap)
    threshold = COMMON_MIN_DOCS
    common = []
    if n_total > COMMON_MIN_DOCS:
        common = [t for t in terms if not (t.phrase or t.prefix) and df(t) > threshold]
    rare = [t for t in terms if t not in common]
    sql = keyword_sql(where, table)

    def rows_of(expression: str, these: list[Term] | None = None, anded: bool = False) -> list:
        """(id, BM25) best first: FTS5's own ranking (in halves when `split` and no rare term), or the scope's
        (corpus.ranked), or from RAM (`held`: `these` terms, ANDed or ORed, when all are held common words)."""
        if corpus is not None:
            return corpus.ranked(table, expression, where, limit)
        if held is not None and these is not None and (where.empty or passing is not None):
            rows = held.rank(table, these, anded, limit, None if where.empty else passing,
                             counted=lambda t: df_cache.get(f"{table}:{COMMON_MIN_DOCS}:{t.text}"))
            if rows is not None:
                return rows
        if split is not None and not rare:
            return split(table, where, expression, limit)
        return conn.execute(sql, (expression, *where.params, limit)).fetchall()

    if rare:
        run.expression, run.dropped = match_expression(rare), [t.text for t in common]
        # single words left in are rare by construction; a phrase or a prefix may match any number of rows
        run.rare = n_total <= COMMON_MIN_DOCS or not any(t.phrase or t.prefix for t in rare)
    else:
        ranked = common
        if may_skip:  # words in very many rows cost their whole doclist per ranked query (bm25 counts them)
            ranked = [t for t in common if df(t, AND_MAX_DOCS) <= AND_MAX_DOCS]
            run.dropped = [t.text for t in common if t not in ranked]
        every = " AND ".join(t.fts() for t in ranked)
        budget = int(min(RANK_BUDGET, UNRANKABLE_FRACTION * n_total))
        if may_skip and (not ranked or count(table, every, budget + 1, ranked, True) > budget):
            run.dropped = [t.text for t in common]
            return run
        run.expression = every
        _fill(run, rows_of(run.expression, ranked, True))
        if len(run.ids) >= limit:
            return run
        either = match_expression(terms)
        if run.ids and count(table, either, RANK_BUDGET * 5 + 1, terms, False) > RANK_BUDGET * 5:
            return run  # the OR of very common words would rank most of the index for a few more rows
        run.expression = either
        _fill(run, rows_of(run.expression, terms, False))
        return run
    _fill(run, rows_of(run.expression, rare, False))
    return run


def _fill(run: KeywordRun, rows: list) -> None:
    run.ids, run.scores = [r[0] for r in rows], [r[1] for r in rows]


def _df(conn: Any, term: Term, cache: dict[str, int], table: str = CHUNKS, upto: int | None = None) -> int:
    """Rows holding the term, counted up to one past `upto` (the common-word threshold by default), cached per
    index state."""
    upto = COMMON_MIN_DOCS if upto is None else upto
    key = f"{table}:{upto}:{term.text}"
    if key not in cache:
        cache[key] = _count(conn, table, term.fts(), upto + 1)
    return cache[key]


def _count(conn: Any, table: str, expression: str, cap: int) -> int:
    """Rows matching the expression, counted up to `cap`."""
    return conn.execute(f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {table} MATCH ? LIMIT ?)",
                        (expression, cap)).fetchone()[0]


# The tables' BM25 (their configured `rank`, migrations.py), called in the statement: ORDER BY rank makes FTS5 score
# and sort every match before the LIMIT applies; ordering by the function lets SQLite keep only the best LIMIT rows
# while scoring (a word in 47k of 100k chunks: 133 -> 85 ms of CPU). Equal scores: the lower rowid first, as FTS5's
# own sort returned them (checked on 1,600 rankings of the bench indexes, filtered and not).
WEIGHTS = {CHUNKS: {"title": 2.0, "text": 1.0, "keywords": 0.5}, ITEMS: {"title": 2.0, "text": 1.0}}  # per column
BM25 = {table: f"bm25({table}, {', '.join(map(repr, w.values()))})" for table, w in WEIGHTS.items()}


def keyword_sql(where: SqlFilter, table: str = CHUNKS, rowids: bool = False) -> str:
    """Ids by BM25 (title weighted 2x, as the table's rank) for `MATCH ?` and the filters. Parameters: the
    expression, (with `rowids`: the rowid range's bounds, exclusive and inclusive), the filters', the limit.

    An item passes the filters when one of its chunks does.
    """
    match = f"{table} MATCH ?" + (f" AND {table}.rowid > ? AND {table}.rowid <= ?" if rowids else "")
    if table == ITEMS:
        cond = "" if where.empty else (  # per matching item, one indexed probe (IN would list every passing item)
            f" AND EXISTS (SELECT 1 FROM items i WHERE i.id = items_fts.rowid AND {where.item_sql})" if where.item_sql
            else " AND EXISTS (SELECT 1 FROM chunks c JOIN items i ON i.id = c.item_id "
            f"WHERE c.item_id = items_fts.rowid AND {where.sql})")
        return (f"SELECT items_fts.rowid, {BM25[ITEMS]} AS score FROM items_fts WHERE {match}{cond} "
                "ORDER BY score, items_fts.rowid LIMIT ?")
    joins = "" if where.empty else " JOIN chunks c ON c.id = chunks_fts.rowid JOIN items i ON i.id = c.item_id"
    cond = "" if where.empty else f" AND {where.sql}"
    return (
        f"SELECT chunks_fts.rowid, {BM25[CHUNKS]} AS score FROM chunks_fts{joins} "
        f"WHERE {match}{cond} ORDER BY score, chunks_fts.rowid LIMIT ?"
    )


def exact_items(conn: Any, terms: list[Term], where: SqlFilter, max_items: int) -> dict[int, list[str]]:
    """Items holding a query term that at most `max_items` items (in scope) hold: exact rare-term matches.

    An identifier or rare word found in one note is what the user is after, whatever the vector side says.
    Each lookup stops after max_items + 1 rows, so common terms cost nothing.
    """
    out: dict[int, list[str]] = {}
    # a count, not a ranking: no BM25
    sql = keyword_sql(where, ITEMS).replace(f"{BM25[ITEMS]} AS score", "0").replace(" ORDER BY score, items_fts.rowid", "")
    for t in terms:
        if t.prefix or t.gram or (t.text in STOPWORDS and not t.phrase):  # a bigram alone is no identifier
            continue
        ids = [r[0] for r in conn.execute(sql, (t.fts(), *where.params, max_items + 1))]
        if 0 < len(ids) <= max_items:
            for item in ids:
                if _literally(conn, item, t):
                    out.setdefault(item, []).append(t.text)
    return out


def _literally(conn: Any, item_id: int, term: Term) -> bool:
    """The item holds the term as written, not only its stem: "equations" must not pin the one note that says
    "equate" (porter makes both "equat")."""
    words = term.text.split()
    pattern = re.compile(r"(?<!\w)" + r"\W+".join(map(re.escape, words)) + r"(?!\w)", re.IGNORECASE)
    rows = conn.execute("SELECT title, text FROM chunks WHERE item_id = ?", (item_id,))
    return any(pattern.search(title) or pattern.search(text) for title, text in rows)


def best_chunks(conn: Any, item_ids: list[int], expression: str | None, where: SqlFilter, probe: bool = False,
                terms: list[Term] | None = None, df_cache: dict[str, int] | None = None,
                corpus: Any = None, held: Any = None) -> dict[int, int]:
    """Per item, its chunk that best matches the query, else its first chunk passing the filters.

    probe: the expression holds rare words only, so the items' chunks are ranked by BM25 (FTS5 computes each
    phrase's document count per statement, cheap for rare words). Otherwise a common word would make that count
    read its whole doclist (a word in most of 100k chunks: 80 ms; at 1M 0.8 s, whatever the few chunks asked
    about), so each term is matched unranked among the items' chunks instead (~0.5 ms at 1M) and the chunk
    holding the rarest of them wins (`_covering`).
    """
    out: dict[int, int] = {}
    cond = "" if where.empty else f" AND {where.for_rows}"  # a few items' chunks: checked one by one
    items = json.dumps(item_ids)
    chunks = conn.execute(f"SELECT c.id, c.item_id FROM chunks c JOIN items i ON i.id = c.item_id WHERE c.item_id IN "
                          f"(SELECT value FROM json_each(?)){cond} ORDER BY c.id", (items, *where.params)).fetchall()
    if expression and probe and corpus is not None:  # the scope's BM25 picks (the whole index's must not)
        item_of = dict(chunks)
        scored = corpus.rescore(CHUNKS, expression, list(item_of))
        for chunk, score in sorted(scored.items(), key=lambda r: (r[1], r[0])):
            if score < 0:  # it matches (a chunk holding no query phrase scores 0)
                out.setdefault(item_of[chunk], chunk)
    elif expression and probe and len(chunks) <= PROBE_MAX:
        # A few items: rank only their own chunks, in one statement (a statement per chunk took ~4 ms each), rather
        # than every chunk of the index that matches. `+rowid IN`: FTS5 walks the expression's (rare) rows and the
        # list is checked on each; a plain `rowid IN` makes FTS5 open a cursor per listed chunk, each counting the
        # phrase's rows again for its BM25 (140 chunks, a word in 3k: 16.5 -> 0.5 ms at 100k chunks).
        item_of = dict(chunks)
        rows = conn.execute(f"SELECT rowid, {BM25[CHUNKS]} AS score FROM {CHUNKS} WHERE {CHUNKS} MATCH ? AND +rowid IN "
                            "(SELECT value FROM json_each(?)) ORDER BY score, rowid",
                            (expression, json.dumps(list(item_of))))
        for chunk, _ in rows:
            out.setdefault(item_of[chunk], chunk)
    elif expression and probe:  # many chunks, rare words: ranking their few matches in the index is cheap
        rows = conn.execute(
            "SELECT c.item_id, chunks_fts.rowid FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid "
            "JOIN items i ON i.id = c.item_id WHERE chunks_fts MATCH ? AND c.item_id IN (SELECT value FROM json_each(?))"
            f"{cond} ORDER BY chunks_fts.rank", (expression, items, *where.params))
        for item, chunk in rows:
            out.setdefault(item, chunk)
    elif terms:
        out.update(_covering(conn, chunks, terms, {} if df_cache is None else df_cache, corpus, held))
    rest = [i for i in item_ids if i not in out]
    if rest:
        rows = conn.execute(
            "SELECT c.item_id, min(c.idx), c.id FROM chunks c JOIN items i ON i.id = c.item_id "
            f"WHERE c.item_id IN (SELECT value FROM json_each(?)){cond} GROUP BY c.item_id",
            (json.dumps(rest), *where.params))
        out.update({item: chunk for item, _, chunk in rows})
    return out


def _covering(conn: Any, chunks: list[tuple[int, int]], terms: list[Term], df_cache: dict[str, int],
              corpus: Any = None, held: Any = None) -> dict[int, int]:
    """Per item (of `chunks`: (chunk id, item id) by chunk id), its chunk holding the rarest query terms: the sum
    over the distinct terms it holds of log(1 + (COMMON_MIN_DOCS + 1) / rows holding the term, counted up to
    COMMON_MIN_DOCS + 1); ties go to the item's first chunk."""
    item_of = dict(chunks)
    ids = json.dumps(list(item_of))
    score: dict[int, float] = {}
    for t in terms:
        # a common word held in RAM (common_words.py): its chunks among these without a doclist seek per chunk
        found = held.holding(CHUNKS, t, list(item_of)) if held is not None else None
        if found is None:
            found = [r[0] for r in conn.execute(f"SELECT rowid FROM {CHUNKS} WHERE {CHUNKS} MATCH ? AND rowid IN "
                                                "(SELECT value FROM json_each(?))", (t.fts(), ids))]
        if found:
            rows = corpus.df(t, CHUNKS) if corpus is not None else _df(conn, t, df_cache, CHUNKS)
            weight = math.log(1 + (COMMON_MIN_DOCS + 1) / max(rows, 1))
            for chunk in found:
                score[chunk] = score.get(chunk, 0.0) + weight
    out: dict[int, int] = {}
    best: dict[int, float] = {}
    for chunk, item in chunks:  # by chunk id: the first of equal scores stays
        if chunk in score and score[chunk] > best.get(item, 0.0):
            out[item], best[item] = chunk, score[chunk]
    return out
