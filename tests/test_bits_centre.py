"""Sign bits centred per embedder (store/vectors.py): multilingual-e5-small's bits are taken of the vector minus its
centre wherever bits are made (stored, query, bits in RAM); MiniLM's vectors and bits stay byte-identical."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import add_doc

from rag_search.cli.main import cli
from rag_search.embedders.centres import bits_centre_of
from rag_search.embedders.multilingual import MultilingualEmbedder
from rag_search.embedders.reembed import reembed
from rag_search.retrieval import vector
from rag_search.retrieval.bit_matrix import BitMatrix
from rag_search.retrieval.filters import SqlFilter
from rag_search.store import Store, vectors

TEXTS = [
    "The grey heron stands motionless in shallow water and waits for fish.",
    "Die Besprechung zum Quartalsbudget wurde auf Donnerstag verschoben.",
    "To roll back the kube-proxy upgrade, drain the node and reinstall the previous package.",
    "Sourdough needs an active starter, a long cold proof and a very hot oven.",
    "分布式共识中的领导者选举与日志复制。",
    "La réunion budgétaire trimestrielle est déplacée à jeudi après-midi.",
    "Leader election and log replication in Raft.",
    "Grocery list: lentils, rye bread, roasted vegetables.",
]


def signs(v: np.ndarray) -> bytes:
    """Sign bits as sqlite-vec packs them (bit set for > 0, least significant bit first)."""
    return np.packbits(np.asarray(v) > 0, bitorder="little").tobytes()


def stored(store) -> list[tuple[int, bytes, bytes]]:
    return store.conn.execute("SELECT chunk_id, embedding, embedding_bits FROM chunk_vec ORDER BY chunk_id").fetchall()


def mean_hamming(bits: list[bytes]) -> float:
    rows = np.array([np.frombuffer(b, dtype=np.uint8) for b in bits])
    d = np.bitwise_count(rows[:, None, :] ^ rows[None, :, :]).sum(axis=2)
    return float(d.sum() / (len(rows) * (len(rows) - 1)))


def test_minilm_vectors_and_bits_are_byte_identical(store, builtin_embedder):
    for i, t in enumerate(TEXTS):
        add_doc(store, builtin_embedder, "notes", f"n{i}.md", t)
    want = builtin_embedder.embed_documents(TEXTS)
    assert vectors.bits_centre(store.conn) is None and bits_centre_of(builtin_embedder.id) is None
    for (cid, blob, bits), v in zip(stored(store), want):
        assert blob == vectors.as_blob(v) and bits == signs(v)
    q = builtin_embedder.embed_query("heron")
    assert vector.query_bits(store.conn, q) == signs(q)


def test_e5_bits_are_taken_around_the_centre_and_spread(store, e5):
    for i, t in enumerate(TEXTS):
        add_doc(store, e5, "notes", f"n{i}.md", t)
    centre = bits_centre_of(e5.id)
    assert centre is not None and np.array_equal(vectors.bits_centre(store.conn), centre)
    want = e5.embed_documents(TEXTS)
    rows = stored(store)
    for (cid, blob, bits), v in zip(rows, want):
        assert blob == vectors.as_blob(v) and bits == signs(v - centre)  # floats as they are, bits centred
    raw = mean_hamming([signs(v) for v in want])
    centred = mean_hamming([bits for _, _, bits in rows])
    assert raw < 0.2 * 384 and centred > 0.4 * 384, (raw, centred)  # unrelated texts: ~half their bits differ
    q = e5.embed_query("Wann ist die Budgetbesprechung?")
    assert vector.query_bits(store.conn, q) == signs(q - centre)


@pytest.fixture
def cone(tmp_path):
    """2,000 synthetic vectors in a narrow cone as e5's are (mean cosine 0.8: a shared axis, 100 topics around it,
    noise), indexed under e5's id, and 40 queries. Raw sign bits find 0.58 of the exact top 10 here, centred 1.0."""
    rng = np.random.default_rng(3)
    axis = bits_centre_of(MultilingualEmbedder.id)
    topics = rng.standard_normal((100, 384)).astype(np.float32)
    topics *= 0.3 / np.linalg.norm(topics, axis=1, keepdims=True)
    noise = rng.standard_normal((2040, 384)).astype(np.float32) * (0.4 / np.sqrt(384))
    vecs = axis / np.linalg.norm(axis) + topics[rng.integers(0, 100, 2040)] + noise
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    store = Store.open(tmp_path / "rag.db")
    store.bind_embedder(MultilingualEmbedder.id, 384)
    with store.transaction() as conn:
        vectors.insert_vectors(conn, ((i, 1, v) for i, v in enumerate(vecs[:2000])))
    yield store, vecs[:2000], vecs[2000:]
    store.close()


def recall(found: list[list[int]], docs: np.ndarray, queries: np.ndarray) -> float:
    """Share of the exact top 10 found; exact as the index ranks: around the centre (vectors.ranking_query)."""
    centre = bits_centre_of(MultilingualEmbedder.id)
    ranked = np.stack([vectors.ranking_query(q, centre) for q in queries])
    truth = np.argsort(-(ranked @ docs.T), axis=1)[:, :10]
    return float(np.mean([len(set(f) & set(t)) / 10 for f, t in zip(found, truth)]))


def test_binary_candidates_of_a_cone_find_the_exact_neighbours(cone):
    """sqlite-vec's binary KNN compares centred query bits with centred stored bits; the bits held in RAM do too,
    and their asymmetric step scores the centred query against the stored signs."""
    store, docs, queries = cone
    assert float((docs[:300] @ docs[:300].T).mean()) > 0.78
    matrix = BitMatrix(store)
    assert matrix.wait(60)
    by_sql, by_ram = [], []
    for q in queries:
        vplan = vector.plan(q, 10, 10**9, (), SqlFilter("1", ()), k=100)
        assert not vplan.exact
        by_sql.append([cid for cid, _ in vector.run(store.conn, q, vplan, 10)])
        near = matrix.nearest(vector.query_bits(store.conn, q), 30, query=q)  # 480 by Hamming, 30 by the asymmetric step
        by_ram.append([cid for cid, _ in vector.rescore(store.conn, q, near, 10)])
    assert recall(by_sql, docs, queries) >= 0.95 and recall(by_ram, docs, queries) >= 0.98  # uncentred: 0.52, 0.93


def test_reembed_switches_the_centre_with_the_embedder(store, builtin_embedder, e5):
    for i, t in enumerate(TEXTS):
        add_doc(store, builtin_embedder, "notes", f"n{i}.md", t)
    before = stored(store)
    reembed(store, e5)
    assert store.embedder == (e5.id, 384) and vectors.bits_centre(store.conn) is not None
    centre, want = bits_centre_of(e5.id), e5.embed_documents(TEXTS)
    assert [bits for _, _, bits in stored(store)] == [signs(v - centre) for v in want]
    reembed(store, builtin_embedder)
    assert vectors.bits_centre(store.conn) is None and stored(store) == before  # byte for byte as built


def test_the_cli_refuses_then_reembeds_a_minilm_index_with_e5_and_back(tmp_path, builtin_embedder, e5_cache):
    cache, _ = e5_cache
    home = tmp_path / "home"
    store = Store.open(home / "rag.db")
    for key, text in (("rollback.md", TEXTS[2]), ("heron.md", TEXTS[0]), ("bread.md", TEXTS[3])):
        add_doc(store, builtin_embedder, "notes", key, text)
    store.close()
    (home / "config.yaml").write_text("embedder:\n  provider: builtin\n  model: multilingual-e5-small\n")
    env = {"LOCAL_RAG_HOME": str(home), "LOCAL_RAG_MODEL_CACHE": str(cache), "LOCAL_RAG_NO_SERVER": "1"}
    query = ["search", "--mode", "semantic", "Wie mache ich das Upgrade von kube-proxy rückgängig?"]
    refused = CliRunner().invoke(cli, query, env=env)
    assert refused.exit_code != 0 and "local-rag reembed" in refused.output
    done = CliRunner().invoke(cli, ["reembed", "--yes"], env=env)
    assert done.exit_code == 0 and "3 texts embedded" in done.output, done.output
    found = CliRunner().invoke(cli, [*query, "--json"], env=env)
    assert found.exit_code == 0, found.output
    assert json.loads(found.output)["hits"][0]["uri"].endswith("rollback.md")
    (home / "config.yaml").write_text("embedder:\n  provider: builtin\n")
    assert CliRunner().invoke(cli, query, env=env).exit_code != 0  # refused again: the index is e5's
    back = CliRunner().invoke(cli, ["reembed", "--yes"], env=env)
    assert back.exit_code == 0 and "3 from cache, 3 vectors written" in back.output, back.output  # kept vectors
    with Store.open(home / "rag.db") as store:
        assert store.embedder == (builtin_embedder.id, 384) and vectors.bits_centre(store.conn) is None
    english = CliRunner().invoke(cli, ["search", "--json", "undo the kube-proxy upgrade"], env=env)
    assert english.exit_code == 0 and json.loads(english.output)["hits"][0]["uri"].endswith("rollback.md")


def test_float_ranking_is_around_the_centre_so_a_central_hub_loses(tmp_path):
    """A chunk at the centre of e5's cone (markup, a link list) is near every query by raw cosine; around the centre
    (vectors.ranking_query) the chunk about the query's own topic ranks first, in the exact KNN and in rescoring."""
    centre = bits_centre_of(MultilingualEmbedder.id)
    axis = centre / np.linalg.norm(centre)
    rng = np.random.default_rng(5)
    topic = rng.standard_normal(384).astype(np.float32)
    topic -= (topic @ axis) * axis
    topic /= np.linalg.norm(topic)

    def unit(v):
        return (v / np.linalg.norm(v)).astype(np.float32)

    query, hub, page = unit(axis + 0.5 * topic), unit(axis + 0.05 * topic), unit(0.6 * axis + 0.8 * topic)
    assert query @ hub > query @ page  # raw cosine: the hub first
    store = Store.open(tmp_path / "rag.db")
    store.bind_embedder(MultilingualEmbedder.id, 384)
    with store.transaction() as conn:
        vectors.insert_vectors(conn, [(1, 1, hub), (2, 1, page)])
    exact = vector.plan(query, 2, 2, (), SqlFilter("1", ()))
    assert exact.exact and [c for c, _ in vector.run(store.conn, query, exact, 2)] == [2, 1]
    assert [c for c, _ in vector.rescore(store.conn, query, [(1, 0), (2, 0)], 2)] == [2, 1]
    assert vectors.ranking_query(query, None) is query  # no centre (MiniLM): the query as it is
    store.close()
