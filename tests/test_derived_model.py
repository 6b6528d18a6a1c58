"""The builtin embedder's derived model: built once from the shipped one, reused, and its vectors equal the shipped
model's within cosine 0.99; an index built with the shipped model stays searchable; without onnx it falls back."""

from __future__ import annotations

import builtins
import json
import subprocess
import sys

import numpy as np
import pytest

from rag_search.embedders import derived_model
from rag_search.embedders.builtin import MODEL_FILE, MODEL_SHA256, BuiltinEmbedder, packaged_file
from rag_search.errors import EmbedderMismatch
from rag_search.store import Store, vectors

TEXTS = [
    "Weekly sync with the platform team about the deployment pipeline and flaky integration tests.",
    "Grocery list and meal plan for the week: lentil soup, roasted vegetables, and rye bread.",
    "Reading notes on distributed consensus: leader election, log replication and quorum reads.",
    "Trip planning for the coast: train times, a guesthouse near the harbour, and a ferry to the island.",
    "kube-proxy INV-2024-0042 parseConfig",
    "Kurz: das Budget für Q3 wurde gekürzt.",
] * 2


def test_the_derived_model_is_built_once_and_agrees_with_the_shipped_one(tmp_path, monkeypatch):
    monkeypatch.setenv("LOCAL_RAG_MODEL_CACHE", str(tmp_path / "models"))
    fast = BuiltinEmbedder()
    got = fast.embed_documents(TEXTS)
    path = derived_model.derived_path(MODEL_SHA256)
    assert fast.model_path == path and path.is_file()
    assert path.stat().st_size < packaged_file(*MODEL_FILE).stat().st_size * 1.2  # int8, not a folded fp32 copy
    shipped = BuiltinEmbedder(shipped_only=True).embed_documents(TEXTS)
    cos = (got * shipped).sum(axis=1)
    assert cos.min() >= 0.985 and cos.mean() >= 0.99, cos
    assert not np.allclose(got, shipped, atol=1e-4)  # it really is another model
    # batch 1: a text's vector does not depend on the texts embedded with it
    assert np.allclose(fast.embed_query(TEXTS[2]), got[2], atol=1e-6)
    mtime = path.stat().st_mtime_ns
    again = BuiltinEmbedder()
    again.embed_query("x")
    assert again.model_path == path and path.stat().st_mtime_ns == mtime  # reused, not derived again
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary files left


def test_without_onnx_the_shipped_model_is_used(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LOCAL_RAG_MODEL_CACHE", str(tmp_path / "models"))
    real_import = builtins.__import__

    def no_quantization(name, *args, **kwargs):
        if name.startswith("onnxruntime.quantization"):
            raise ImportError("No module named 'onnx'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "onnxruntime.quantization", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_quantization)
    emb = BuiltinEmbedder()
    vec = emb.embed_query(TEXTS[0])
    assert emb.model_path == packaged_file(*MODEL_FILE)
    assert "pip install onnx" in capsys.readouterr().err
    assert abs(float(vec @ BuiltinEmbedder(shipped_only=True).embed_query(TEXTS[0])) - 1.0) < 1e-5


def test_an_index_of_the_shipped_model_is_searched_with_the_derived_one(tmp_path):
    store = Store.open(tmp_path / "rag.db")
    store.bind_embedder("builtin/all-MiniLM-L6-v2-int8", 384)  # what earlier versions recorded
    store.bind_embedder(BuiltinEmbedder.id, 384)  # equivalent vectors: accepted, nothing to re-embed
    assert store.embedder == ("builtin/all-MiniLM-L6-v2-int8", 384)
    with pytest.raises(EmbedderMismatch, match="reembed"):
        store.bind_embedder("ollama/nomic-embed-text", 768)
    with pytest.raises(EmbedderMismatch):
        vectors.check_embedder(store.conn, "ollama/bge-m3", 384, store.path)
    store.close()


def test_reembed_moves_an_index_to_the_derived_model(tmp_path):
    """`local-rag reembed` still unifies an index whose vectors came from the shipped model."""
    from click.testing import CliRunner

    from rag_search.cli.main import cli

    home = tmp_path / "home"
    home.mkdir()
    store = Store.open(home / "rag.db")
    store.bind_embedder("builtin/all-MiniLM-L6-v2-int8", 384)
    store.close()
    env = {"LOCAL_RAG_HOME": str(home), "LOCAL_RAG_MODEL_CACHE": str(tmp_path / "models")}
    out = CliRunner().invoke(cli, ["reembed", "--yes"], env=env)
    assert out.exit_code == 0, out.output
    status = CliRunner().invoke(cli, ["status", "--json"], env=env)
    assert json.loads(status.output)["embedder"]["id"] == BuiltinEmbedder.id
