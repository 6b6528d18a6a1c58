"""Reranking the fused top N items: a small protocol, an offline feature reranker, an Ollama-backed one.

A Reranker scores candidates (an item with its best chunk and what the retrievers said about it); the
engine reorders the fused top `search.rerank_top` by those scores within `search.rerank_budget_ms`.
Candidates a reranker could not score in time keep their fused order below the scored ones' slots.

- `features` (offline, no model call): a linear model over what retrieval already computed — the fused
  RRF score, whole-item BM25, the best chunk's cosine similarity (the bundled model's own output),
  query-term coverage of the chunk and of the title, term proximity, exact rare-term matches.
  Weights fitted on the SciFact train split (`python bench/quality.py --fit-rerank`).
- `ollama`: a stronger embedding model served by Ollama (default bge-m3) embeds the query and each
  candidate's best chunk; its cosine order is fused with the first-stage order by RRF.
"""

from __future__ import annotations

import functools
import math
import re
import time
from dataclasses import dataclass, field
from itertools import compress, count
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from rag_search import cjk
from rag_search.retrieval.keyword import MAX_TERMS, STOPWORDS

if TYPE_CHECKING:
    from rag_search.config import SearchSettings
    from rag_search.retrieval.fusion import FusedItem, Retrieved

RERANKERS = ("off", "features", "ollama")
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass
class Candidate:
    """One fused item as a reranker sees it."""

    item_id: int
    chunk_id: int | None
    title: str
    text: str  # the best chunk's text
    fused_rank: int  # 1-based position in the fused order
    fused_score: float
    bm25: float | None = None  # whole-item BM25 (FTS5 rank: negative, lower is better)
    distance: float | None = None  # cosine distance of the best-matching chunk to the query, if known
    exact: int = 0  # rare query terms only this item (or very few) holds
    name: float = 0.0  # how well the query names the item (its title, an alias: retrieval/titles.py), 0..1
    vector_rank: int | None = None  # the item's rank on the vector side
    heading: str = ""  # the best chunk's heading path
    chunks: list[int] = field(default_factory=list)  # its best and next matching chunks (for the second cosine)
    second: float | None = None  # cosine distance of its second-closest of those chunks (the closest if alone)
    idf: dict[str, float] = field(default_factory=dict)  # the query's stems → IDF over items (one dict per query)
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, item: FusedItem, got: Retrieved, texts: tuple[str, ...], rank: int = 0) -> Candidate:
        chunks = [c for c in [item.chunk_id, *item.others[:SECOND_CHUNKS - 1]] if c is not None]
        dists = sorted(got.chunk_distance[c] for c in chunks if c in got.chunk_distance)
        named = got.names.get(item.item_id)
        return cls(item.item_id, item.chunk_id, texts[0], texts[1], rank, item.score,
                   got.item_bm25.get(item.item_id), dists[0] if dists else None, len(got.exact.get(item.item_id, ())),
                   named.score if named else 0.0, item.ranks.get("vector"), texts[2] if len(texts) > 2 else "", chunks,
                   dists[1] if len(dists) > 1 else None)


class Reranker(Protocol):
    id: str

    def scores(self, query: str, candidates: list[Candidate], deadline: float) -> list[float | None]:
        """A score per candidate (higher is better); None where it ran out of time (time.monotonic() > deadline)."""


def apply_rerank(reranker: Reranker, query: str, candidates: list[Candidate], got: Retrieved, budget_s: float,
                 store: Any = None) -> tuple[list[int], list[float | None], str | None]:
    """The new order of candidates (indexes), their scores, and a note when the budget or an error cut it short."""
    for n, c in enumerate(candidates, start=1):
        c.fused_rank = n
    if got.query_vector is not None and store is not None:
        _fill_distances(store, got.query_vector, candidates, got.vectors, got.embedder_id)
    deadline = time.monotonic() + budget_s
    note = None
    try:
        scores = reranker.scores(query, candidates, deadline)
    except Exception as exc:  # a reranker never fails the search: the fused order stands
        return list(range(len(candidates))), [None] * len(candidates), f"reranker {reranker.id} failed ({exc}); fused order kept"
    scored = [n for n, s in enumerate(scores) if s is not None]
    if len(scored) < len(candidates):
        note = f"reranker {reranker.id} scored {len(scored)} of {len(candidates)} within {budget_s * 1000:.0f} ms"
    best_first = sorted(scored, key=lambda n: (-scores[n], n))  # type: ignore[operator]
    order, it = [], iter(best_first)
    for n in range(len(candidates)):  # scored candidates share out the scored slots; the rest stay put
        order.append(next(it) if scores[n] is not None else n)
    return order, scores, note


def _fill_distances(store: Any, query: np.ndarray, candidates: list[Candidate], known: dict | None = None,
                    embedder_id: str | None = None) -> None:
    """Cosine distances of each candidate's chunks that the vector side did not return (from the cache): its best
    chunk's, and the second-closest of its best and next matching chunks. known: vectors read already;
    embedder_id: the index's (read from the store when not given)."""
    from rag_search.embedders.centres import bits_centre_of
    from rag_search.store.vectors import fetch_vectors, ranking_query

    known = known or {}
    if embedder_id is None:
        recorded = store.embedder
        embedder_id = recorded[0] if recorded else None
    vecs = {c: known[c] for cand in candidates for c in cand.chunks if c in known}
    wanted = [c for cand in candidates for c in cand.chunks if c not in vecs]
    if wanted:
        vecs.update(fetch_vectors(store.conn, wanted, embedder_id))
    centre = bits_centre_of(embedder_id) if embedder_id else None
    q = ranking_query(query, centre).astype(np.float32)  # as the vector side measured them
    # one row-by-row dot product each (np.vecdot: the same BLAS dot as `vecs[c] @ q`, so the same float32 values,
    # without a numpy call per chunk: 240 chunks 0.33-0.55 -> ~0.13 ms, most of it gathering the rows; np.stack
    # gathered them in twice np.array's time)
    ids = list(vecs)
    distance = dict(zip(ids, (1.0 - np.vecdot(np.array([vecs[c] for c in ids]), q)).tolist())) if ids else {}
    for cand in candidates:
        dists = sorted(distance[c] for c in cand.chunks if c in distance)
        if cand.distance is None and cand.chunk_id in distance:
            cand.distance = distance[cand.chunk_id]
        if dists:
            cand.second = dists[1] if len(dists) > 1 else dists[0]


def query_idf(conn: Any, query: str, n_items: int, df_cache: dict[str, int],
              postgres: bool = False) -> dict[str, float]:
    """The query's stems → log(1 + items / items holding the word), counted as the keyword side counts (cached)."""
    from rag_search.retrieval.keyword import Term

    if postgres:
        from rag_search.retrieval.pg import keyword as pg_keyword

        def df(w: str) -> int:
            return pg_keyword.df(conn, Term(w), df_cache, pg_keyword.ITEMS)
    else:
        from rag_search.retrieval.keyword import ITEMS, _df

        def df(w: str) -> int:
            return _df(conn, Term(w), df_cache, ITEMS)
    return {_stem(w): math.log(1 + n_items / max(df(w), 1)) for w in query_words(query)}


# -- the offline feature reranker -------------------------------------------------------------

FEATURES = ("fused", "bm25", "cosine", "coverage", "title", "proximity", "exact", "name", "idf_coverage",
            "idf_title", "idf_heading", "vector_rank", "second_cosine")
SECOND_CHUNKS = 8  # chunks of an item (its best and next matching ones) the second-cosine feature reads
# Fitted by bench/cv.py's procedure on every training set at once, each weighted the same (SciFact train, the
# generated notes set, dendron, vue-zh, vue-zh-en; foam held out): `python bench/quality.py --fit`. Figures in
# bench/RESULTS.md, "Held-out ranking (issue 35)".
DEFAULT_WEIGHTS = {"fused": 2.54, "bm25": 1.162, "cosine": 0.881, "coverage": 0.729, "title": 0.752, "proximity": 0.618,
                   "exact": 0.143, "name": 0.241, "idf_coverage": 0.955, "idf_title": 0.594, "idf_heading": 0.333,
                   "vector_rank": 1.025, "second_cosine": 0.913}


# \w over ASCII text is [0-9A-Za-z_]: every other byte becomes a space, then split (4x the regex's speed; the reranker
# reads 30 candidates' texts a query)
_ASCII_WORDS = bytes(b if chr(b).isalnum() or b == 95 else 32 for b in range(128)) + b" " * 128


def tokens(text: str) -> list[str]:
    """Lower-case words, runs of unspaced script (Chinese, Japanese) as their bigrams (rag_search.cjk)."""
    if text.isascii():
        return text.encode("ascii").lower().translate(_ASCII_WORDS).decode("ascii").split()
    words = _WORD.findall(text.lower())
    if not cjk.has_cjk(text):  # one scan of the text, not one per word
        return words
    return [g for w in words for piece, is_cjk in cjk.split_runs(w) for g in (cjk.grams(piece) if is_cjk else [piece])]


def query_words(query: str) -> list[str]:
    words = tokens(query)
    return (list(dict.fromkeys(w for w in words if w not in STOPWORDS)) or list(dict.fromkeys(words)))[:MAX_TERMS]


@functools.lru_cache(maxsize=1 << 16)
def _stem(w: str) -> str:
    for suffix in ("ing", "ed", "es", "s", "ly"):
        if len(w) > len(suffix) + 3 and w.endswith(suffix):
            return w[: -len(suffix)]
    return w


def features(query: str, candidates: list[Candidate]) -> np.ndarray:
    """One row of FEATURES per candidate, each scaled to about [0, 1] within this candidate list."""
    qstems = [_stem(w) for w in query_words(query)]
    top_fused = max((c.fused_score for c in candidates), default=1.0) or 1.0
    top_bm25 = max((-c.bm25 for c in candidates if c.bm25 is not None), default=0.0)
    rows = []
    looked_for = _Forms({*qstems, *(candidates[0].idf if candidates else ())})
    for c in candidates:
        raw = tokens(c.text)
        # the text's words that stem to a query stem: the few forms that can, looked up (not a set of every word)
        forms = (looked_for if c.idf is candidates[0].idf else _Forms({*qstems, *c.idf})).held(raw)
        title = {_stem(w) for w in tokens(c.title)}
        present = set(forms.values())
        covered = [q for q in qstems if q in present]
        total = sum(c.idf.values()) or 1.0
        heading = {_stem(w) for w in tokens(c.heading)}
        rows.append([
            c.fused_score / top_fused,
            (-c.bm25 / top_bm25) if (c.bm25 is not None and top_bm25 > 0) else 0.0,
            1.0 - c.distance if c.distance is not None else 0.0,
            len(covered) / len(qstems) if qstems else 0.0,
            sum(q in title for q in qstems) / len(qstems) if qstems else 0.0,
            _proximity(raw, forms, set(covered)),
            min(c.exact, 2) / 2,
            c.name,
            sum(v for q, v in c.idf.items() if q in present) / total,
            sum(v for q, v in c.idf.items() if q in title) / total,
            sum(v for q, v in c.idf.items() if q in heading) / total,
            1.0 / c.vector_rank if c.vector_rank else 0.0,
            1.0 - c.second if c.second is not None else 0.0,
        ])
    return np.asarray(rows, dtype=np.float64).reshape(len(candidates), len(FEATURES))


_SUFFIXES = ("", "ing", "ed", "es", "s", "ly")


class _Forms:
    """The words that stem to one of a query's stems: a stem s plus nothing or one of the suffixes _stem strips (a
    word stems to s only if it is such a form), so a text's forms are found by intersecting its words with these
    few, once per candidate, instead of stemming (or hashing into a set) every word of its text."""

    def __init__(self, stems: set[str]):
        self.stem_of = {}
        for stem in stems:
            for suffix in _SUFFIXES:
                form = stem + suffix
                if _stem(form) == stem:
                    self.stem_of[form] = stem
        self.forms = frozenset(self.stem_of)

    def held(self, words: list[str]) -> dict[str, str]:
        """Those of `words` (a text's), each with its stem."""
        return {w: self.stem_of[w] for w in self.forms.intersection(words)}


def _proximity(words: list[str], stem_of: dict[str, str], wanted: set[str]) -> float:
    """1 / (1 + extra words) of the shortest window of `words` holding every matched query stem (0 if fewer than 2);
    stem_of: the stem of each word that stems to a wanted one. The positions of those words are found without a
    Python step per word (compress over a map: ~2,000 words a candidate)."""
    if len(wanted) < 2:
        return 0.0
    last: dict[str, int] = {}
    best = math.inf
    for pos in compress(count(), map(stem_of.__contains__, words)):
        stem = stem_of[words[pos]]
        if stem in wanted:
            last[stem] = pos
            if len(last) == len(wanted):
                best = min(best, pos - min(last.values()) + 1)
    return 0.0 if best is math.inf else 1.0 / (1.0 + (best - len(wanted)) / 4)


class FeatureReranker:
    """Offline: a fitted linear model over retrieval features; no model call, a few ms for 30 candidates."""

    id = "features"

    def __init__(self, weights: dict[str, float] | None = None):
        w = weights or DEFAULT_WEIGHTS
        self.weights = np.asarray([w.get(f, 0.0) for f in FEATURES], dtype=np.float64)

    def scores(self, query: str, candidates: list[Candidate], deadline: float) -> list[float | None]:
        if not candidates:
            return []
        return [float(s) for s in features(query, candidates) @ self.weights]


# -- the Ollama reranker ----------------------------------------------------------------------

OLLAMA_DEFAULT_MODEL = "bge-m3"
OLLAMA_FUSION_K = 10  # RRF of the first-stage order and the Ollama model's order (top N only)
MAX_CHARS = 2000  # of each candidate's text sent to the model


class OllamaReranker:
    """A stronger embedding model on a local Ollama server re-scores the candidates' best chunks."""

    def __init__(self, host: str, model: str | None = None):
        import ollama  # noqa: F401  (imported now, not inside the first query's budget)

        from rag_search.embedders.ollama import OllamaEmbedder

        self.model = model or OLLAMA_DEFAULT_MODEL
        self.host = host
        self._embedder_cls = OllamaEmbedder
        self.id = f"ollama/{self.model}"

    def scores(self, query: str, candidates: list[Candidate], deadline: float) -> list[float | None]:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not candidates:
            return [None] * len(candidates)
        embedder = self._embedder_cls(self.host, self.model, batch_size=len(candidates) + 1,
                                      timeout_seconds=max(remaining, 0.05))
        texts = [query] + [f"{c.title}\n{c.text}"[:MAX_CHARS] for c in candidates]
        vecs = embedder._embed_batch(texts)  # one request: query and candidates together
        if time.monotonic() > deadline:
            return [None] * len(candidates)
        sims = vecs[1:] @ vecs[0]
        model_rank = {n: r for r, n in enumerate(np.argsort(-sims), start=1)}
        return [1.0 / (OLLAMA_FUSION_K + c.fused_rank) + 1.0 / (OLLAMA_FUSION_K + model_rank[n])
                for n, c in enumerate(candidates)]


def load_reranker(settings: SearchSettings, ollama_host: str | None = None) -> Reranker | None:
    """The configured reranker (search.reranker), or None when it is off."""
    kind = getattr(settings, "reranker", "off")
    if kind == "features":
        return FeatureReranker()
    if kind == "ollama":
        from rag_search.config import Paths

        return OllamaReranker(ollama_host or Paths.from_env().ollama_host, getattr(settings, "rerank_model", None))
    return None
