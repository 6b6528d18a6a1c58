"""Names as evidence: the items whose title, alias or file name the query names, as a ranked list of their own.

In notes a page named for the question ("how to use tags to organize notes" → the page "Tags") is the strongest
evidence there is, yet whole-text BM25 ranks it behind pages that merely mention the words more often. This
list scores the item names (rag_search.store.names, table item_names) that the query covers by coverage × weight:
coverage is the share of the name's words the query holds (under half: left out); weight is the share of the
query's information (its terms' IDF over whole items) that those words carry, so a page named "Notes" matches
"rename notes in batch" weakly and a page named "Telemetry" matches "telemetry opt out" strongly; matches under
MIN_SCORE are left out. A name the query equals (ignoring case, spaces and punctuation) scores 1. Words are matched by the index's own tokenizer
(porter unicode61: "callout boxes" covers "Callouts"); filters apply inside the statement, as in the other
retrievers.
"""

from __future__ import annotations

import math
import re
import threading
from dataclasses import dataclass
from typing import Any

from rag_search.store.connection import sqlite_driver
from rag_search.store.names import MAX_NAMES
from rag_search.retrieval.filters import SqlFilter
from rag_search.retrieval.keyword import ITEMS, STOPWORDS, Term, _df, match_expression

NAME_ROWS = 100  # name rows read per query for the rarer query words, best BM25 first
EXACT_ROWS = 20  # name rows holding the whole query as a phrase (exact names)
COMMON_SHARE, COMMON_FLOOR = 0.05, 50  # a word in more items than this share (and this many) searches no names
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
           df_cache: dict[str, int], lookups: Any = None) -> list[NameMatch]:
    """Best name match per item, best first; at most `limit` items.

    lookups: where document frequencies, candidate name rows and stems come from (df, candidates, stems); rag.db's
    FTS5 tables by default, the PostgreSQL store's with rag_search.retrieval.pg.keyword.NameLookups."""
    if not terms:
        return []
    lookups = lookups or _Fts5Lookups
    df = {t: lookups.df(conn, t, df_cache, ITEMS) for t in terms}
    idf = {t: math.log(1 + n_items / max(n, 1)) for t, n in df.items()}
    common = max(COMMON_SHARE * n_items, COMMON_FLOOR)
    rows = lookups.candidates(conn, terms, [t for t in terms if df[t] <= common], where)
    if not rows:
        return []
    stems = lookups.stems(conn, {**{-(n + 1): t.text for n, t in enumerate(terms)}, **dict(rows)})
    total, plain_query, best = sum(idf.values()) or 1.0, _plain(query), {}
    for rowid, name in rows:
        mine = [t for n, t in enumerate(terms) if _holds(stems.get(rowid, []), stems.get(-(n + 1), []))]
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


def _candidates(conn: Any, terms: list[Term], rare: list[Term], where: SqlFilter) -> list[tuple[int, str]]:
    """Name rows to score: those holding the whole query as a phrase (an exact name, however common its words), and
    the best BM25 rows for the query's rarer words (a name of common words alone carries little of the query)."""
    cond = "" if where.empty else (
        f" AND EXISTS (SELECT 1 FROM items i WHERE i.id = item_names.rowid / {MAX_NAMES} AND {where.item_sql})"
        if where.item_sql else " AND EXISTS (SELECT 1 FROM chunks c JOIN items i ON i.id = c.item_id "
        f"WHERE c.item_id = item_names.rowid / {MAX_NAMES} AND {where.sql})")
    sql = f"SELECT rowid, name FROM item_names WHERE item_names MATCH ?{cond}"
    phrase = '"' + " ".join(t.text for t in terms).replace('"', '""') + '"'
    rows = dict(conn.execute(f"{sql} LIMIT ?", (phrase, *where.params, EXACT_ROWS)).fetchall())
    if rare:
        rows.update(conn.execute(f"{sql} ORDER BY rank LIMIT ?",
                                 (match_expression(rare), *where.params, NAME_ROWS)).fetchall())
    return list(rows.items())


def _stems(conn: Any, texts: dict[int, str]) -> dict[int, list[str]]:
    """Each text's tokens as the index stems them (porter unicode61), in order, read back through fts5vocab from a
    private in-memory database (`_stemmer`): exactly what MATCH compares, without a statement per term and name.
    `conn` (the index's) is not written: see _stemmer."""
    known = _known_stems()
    out: dict[int, list[str]] = {}
    todo = {}
    for key, text in texts.items():
        stems = known.get(text)
        if stems is None:
            todo[key] = text
        elif stems:
            out[key] = stems
    if not todo:
        return out
    probe = _stemmer()
    fresh: dict[int, list[str]] = {}
    probe.execute("BEGIN")
    try:
        probe.executemany("INSERT INTO name_probe(rowid, name) VALUES (?, ?)", todo.items())
        for term, doc in probe.execute("SELECT term, doc FROM name_probe_vocab ORDER BY doc, offset"):
            fresh.setdefault(doc, []).append(term)
    finally:
        probe.execute("ROLLBACK")  # empty again for the next query
    if len(known) + len(todo) > KNOWN_STEMS:
        known.clear()
    for key, text in todo.items():
        known[text] = fresh.get(key, [])
    out.update(fresh)
    return out


KNOWN_STEMS = 50_000  # texts whose stems a thread keeps (names come back query after query; the tokenizer is fixed)


def _known_stems() -> dict[str, list[str]]:
    """This thread's texts already stemmed (text → its stems, [] for none)."""
    known = getattr(_probes, "known", None)
    if known is None:
        known = _probes.known = {}
    return known


_probes = threading.local()


def _stemmer() -> Any:
    """This thread's in-memory database holding an FTS5 table of the index's tokenizer. Searches never write on the
    index's connection: a write there, even to a TEMP table, changes its total_changes, which the sign bits in RAM
    and the engine's counts take as "the index changed" (every hybrid query re-read the bits and went back to
    sqlite-vec: server-path hybrid p50 21 -> 56 ms at 100k chunks, issue 33)."""
    probe = getattr(_probes, "conn", None)
    if probe is None:
        probe = sqlite_driver().connect(":memory:", isolation_level=None, check_same_thread=False)
        probe.execute("CREATE VIRTUAL TABLE name_probe USING fts5(name, tokenize='porter unicode61')")
        probe.execute("CREATE VIRTUAL TABLE name_probe_vocab USING fts5vocab('name_probe', 'instance')")
        _probes.conn = probe
    return probe


class _Fts5Lookups:
    df = staticmethod(_df)
    candidates = staticmethod(_candidates)
    stems = staticmethod(_stems)


def _holds(name_stems: list[str], term_stems: list[str]) -> bool:
    """The name holds the term: its stems in sequence (a phrase of several words, or one word)."""
    n = len(term_stems)
    if n == 1:  # one word (most terms): a lookup, not a slice per position
        return term_stems[0] in name_stems
    return n > 0 and any(name_stems[i:i + n] == term_stems for i in range(len(name_stems) - n + 1))


def _words(name: str) -> list[str]:
    words = _WORD.findall(name.lower())
    return [w for w in words if w not in STOPWORDS] or words


def _plain(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))
