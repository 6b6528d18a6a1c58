"""Words the index does not hold: with a multilingual embedder, a query whose words are mostly absent from the index
(a question in another language than the notes) leans on the vector side in fusion.

Reciprocal Rank Fusion gives the keyword side its full weight whatever it matched. A Russian or German question over
English notes matches only the odd shared word (a product name, a loanword, "mit" in "MIT licence"), and those
matches pushed the vector side's cross-language hits down the fused list. The keyword-side weights (whole-item BM25,
chunk BM25, names) are scaled by the share of the query's terms the index holds: 1 for a query in the notes'
language, lower as more of its words are foreign. Only for embedders that read several languages
(`languages != "en"`): an English-only model's vectors of a foreign question are no better evidence than its words.
"""

from __future__ import annotations

from typing import Callable

KEYWORD_SIDES = ("keyword", "keyword_chunks", "title")
# Below this share the query is mostly foreign words: a word of it that one item happens to hold ("mit", "des") is no
# identifier, so it does not put that item first (engine.pinned_items).
PIN_MIN_SHARE = 0.5


def found_share(terms: list, item_df: Callable[[object], int], embedder: object) -> float:
    """Share of the query's terms found in at least one item (1.0 for an English-only embedder or no terms).
    item_df: items holding a term, as the store counts them (SearchEngine.item_df)."""
    if not terms or getattr(embedder, "languages", "multi") == "en" or embedder is None:
        return 1.0
    return sum(item_df(t) > 0 for t in terms) / len(terms)


def scaled(weights: dict[str, float], share: float) -> dict[str, float]:
    """Fusion weights with the keyword sides scaled by the share of the query's terms the index holds."""
    if share >= 1.0:
        return weights
    return {name: w * share if name in KEYWORD_SIDES else w for name, w in weights.items()}
