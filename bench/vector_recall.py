"""How much of the exact vector top-10 the binary KNN + float rescoring keeps, on real embeddings.

    python bench/vector_recall.py [--docs 4000] [--queries 200]

Embeds real docstrings with the builtin model (cached in bench/out), then compares, per query, the
exact float KNN top-10 with binary-quantised KNN (k coarse candidates) rescored by the float vectors.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from docstrings import docstrings

from rag_search.embedders.builtin import BuiltinEmbedder

OUT = Path(__file__).parent / "out"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=4000)
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    cache = OUT / f"docstrings-{args.docs}.npz"
    texts = docstrings(args.docs + args.queries)
    emb = BuiltinEmbedder()
    if cache.exists():
        vecs = np.load(cache)["v"]
    else:
        t0 = time.perf_counter()
        vecs = emb.embed_documents(texts)
        print(f"embedded {len(texts)} texts in {time.perf_counter() - t0:.0f}s")
        np.savez(cache, v=vecs)
    docs, qvecs = vecs[: args.docs], vecs[args.docs :]
    bits = np.packbits(docs > 0, axis=1)
    print(f"{len(docs)} docstring chunks, {len(qvecs)} held-out docstrings as queries; recall@10 vs exact:")
    for coarse in (50, 100, 200, 400):
        recalls = []
        for q in qvecs:
            exact = set(np.argsort(-(docs @ q))[:10])
            qb = np.packbits(q > 0)
            ham = np.unpackbits(bits ^ qb, axis=1).sum(axis=1)
            cand = np.argsort(ham, kind="stable")[:coarse]
            top = set(cand[np.argsort(-(docs[cand] @ q))[:10]])
            recalls.append(len(exact & top) / 10)
        print(f"  coarse k={coarse:<4} recall@10 {np.mean(recalls):.3f}")


if __name__ == "__main__":
    main()
