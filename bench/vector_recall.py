"""How much of the exact vector top-10 the binary candidates + float rescoring keep, on real embeddings.

    python bench/vector_recall.py [--model all-MiniLM-L6-v2|multilingual-e5-small] [--corpus docstrings|scifact]
                                  [--docs 4000] [--queries 200] [--scifact DIR]

docstrings: real docstrings of installed packages, held-out ones as queries; scifact: SciFact abstracts (the
first --docs, title + text) and its train claims as queries (../shared/eval data). Documents are embedded as
documents, queries as queries (multilingual-e5-small: "passage: " / "query: "); vectors are cached in bench/out.

Sign bits of (store/vectors.py): the raw vectors; the vectors minus the embedder's shipped centre
(embedders/centres.py: what an index of that embedder uses); minus the mean of this corpus's own vectors.
For each, recall@10 against exact float KNN of
- Hamming C: the C nearest by Hamming distance, rescored by float vectors (sqlite-vec's binary KNN; the engine
  asks for 300 when it wants 150 chunks);
- RAM k: what a long-running server does (retrieval/bit_matrix.py): 16 x k nearest by Hamming distance,
  ordered by the float query against their signs, the best k rescored.
Then the shipped setting through a real index (vectors.insert_vectors, vector.run, BitMatrix.nearest), which
must give the same figures as the simulation.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
from docstrings import docstrings

from rag_search.embedders.centres import bits_centre_of

OUT = Path(__file__).parent / "out"
SCIFACT = Path(__file__).parents[2] / "shared" / "eval" / "data" / "scifact-train"
HAMMING = (100, 300, 600)
RAM = (100, 300)


def embedder(model: str):
    if model == "multilingual-e5-small":
        from rag_search.embedders.multilingual import MultilingualEmbedder

        return MultilingualEmbedder()
    from rag_search.embedders.builtin import BuiltinEmbedder

    return BuiltinEmbedder()


def texts(corpus: str, docs: int, queries: int, scifact: Path) -> tuple[list[str], list[str]]:
    if corpus == "docstrings":
        found = docstrings(docs + queries)
        return found[:docs], found[docs:]
    with (scifact / "corpus.jsonl").open(encoding="utf-8") as fh:
        rows = [json.loads(line) for _, line in zip(range(docs), fh)]
    with (scifact / "queries.jsonl").open(encoding="utf-8") as fh:
        claims = [json.loads(line)["text"] for _, line in zip(range(queries), fh)]
    return [f"{r['title']} {r['text']}" for r in rows], claims


def vectors(args, emb) -> tuple[np.ndarray, np.ndarray]:
    cache = OUT / f"recall-{args.model}-{args.corpus}-{args.docs}-{args.queries}.npz"
    if cache.exists():
        got = np.load(cache)
        return got["docs"], got["queries"]
    doc_texts, query_texts = texts(args.corpus, args.docs, args.queries, Path(args.scifact))
    t0 = time.perf_counter()
    docs = emb.embed_documents(doc_texts)
    queries = np.vstack([emb.embed_query(q) for q in query_texts])
    print(f"embedded {len(doc_texts)} documents and {len(query_texts)} queries in {time.perf_counter() - t0:.0f}s")
    OUT.mkdir(exist_ok=True)
    np.savez(cache, docs=docs, queries=queries)
    return docs, queries


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(f) & set(t)) / len(t) for f, t in zip(found, truth)]))


def rescored(docs: np.ndarray, q: np.ndarray, cand: np.ndarray) -> np.ndarray:
    return cand[np.argsort(-(docs[cand] @ q), kind="stable")[:10]]


def simulate(docs: np.ndarray, queries: np.ndarray, truth: np.ndarray, centre: np.ndarray) -> dict[str, float]:
    signs = (docs - centre) > 0
    packed = np.packbits(signs, axis=1)
    sign_pm = signs.astype(np.float32) * 2 - 1
    out: dict[str, list] = {}
    for q in queries:
        ham = np.bitwise_count(packed ^ np.packbits((q - centre) > 0)).sum(axis=1)
        order = np.argsort(ham, kind="stable")
        for c in HAMMING:
            out.setdefault(f"Hamming {c}", []).append(rescored(docs, q, order[:c]))
        for k in RAM:
            short = order[: min(16 * k, 10_000)]
            best = short[np.argsort(-(sign_pm[short] @ (q - centre)), kind="stable")[:k]]
            out.setdefault(f"RAM {k}", []).append(rescored(docs, q, best))
    return {name: recall(np.array(found), truth) for name, found in out.items()}


def through_index(docs: np.ndarray, queries: np.ndarray, truth: np.ndarray, embedder_id: str) -> dict[str, float]:
    """The shipped setting on a real index: sqlite-vec's binary KNN (k=300) and the bits held in RAM (k=300)."""
    from rag_search.retrieval import vector
    from rag_search.retrieval.bit_matrix import BitMatrix
    from rag_search.retrieval.filters import SqlFilter
    from rag_search.store import Store, vectors

    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(Path(tmp) / "rag.db")
        store.bind_embedder(embedder_id, docs.shape[1])
        with store.transaction() as conn:
            vectors.insert_vectors(conn, ((i, 1, v) for i, v in enumerate(docs)))
        matrix = BitMatrix(store)
        assert matrix.wait(600)
        conn, sql_found, ram_found = store.conn, [], []
        for q in queries:
            vplan = vector.plan(q, 10, 10**9, (), SqlFilter("1", ()), k=300)
            sql_found.append([cid for cid, _ in vector.run(conn, q, vplan, 10)])
            near = matrix.nearest(vector.query_bits(conn, q), 300, query=q)
            ram_found.append([cid for cid, _ in vector.rescore(conn, q, near, 10)])
        store.close()
    return {"index, sqlite-vec Hamming 300": recall(np.array(sql_found), truth),
            "index, RAM 300": recall(np.array(ram_found), truth)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="all-MiniLM-L6-v2", choices=["all-MiniLM-L6-v2", "multilingual-e5-small"])
    ap.add_argument("--corpus", default="docstrings", choices=["docstrings", "scifact"])
    ap.add_argument("--docs", type=int, default=4000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--scifact", default=str(SCIFACT), help="the SciFact train folder (../shared/eval/data)")
    args = ap.parse_args()
    emb = embedder(args.model)
    docs, queries = vectors(args, emb)
    truth = np.argsort(-(queries @ docs.T), axis=1)[:, :10]
    offdiag = float(((docs[:1000] @ docs[:1000].T).sum() - min(len(docs), 1000)) / (min(len(docs), 1000) ** 2 - min(len(docs), 1000)))
    print(f"{args.model}, {args.corpus}: {len(docs)} documents, {len(queries)} queries; mean cosine between "
          f"documents {offdiag:.3f}; recall@10 vs exact:")
    shipped = bits_centre_of(emb.id)
    centres = {"raw signs": np.zeros(docs.shape[1], np.float32), "own mean": docs.mean(axis=0)}
    if shipped is not None:
        centres = {"raw signs": centres["raw signs"], "shipped centre": shipped, "own mean": centres["own mean"]}
    for name, centre in centres.items():
        scores = simulate(docs, queries, truth, centre)
        print(f"  {name:<15} " + "  ".join(f"{k} {v:.3f}" for k, v in scores.items()), flush=True)
    scores = through_index(docs, queries, truth, emb.id)
    print("  shipped, real index: " + "  ".join(f"{k} {v:.3f}" for k, v in scores.items()))


if __name__ == "__main__":
    main()
