"""Synthetic corpora for benchmarks: Zipf-distributed words (like real text) and clustered unit vectors."""

from __future__ import annotations

import numpy as np

from rag_search.records import Chunk, Fingerprint, ItemRef
from rag_search.store import Store, writes

STOP = "the of and to a in is that for it as with was on be by this are or from at an".split()


def vocabulary(n: int = 30_000, seed: int = 1) -> list[str]:
    rng = np.random.default_rng(seed)
    letters = np.array(list("etaoinshrdlcumwfgypbvkjxqz"))
    p = np.linspace(2.0, 0.2, len(letters))
    p /= p.sum()
    words = set()
    while len(words) < n:
        words.add("".join(rng.choice(letters, size=rng.integers(3, 11), p=p)))
    return STOP + sorted(words)


def zipf_text(rng, vocab: list[str], n_words: int) -> str:
    ranks = np.minimum(rng.zipf(1.15, size=n_words), len(vocab)) - 1
    return " ".join(vocab[r] for r in ranks)


def build(store: Store, n_chunks: int, dims: int = 384, per_item: int = 10, seed: int = 7,
          embedder_id: str = "bench/synthetic") -> None:
    """n_chunks synthetic chunks (~180 words each) in items of `per_item` chunks, 5 collections."""
    rng = np.random.default_rng(seed)
    vocab = vocabulary()
    store.bind_embedder(embedder_id, dims)
    centers = rng.standard_normal((64, dims)).astype(np.float32)
    for name in ("notes", "mail", "docs", "code", "books"):
        writes.ensure_collection(store, name)
    names = ["notes", "mail", "docs", "code", "books"]
    for item_no in range(n_chunks // per_item):
        coll = names[item_no % 5]
        chunks, vecs = [], []
        for i in range(per_item):
            chunks.append(Chunk(i, zipf_text(rng, vocab, int(rng.integers(120, 240))), title=f"item {item_no}",
                                ts=int(1.5e9 + rng.integers(0, 2e8)), tags=(f"t{rng.integers(0, 50)}",)))
            v = centers[rng.integers(0, 64)] + 0.6 * rng.standard_normal(dims).astype(np.float32)
            vecs.append(v / np.linalg.norm(v))
        ref = ItemRef(coll, f"item{item_no}.md", f"/bench/{coll}/item{item_no}.md", "markdown")
        writes.replace_item(store, ref, Fingerprint(1, 1, "x"), f"item {item_no}", chunks, np.stack(vecs))


def queries(n: int, seed: int = 3) -> list[str]:
    """Natural-language-like queries: 2-3 stopwords plus 2-4 content words of mixed frequency."""
    rng = np.random.default_rng(seed)
    vocab = vocabulary()
    out = []
    for _ in range(n):
        words = list(rng.choice(STOP, size=rng.integers(1, 4)))
        words += [vocab[len(STOP) + int(min(rng.zipf(1.3), 20_000))] for _ in range(rng.integers(2, 5))]
        rng.shuffle(words)
        out.append(" ".join(words))
    return out
