"""Keyword retrieval: user text → a safe FTS5 expression, and the BM25 query with filters inside.

User text never reaches MATCH raw. Words become quoted terms joined with OR (natural-language
queries need OR; FTS5's bare-word default is AND); stopwords are dropped when other words remain.
Quoted "exact phrases" stay phrases; identifiers such as kube-proxy, snake_case_name or
INV-2024-0042 become phrases of their parts, so they match only in sequence; a trailing * asks
for a prefix.

On large indexes, words that occur in very many chunks (a corpus-specific stopword list) are dropped
from the OR when rarer words are present: they add almost nothing to BM25 yet make FTS5 score most
of the index. If every word is that common, all of them are required (AND), and OR is the fallback.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rag_search.retrieval.filters import SqlFilter

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

    def fts(self) -> str:
        quoted = '"' + self.text.replace('"', '""') + '"'
        return quoted + ("*" if self.prefix else "")


def parse_terms(query: str) -> list[Term]:
    """The searchable terms of a user query, stopwords dropped unless nothing else is left."""
    terms: list[Term] = []
    for phrase in _PHRASE.findall(query):
        words = _WORD.findall(phrase.lower())
        if words:
            terms.append(Term(" ".join(words), phrase=len(words) > 1))
    rest = _PHRASE.sub(" ", query)
    for raw in rest.split():
        token = raw.strip(_EDGE_PUNCT)
        prefix = token.endswith("*")
        words = _WORD.findall(token.rstrip("*").lower())
        if not words:
            continue
        terms.append(Term(" ".join(words), phrase=len(words) > 1, prefix=prefix))
    meaningful = [t for t in terms if t.phrase or t.prefix or t.text not in STOPWORDS]
    return list(dict.fromkeys(meaningful or terms))


def match_expression(terms: list[Term]) -> str | None:
    if not terms:
        return None
    return " OR ".join(t.fts() for t in terms)


COMMON_MIN_DOCS = 5_000  # a word is "common" if it is in more chunks than this
COMMON_FRACTION = 0.05  # ... and in more than this share of all chunks
UNRANKABLE_FRACTION = 0.2  # all-common words matching more than this share: no keyword ranking in hybrid


@dataclass
class KeywordRun:
    ids: list[int] = field(default_factory=list)
    expression: str | None = None
    dropped: list[str] = field(default_factory=list)  # common words left out of the MATCH


def search(conn: Any, terms: list[Term], where: SqlFilter, limit: int, n_total: int,
           df_cache: dict[str, int], may_skip: bool = False) -> KeywordRun:
    """Chunk ids best first for the terms, with common words pruned on large indexes.

    may_skip (hybrid search): when every word is common and together they still match more than
    UNRANKABLE_FRACTION of the index (estimated), BM25 cannot tell those chunks apart — the keyword
    side is skipped and the vector side carries the query.
    """
    run = KeywordRun()
    if not terms:
        return run
    threshold = max(COMMON_MIN_DOCS, COMMON_FRACTION * n_total)
    common = []
    if n_total > COMMON_MIN_DOCS:
        common = [t for t in terms if not (t.phrase or t.prefix) and _df(conn, t, df_cache) > threshold]
    rare = [t for t in terms if t not in common]
    sql = keyword_sql(where)
    if rare:
        run.expression, run.dropped = match_expression(rare), [t.text for t in common]
    else:
        share = 1.0
        for t in common:
            share *= df_cache[t.text] / n_total
        if may_skip and share > UNRANKABLE_FRACTION:
            run.dropped = [t.text for t in common]
            return run
        run.expression = " AND ".join(t.fts() for t in common)
        run.ids = [r[0] for r in conn.execute(sql, (run.expression, *where.params, limit))]
        if len(run.ids) >= limit:
            return run
        run.expression = match_expression(terms)
    run.ids = [r[0] for r in conn.execute(sql, (run.expression, *where.params, limit))]
    return run


def _df(conn: Any, term: Term, cache: dict[str, int]) -> int:
    if term.text not in cache:
        cache[term.text] = conn.execute("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (term.fts(),)).fetchone()[0]
    return cache[term.text]


def keyword_sql(where: SqlFilter) -> str:
    """Chunk ids by BM25 (title weighted 2x, set as the table's rank) for `MATCH ?` and the filters."""
    joins = "" if where.empty else " JOIN chunks c ON c.id = chunks_fts.rowid JOIN items i ON i.id = c.item_id"
    cond = "" if where.empty else f" AND {where.sql}"
    return (
        f"SELECT chunks_fts.rowid, chunks_fts.rank FROM chunks_fts{joins} "
        f"WHERE chunks_fts MATCH ?{cond} ORDER BY chunks_fts.rank LIMIT ?"
    )
