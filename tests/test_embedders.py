"""The builtin ONNX embedder (the real bundled model) and the Ollama client against a stand-in server."""

from __future__ import annotations

import shutil
import socket

import numpy as np
import pytest
from ollama_standin import OllamaStandIn

from rag_search.embedders import builtin
from rag_search.embedders.base import Embedder
from rag_search.embedders.ollama import OllamaEmbedder
from rag_search.errors import EmbedderError, EmbedderUnavailable


def test_builtin_embeds_meaning(builtin_embedder):
    assert isinstance(builtin_embedder, Embedder)
    v = builtin_embedder.embed_documents(
        ["A man is eating food.", "A man is eating a piece of bread.", "The new movie is awesome."]
    )
    assert v.shape == (3, 384) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    sims = v @ v.T
    assert sims[0, 1] > 0.6 > 0.1 > sims[0, 2]
    q = builtin_embedder.embed_query("A man is eating food.")
    np.testing.assert_allclose(q, v[0], atol=1e-5)


def test_builtin_batching_by_length_keeps_input_order(builtin_embedder):
    texts = ["short", "a much longer text " * 20, "medium length text here", "tiny", "x " * 300]
    together = builtin_embedder.embed_documents(texts)
    alone = np.stack([builtin_embedder.embed_query(t) for t in texts])
    np.testing.assert_allclose(together, alone, atol=2e-3)


def test_builtin_runs_on_every_thread_and_gives_the_vectors_of_one_run_at_a_time():
    """Several one-thread runs share one session at once: each text's vector must be exactly its own."""
    from rag_search.embedders.builtin import BuiltinEmbedder

    texts = [f"note {i}: " + "the heron waits by the river " * (i % 7 + 1) for i in range(24)]
    parallel = BuiltinEmbedder(threads=3)
    together = parallel.embed_documents(texts)
    assert parallel._pool is not None  # the texts went to the workers
    one_by_one = np.vstack([parallel._run([t]) for t in texts])
    assert np.array_equal(together, one_by_one)
    heard = []
    parallel.embed_documents(texts[:5], progress=heard.append)
    assert sum(heard) == 5


def test_builtin_counts_tokens_without_truncation(builtin_embedder):
    assert builtin_embedder.count_tokens("hello world") == 2
    assert builtin_embedder.count_tokens("word " * 1000) == 1000


def test_model_file_is_checked_against_its_sha256(tmp_path):
    real = builtin.packaged_file(*builtin.MODEL_FILE)
    builtin.verify_sha256(real, builtin.MODEL_SHA256)
    tampered = tmp_path / "model.onnx"
    shutil.copy(real, tampered)
    with tampered.open("r+b") as fh:
        fh.seek(1000)
        fh.write(b"\x00\x01\x02")
    with pytest.raises(EmbedderError, match="force-reinstall"):
        builtin.verify_sha256(tampered, builtin.MODEL_SHA256)


def test_ollama_embeds_in_batches_and_normalises():
    with OllamaStandIn() as server:
        emb = OllamaEmbedder(server.host, batch_size=32)
        texts = [f"text number {i}" for i in range(70)]
        done = []
        vecs = emb.embed_documents(texts, progress=done.append)
        assert vecs.shape == (70, 1024) and emb.dimensions == 1024 and emb.id == "ollama/bge-m3"
        np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
        assert [len(r["input"]) for r in server.requests] == [32, 32, 6] and done == [32, 32, 6]
        assert all(r["model"] == "bge-m3" and r["truncate"] is True for r in server.requests)
        np.testing.assert_allclose(emb.embed_query("text number 3"), vecs[3], atol=1e-6)
        assert emb.ping() == ["bge-m3:latest"]


def test_ollama_unknown_model_dimension_is_probed():
    with OllamaStandIn(models=("my-embed",), dims=48) as server:
        assert OllamaEmbedder(server.host, model="my-embed").dimensions == 48


def test_ollama_model_not_pulled_says_what_to_run():
    with OllamaStandIn(models=("nomic-embed-text",)) as server:
        with pytest.raises(EmbedderUnavailable, match="ollama pull bge-m3"):
            OllamaEmbedder(server.host).embed_query("x")


def test_ollama_not_running_says_what_to_do():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    with pytest.raises(EmbedderUnavailable, match="ollama serve"):
        OllamaEmbedder(f"http://127.0.0.1:{port}").embed_query("x")


def test_ollama_batch_timeout_is_reported():
    with OllamaStandIn(delay=1.5) as server:
        with pytest.raises(EmbedderError, match="timeout_seconds"):
            OllamaEmbedder(server.host, timeout_seconds=0.3).embed_query("x")

