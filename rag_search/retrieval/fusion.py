"""Reciprocal Rank Fusion: score(d) = sum over retrievers r of weight_r / (k + rank_r(d)).

Results are items, not fragments: each retriever's chunk ranking becomes an item ranking (an item takes
the rank of its best chunk), the whole-item keyword ranking joins them, and RRF fuses the item rankings.
The chunk shown for an item is its best chunk by the same fusion over the chunk rankings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from rag_search.retrieval.titles import NameMatch


@dataclass
class Fused:
    id: int  # a chunk id or an item id, whichever the rankings hold
    score: float = 0.0
    ranks: dict[str, int] = field(default_factory=dict)

    @property
    def chunk_id(self) -> int:
        return self.id


def rrf(rankings: dict[str, list[int]], weights: dict[str, float], k: int = 60,
        strengths: dict[str, dict[int, float]] | None = None) -> list[Fused]:
    """Fuse ranked id lists (best first, ranks from 1); ties keep the better best rank first.

    strengths: for a list whose scores mean something on their own (the names list: how much of an item's name,
    and of the query, a match covers), each id's contribution is also scaled by its strength (0..1)."""
    return [Fused(id_, score, ranks) for id_, score, ranks in _rrf(rankings, weights, k, strengths)]


def _rrf(rankings: dict[str, list[int]], weights: dict[str, float], k: int,
         strengths: dict[str, dict[int, float]] | None = None) -> list[tuple[int, float, dict[str, int]]]:
    """rrf's (id, score, ranks), best first, without an object per id (a query fuses ~300 chunks: fuse_items)."""
    scores: dict[int, float] = {}
    ranks: dict[int, dict[str, int]] = {}
    best: dict[int, int] = {}  # each id's best rank in any list (ties' order)
    for name, ids in rankings.items():
        weight = weights.get(name, 1.0)
        if weight <= 0:
            continue
        scale = (strengths or {}).get(name)
        for rank, id_ in enumerate(ids, start=1):
            part = weight * (scale[id_] if scale else 1.0) / (k + rank)
            if id_ in scores:
                scores[id_] += part
                ranks[id_][name] = rank
                if rank < best[id_]:
                    best[id_] = rank
            else:
                scores[id_] = 0.0 + part
                ranks[id_] = {name: rank}
                best[id_] = rank
    order = [i for _, _, i in sorted([(-v, best[i], i) for i, v in scores.items()])]
    return [(i, scores[i], ranks[i]) for i in order]


def item_ranking(chunk_ids: list[int], item_of: dict[int, int]) -> list[int]:
    """Items in the order of their best chunk."""
    return list(dict.fromkeys(item_of[c] for c in chunk_ids if c in item_of))


@dataclass
class FusedItem:
    """One item of the fused ranking, with the chunk that represents it and its other matching chunks."""

    item_id: int
    score: float
    ranks: dict[str, int]  # item rank per retriever
    chunk_id: int | None = None  # best chunk (None: only the whole-item index found it; chosen later)
    chunk_ranks: dict[str, int] = field(default_factory=dict)
    others: list[int] = field(default_factory=list)  # other matching chunks, best first
    rerank_score: float | None = None


def fuse_items(item_rankings: dict[str, list[int]], chunk_rankings: dict[str, list[int]], item_of: dict[int, int],
               weights: dict[str, float], chunk_weights: dict[str, float], k: int,
               pinned: list[int] = (), strengths: dict[str, dict[int, float]] | None = None) -> list[FusedItem]:
    """Items by RRF over the item rankings; each with its chunks ordered by RRF over the chunk rankings.

    pinned: items that go first, in this order (exact rare-term matches, see engine); strengths: see rrf.
    """
    by_item: dict[int, list] = {}
    for chunk in _rrf(chunk_rankings, chunk_weights, k):
        item = item_of.get(chunk[0])
        if item is not None:
            by_item.setdefault(item, []).append(chunk)
    out = []
    for item, score, ranks in _rrf(item_rankings, weights, k, strengths):
        mine = by_item.get(item)
        if mine:
            out.append(FusedItem(item, score, ranks, mine[0][0], mine[0][2], [c[0] for c in mine[1:]]))
        else:
            out.append(FusedItem(item, score, ranks, None, {}, []))
    if pinned:
        order = {item: n for n, item in enumerate(pinned)}
        out.sort(key=lambda x: order.get(x.item_id, len(order)))  # stable: the rest keep their fused order
    return out


def fuse_chunks(chunk_rankings: dict[str, list[int]], item_rankings: dict[str, list[int]], item_of: dict[int, int],
                weights: dict[str, float], k: int) -> list[Fused]:
    """Chunks by RRF (chunk-level results): a chunk also earns its item's whole-item keyword rank."""
    rankings = dict(chunk_rankings)
    for name, items in item_rankings.items():
        if name in rankings or weights.get(name, 1.0) <= 0:
            continue
        rank_of = {item: r for r, item in enumerate(items, start=1)}
        candidates = dict.fromkeys(c for ids in chunk_rankings.values() for c in ids)
        scored = sorted((rank_of[item_of[c]], c) for c in candidates if item_of.get(c) in rank_of)
        rankings[name] = [c for _, c in scored]
    return rrf(rankings, weights, k)


@dataclass
class Retrieved:
    """Each retriever's candidates for one query, before fusion."""

    chunk_rankings: dict[str, list[int]] = field(default_factory=dict)  # vector, keyword_chunks: chunk ids
    item_rankings: dict[str, list[int]] = field(default_factory=dict)  # vector, keyword, keyword_chunks: item ids
    item_of: dict[int, int] = field(default_factory=dict)  # chunk id → item id
    item_bm25: dict[int, float] = field(default_factory=dict)  # whole-item BM25 (FTS5 rank, lower is better)
    chunk_distance: dict[int, float] = field(default_factory=dict)  # cosine distance of vector candidates
    query_vector: np.ndarray | None = None
    embedder_id: str | None = None  # the index's embedder, which the vectors (and their centre) are of
    vectors: dict[int, np.ndarray] = field(default_factory=dict)  # float vectors read this query (rescoring)
    exact: dict[int, list[str]] = field(default_factory=dict)  # item → rare query terms only it (or few) hold
    names: dict[int, NameMatch] = field(default_factory=dict)  # item → its name the query best covers (titles.py)
    found_share: float = 1.0  # share of the query's terms the index holds (unmatched.py; 1.0 unless multilingual)
    rows: dict[int, tuple] = field(default_factory=dict)  # chunk rows read this query (chunk_rows.py)
    terms: list = field(default_factory=list)  # the query's keyword.parse_terms (parsed once a search)
