"""Names as evidence: the items whose title, alias or file name the query names, as a ranked list of their own.

In notes a page named for the question ("how to use tags to organize notes" → the page "Tags") is the strongest
evidence there is, yet whole-text BM25 ranks it behind pages that merely mention the words more often. This
list scores the item names (rag_search.names, table item_names) that the query covers by coverage × weight:
coverage is the share of the name's words the query holds (under half: left out); weight is the share of the
query's information (its terms' IDF over whole items) that those words carry, so a page named "Notes" matches
"rename notes in batch" weakly and a page named "Telemetry" matches "telemetry opt out" strongly; matches under
MIN_SCORE are left out. A name the query equals (ignoring case, spaces and punctuation) scores 1. Words are matched by the index's own tokenizer
(porter unicode61: "callout boxes" covers "Callouts"); filters apply inside the statement, as in the other
retrievers.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from rag_search.names import MAX_NAMES
from rag_search.retrieval.filters import SqlFilter
from rag_search.retrieval.keyword import ITEMS, STOPWORDS, Term, _df, match_expression

NAME_ROWS = 300  # name rows read per query, best BM25 first
MIN_COVERAGE = 0.5  # share of a name's words the query must hold
MIN_SCORE = 0.25  # weaker matches (a name of one common word of a long question) are no evidence
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class NameMatch:
    item_id: int
    name: str
    coverage: float  # share of the name's words the query holds
    weight: float  # share of the query's information those words carry
    exact: bool  # the query is the name

    @property
    def score(self) -> float:
        return 1.0 if self.exact else self.coverage * self.weight


def search(conn: Any, query: str, terms: list[Term], where: SqlFilter, limit: int, n_items: int,
           df_cache: dict[str, int]) -> list[NameMatch]:
    """Best name match per item, best first; at most `limit` items."""
    expression = match_expression(terms)
    if not expression:
        return []
    cond = "" if where.empty else (
        " AND EXISTS (SELECT 1 FROM chunks c JOIN items i ON i.id = c.item_id "
        f"WHERE c.item_id = item_names.rowid / {MAX_NAMES} AND {where.sql})")
    rows = conn.execute(f"SELECT rowid, name FROM item_names WHERE item_names MATCH ?{cond} ORDER BY rank LIMIT ?",
                        (expression, *where.params, NAME_ROWS)).fetchall()
    if not rows:
        return []
    idf = {t: math.log(1 + n_items / max(_df(conn, t, df_cache, ITEMS), 1)) for t in terms}
    total = sum(idf.values()) or 1.0
    held = _terms_held(conn, [r[0] for r in rows], terms)
    plain_query, best = _plain(query), {}
    for rowid, name in rows:
        mine = [t for t in terms if rowid in held[t]]
        words = _words(name)
        if not mine or not words:
            continue
        coverage = min(sum(len(t.text.split()) for t in mine) / len(words), 1.0)
        if coverage < MIN_COVERAGE:
            continue
        match = NameMatch(rowid // MAX_NAMES, name, coverage, sum(idf[t] for t in mine) / total,
                          _plain(name) == plain_query)
        if match.item_id not in best or match.score > best[match.item_id].score:
            best[match.item_id] = match
    strong = [m for m in best.values() if m.score >= MIN_SCORE]
    return sorted(strong, key=lambda m: (-m.score, m.item_id))[:limit]


def _terms_held(conn: Any, rowids: list[int], terms: list[Term]) -> dict[Term, set[int]]:
    """Which of these name rows each term matches (the index's tokenizer decides, stemming included)."""
    ids = json.dumps(rowids)
    return {t: {r[0] for r in conn.execute("SELECT rowid FROM item_names WHERE item_names MATCH ? AND rowid IN "
                                           "(SELECT value FROM json_each(?))", (t.fts(), ids))} for t in terms}


def _words(name: str) -> list[str]:
    words = _WORD.findall(name.lower())
    return [w for w in words if w not in STOPWORDS] or words


def _plain(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))
