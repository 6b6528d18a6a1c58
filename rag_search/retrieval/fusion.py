"""Reciprocal Rank Fusion: score(d) = sum over retrievers r of weight_r / (k + rank_r(d))."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Fused:
    chunk_id: int
    score: float = 0.0
    ranks: dict[str, int] = field(default_factory=dict)


def rrf(rankings: dict[str, list[int]], weights: dict[str, float], k: int = 60) -> list[Fused]:
    """Fuse ranked id lists (best first, ranks from 1); ties keep the better best rank first."""
    fused: dict[int, Fused] = {}
    for name, ids in rankings.items():
        weight = weights.get(name, 1.0)
        for rank, chunk_id in enumerate(ids, start=1):
            entry = fused.setdefault(chunk_id, Fused(chunk_id))
            entry.score += weight / (k + rank)
            entry.ranks[name] = rank
    return sorted(fused.values(), key=lambda f: (-f.score, min(f.ranks.values()), f.chunk_id))
