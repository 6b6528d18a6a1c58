"""Synthetic corpora for benchmarks: Zipf-distributed words (like real text) and vectors shaped like real ones.

The vectors are noisy copies of real embeddings (docstrings embedded with the builtin model), the noise drawn
from the real embeddings' own covariance: the index has the anisotropy and the topic structure of real model
vectors, so recall of binary candidates against exact KNN means something, and the queries are real held-out
embeddings. (Isotropic noise around random centres made every neighbour list a tie: recall 0.22 at 100k.)
"""

from __future__ import annotations

import numpy as np

from pathlib import Path

from rag_search.records import Chunk, Fingerprint, ItemRef, text_hash
from rag_search.store import Store, writes
from rag_search.store.cache import cache_vectors

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


BASE_DOCS, QUERY_DOCS = 4000, 200
NOISE = 0.75  # a copy's cosine to its real parent is ~0.8, like chunks of one note to each other


def real_embeddings(out: Path) -> tuple[np.ndarray, np.ndarray]:
    """(base, queries): real docstrings embedded with the builtin model, cached in `out`."""
    cache = out / f"real-embeddings-{BASE_DOCS}+{QUERY_DOCS}.npy"
    if not cache.exists():
        from docstrings import docstrings

        from rag_search.embedders.builtin import BuiltinEmbedder

        texts = docstrings(BASE_DOCS + QUERY_DOCS)
        print(f"  embedding {len(texts)} real docstrings once (cached in {cache.name}) ...", flush=True)
        out.mkdir(exist_ok=True)
        np.save(cache, np.asarray(BuiltinEmbedder().embed_documents(texts), dtype=np.float32))
    vecs = np.load(cache)
    return vecs[:BASE_DOCS], vecs[BASE_DOCS:]


class RealLikeVectors:
    """Unit vectors near real embeddings: parent + NOISE x a draw from the real embeddings' covariance."""

    def __init__(self, base: np.ndarray):
        self.base = base
        centred = base - base.mean(axis=0)
        _, s, vt = np.linalg.svd(centred, full_matrices=False)
        self.noise_basis = (s[:, None] / np.sqrt(len(base))) * vt  # z @ noise_basis ~ N(0, covariance)

    def near(self, rng, parent: int, n: int) -> np.ndarray:
        z = rng.standard_normal((n, len(self.noise_basis))).astype(np.float32)
        v = self.base[parent] + NOISE * (z @ self.noise_basis)
        return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def build(store: Store, n_chunks: int, base: np.ndarray, per_item: int = 10, seed: int = 7,
          embedder_id: str = "bench/synthetic", progress: bool = True) -> None:
    """n_chunks synthetic chunks (~180 words each) in items of `per_item` chunks, 5 collections; each item's
    chunks are copies of one real embedding (one topic per item). Vectors go to the embedding cache too, as
    indexing puts them there."""
    rng = np.random.default_rng(seed)
    vocab = vocabulary()
    dims = base.shape[1]
    store.bind_embedder(embedder_id, dims)
    gen = RealLikeVectors(base)
    for name in ("notes", "mail", "docs", "code", "books"):
        writes.ensure_collection(store, name)
    names = ["notes", "mail", "docs", "code", "books"]
    for item_no in range(n_chunks // per_item):
        coll = names[item_no % 5]
        title = zipf_text(rng, vocab, int(rng.integers(1, 5))).title()  # names as notes have: a few words
        chunks = []
        for i in range(per_item):
            chunks.append(Chunk(i, zipf_text(rng, vocab, int(rng.integers(120, 240))), title=title,
                                ts=int(1.5e9 + rng.integers(0, 2e8)), tags=(f"t{rng.integers(0, 50)}",)))
        vecs = gen.near(rng, int(rng.integers(0, len(base))), per_item)
        ref = ItemRef(coll, f"item{item_no}.md", f"/bench/{coll}/item{item_no}.md", "markdown")
        writes.replace_item(store, ref, Fingerprint(1, 1, "x"), title, chunks, vecs)
        cache_vectors(store, embedder_id, [(text_hash(c.vector_text), v) for c, v in zip(chunks, vecs)])
        if progress and item_no and item_no % 10_000 == 0:
            print(f"  {item_no * per_item:,} / {n_chunks:,} chunks", flush=True)


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
