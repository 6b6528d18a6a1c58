"""A hit's relevance on one scale for every query (0..1), what `min_score` compares: fused and rerank scores are not.

relevance = the larger of two evidences, each 0..1 and each meaning the same for any query:
- meaning: the cosine similarity of the query's vector and the hit's passage vector (negative counts as 0);
- words: the share of the query's words the hit's title, headings and passage hold, each word weighted by its
  rarity in the index (IDF over items), so "the kubernetes upgrade" counts kubernetes far more than "upgrade";
  for a caller who sees only some collections, their rarity in those collections (retrieval/corpus.py: a word only
  another user's notes hold weighs nothing, as if those notes were not there).
A passage holding every rare word of the query scores ~1; one about the same subject in other words scores its
cosine. What a threshold keeps on the judged sets: bench/relevance_scale.py (0.5 keeps about a third of the top 10
and three quarters or more of the judged-relevant hits among them).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Sequence

import numpy as np

from rag_search.embedders.base import embed_queries, reads_script_of
from rag_search.records import Hit
from rag_search.retrieval.rerank import _stem, query_idf, tokens

if TYPE_CHECKING:
    from rag_search.embedders import Embedder
    from rag_search.retrieval.corpus import Corpus
    from rag_search.retrieval.engine import SearchEngine, SearchRequest, SearchResult
    from rag_search.store import Store


def query_vectors(embedder: Embedder | None, texts: Sequence[str]) -> dict[str, np.ndarray]:
    """The vectors of several queries, each what the engine's own embed_query gives (texts the embedder does not read
    are left out): embedders.base.embed_queries."""
    wanted = list(dict.fromkeys(t for t in texts if t.strip() and reads_script_of(embedder, t))) if embedder else []
    if not wanted:
        return {}
    return dict(zip(wanted, embed_queries(embedder, wanted)))  # type: ignore[arg-type]


def engine_query_vectors(engine: SearchEngine, texts: Sequence[str]) -> dict[str, np.ndarray]:
    """query_vectors as the engine would embed them: none when the index holds no vectors yet, EmbedderMismatch
    (naming the command that fixes it) when the index was built by another embedder."""
    from rag_search.store.vectors import check_embedder, recorded_embedder

    if engine.embedder is None:
        return {}
    with engine.store.lock:
        if recorded_embedder(engine.store.conn) is None:
            return {}
        check_embedder(engine.store.conn, engine.embedder.id, engine.embedder.dimensions, engine.store.path)
    return query_vectors(engine.embedder, texts)


def with_relevance(store: Store, query: str, hits: list[Hit], query_vector: np.ndarray | None,
                   corpus: Corpus | None = None) -> list[Hit]:
    """The hits, each with its relevance (Hit.relevance) to the query; `corpus`: the caller's collections' word
    statistics (SearchResult.corpus), None for the whole index's."""
    if not hits:
        return hits
    with store.lock:
        idf = corpus.query_idf(query) if corpus is not None else \
            query_idf(store.conn, query, _items(store), {}, postgres=store.postgres)
        cosine = _cosines(store, [h.chunk_id for h in hits], query_vector)
    return [replace(h, relevance=max(cosine.get(h.chunk_id, 0.0), word_share(idf, h))) for h in hits]


def word_share(idf: dict[str, float], hit: Hit) -> float:
    """The IDF-weighted share of the query's words found in the hit's title, headings and passage."""
    total = sum(idf.values())
    if total <= 0:
        return 0.0
    present = {_stem(w) for w in tokens(" ".join((hit.title, *hit.heading_path, hit.text)))}
    return sum(v for stem, v in idf.items() if stem in present) / total


def _cosines(store: Store, chunk_ids: list[int], query_vector: np.ndarray | None) -> dict[int, float]:
    if query_vector is None:
        return {}
    from rag_search.store.vectors import fetch_vectors

    recorded = store.embedder
    vecs = fetch_vectors(store.conn, chunk_ids, recorded[0] if recorded else None)
    q = np.asarray(query_vector, dtype=np.float32)
    return {c: min(max(float(v @ q), 0.0), 1.0) for c, v in vecs.items()}


def _items(store: Store) -> int:
    """About the number of items (the highest item id: one index lookup, where count(*) reads every row)."""
    return store.conn.execute("SELECT coalesce(max(id), 0) FROM items").fetchone()[0] or 1


def search_with_relevance(engine: SearchEngine, request: SearchRequest) -> SearchResult:
    """engine.search with each hit's relevance (the query embedded once for both, unless the request has it)."""
    vector = request.query_vector
    if vector is None and request.mode != "keyword":
        vector = engine_query_vectors(engine, [request.query]).get(request.query)
    result = engine.search(replace(request, query_vector=vector))
    result.hits = with_relevance(engine.store, request.query, result.hits, vector, result.corpus)
    return result


def at_least(hits: list[Hit], min_score: float | None) -> list[Hit]:
    """The hits whose relevance reaches min_score (all of them without one)."""
    if not min_score:
        return hits
    return [h for h in hits if (h.relevance or 0.0) >= min_score]
