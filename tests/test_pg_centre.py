"""Sign bits centred on the PostgreSQL store as on rag.db (store/pg/schema.py, retrieval/pg_vector.py): under
multilingual-e5-small's id the HNSW index and the query take the signs of the vector minus the embedder's centre,
so binary candidates of vectors in a narrow cone (as e5's are) still find the exact neighbours."""

from __future__ import annotations

import numpy as np
import pytest
from postgres_server import fresh_database

from rag_search.embedders.centres import bits_centre_of
from rag_search.embedders.multilingual import MultilingualEmbedder
from rag_search.retrieval.pg import vector as pg_vector
from rag_search.store import open_store
from rag_search.store.pg import writes as pg_writes
from rag_search.store.pg.connection import vector_text
from rag_search.store.pg.schema import bits_centre
from rag_search.store.vectors import ranking_query

pytestmark = pytest.mark.postgres
MINILM = "builtin/all-MiniLM-L6-v2-int8pc"


def cone(n: int) -> np.ndarray:
    """Vectors around e5's axis (mean cosine ~0.8): 100 topics and noise, as tests/test_bits_centre.py makes them."""
    rng = np.random.default_rng(3)
    axis = bits_centre_of(MultilingualEmbedder.id)
    topics = rng.standard_normal((100, 384)).astype(np.float32)
    topics *= 0.3 / np.linalg.norm(topics, axis=1, keepdims=True)
    noise = rng.standard_normal((n, 384)).astype(np.float32) * (0.4 / np.sqrt(384))
    vecs = axis / np.linalg.norm(axis) + topics[rng.integers(0, 100, n)] + noise
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def filled(url: str, embedder_id: str, docs: np.ndarray):
    store = open_store(url)
    store.bind_embedder(embedder_id, 384)
    with store.transaction() as conn:
        conn.execute("INSERT INTO collections(id, name, created_at) VALUES (1, 'c', '2026-01-01')")
        conn.execute("INSERT INTO items(id, collection_id, source_type, key, uri) VALUES (1, 1, 'markdown', 'k', 'u')")
        conn.executemany("INSERT INTO chunks(id, item_id, collection_id, idx, text, content_hash) "
                         "VALUES (?, 1, 1, ?, 't', 'h')", [(i, i) for i in range(len(docs))])
        pg_writes.insert_vectors(conn, ((i, 1, v) for i, v in enumerate(docs)))
    return store


def recall(store, docs: np.ndarray, queries: np.ndarray) -> float:
    """Share of the exact top 10 found; exact as the index ranks: around its centre, if any (vectors.ranking_query)."""
    centre = bits_centre(store.conn)
    ranked = np.stack([ranking_query(q, None if centre is None else pg_vector._parse(centre)) for q in queries])
    truth = np.argsort(-(ranked @ docs.T), axis=1)[:, :10]
    found = [[cid for cid, _ in pg_vector._binary(store.conn, q, 10, "", [])] for q in queries]
    return float(np.mean([len(set(f) & set(t)) / 10 for f, t in zip(found, truth)]))


@pytest.mark.parametrize("embedder_id, centred", [(MultilingualEmbedder.id, True), (MINILM, False)])
def test_binary_candidates_of_a_cone_on_postgresql(postgres_url, embedder_id, centred, monkeypatch):
    monkeypatch.setattr(pg_vector, "COARSE_MIN", 200)  # candidates a tenth of the rows, as on a large index
    vecs = cone(2040)
    docs, queries = vecs[:2000], vecs[2000:]
    url = fresh_database(postgres_url, "t_centre_" + ("e5" if centred else "minilm"))
    with filled(url, embedder_id, docs) as store:
        centre = bits_centre(store.conn)
        assert centre == (vector_text(bits_centre_of(embedder_id)) if centred else None)
        indexdef = store.conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'chunk_vec_bits'").fetchone()[0]
        assert ("embedding -" in indexdef) == centred, indexdef
        with store.conn.raw.transaction():  # the query's ORDER BY is the index's expression: the index can serve it
            store.conn.execute("SET LOCAL enable_seqscan = off")
            plan = "\n".join(r[0] for r in store.conn.execute(
                "EXPLAIN " + pg_vector.binary_sql("", 384, centre),
                (vector_text(queries[0]), vector_text(queries[0]), 200, 10)).fetchall())
        assert "chunk_vec_bits" in plan, plan
        found = recall(store, docs, queries)
        if centred:
            assert found >= 0.95, found
        else:  # MiniLM's vectors are not a cone: its bits stay uncentred, and on such vectors they are poor
            assert found < 0.8, found
