"""The `local-rag` CLI on a real index (real SQLite, the real bundled model) through click's CliRunner."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import add_doc

from rag_search.cli.main import cli
from rag_search.store import Store


@pytest.fixture
def home(tmp_path, builtin_embedder):
    store = Store.open(tmp_path / "rag.db")
    add_doc(store, builtin_embedder, "notes", "k8s.md", "kube-proxy crashed on node-7 after the upgrade",
            tags=("work/ops",), ts=1710000000, author="Ann Ops")
    add_doc(store, builtin_embedder, "notes", "bread.md", "Sourdough bread needs an active starter and time",
            tags=("food",), ts=1600000000)
    add_doc(store, builtin_embedder, "papers", "wal.pdf", "Write-ahead logging lets readers proceed", source_type="pdf",
            page=3)
    store.close()
    return tmp_path


def run(home, *args, code=0):
    result = CliRunner().invoke(cli, list(args), env={"LOCAL_RAG_HOME": str(home)}, catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result.output


def test_search_human_output(home):
    out = run(home, "search", "kube-proxy")
    assert out.startswith("1. k8s.md") and "notes" in out and "work/ops" not in out.splitlines()[0]


def test_search_json_with_filters_and_explain(home):
    data = json.loads(run(home, "search", "baking", "--json", "--explain", "--tag", "food", "--top", "5"))
    assert [h["key"] for h in data["hits"]] == ["bread.md"]
    hit = data["hits"][0]
    assert hit["collection"] == "notes" and hit["timestamp"].startswith("2020-09-13")
    assert data["explain"]["keyword_expression"] == '"baking"'
    assert hit["vector_rank"] == 1 and hit["keyword_rank"] is None


def test_search_filters_from_the_command_line(home):
    def keys(*opts):
        return [h["key"] for h in json.loads(run(home, "search", "readers starter node", "--json", *opts))["hits"]]

    assert keys("--collection", "papers") == ["wal.pdf"]
    assert keys("--type", "pdf") == ["wal.pdf"]
    assert keys("--after", "2024-01-01", "--no-undated") == ["k8s.md"]
    assert keys("--before", "2021", "--no-undated") == ["bread.md"]
    assert keys("--from", "ann") == ["k8s.md"]
    assert keys("--path-prefix", "/data/papers/") == ["wal.pdf"]
    assert set(keys()) == {"k8s.md", "bread.md", "wal.pdf"}


def test_search_errors_are_messages_not_tracebacks(home):
    out = run(home, "search", "x", "--collection", "nope", code=2)
    assert "No collection named 'nope'" in out and "notes, papers" in out
    out = run(home, "search", "x", "--after", "someday", code=2)
    assert "Cannot read the date" in out


def test_collections_status_and_delete(home):
    assert "notes" in run(home, "collections", "list") and "papers" in run(home, "collections", "list")
    info = json.loads(run(home, "collections", "info", "notes", "--json"))
    assert info["items"] == 2 and info["chunks"] == 2
    status = json.loads(run(home, "status", "--json"))
    assert status["totals"] == {"collections": 2, "items": 3, "chunks": 3, "failed": 0}
    assert status["embedder"] == {"id": "builtin/all-MiniLM-L6-v2-int8pc", "dimensions": 384}
    assert "Deleted collection 'papers'" in run(home, "collections", "delete", "papers", "--yes")
    assert json.loads(run(home, "status", "--json"))["totals"]["chunks"] == 2


def test_doctor_reports_each_check(home):
    out = run(home, "doctor")
    for name in ("sqlite", "config", "store", "embedder", "index embedder", "dagster"):
        assert f"ok   {name}:" in out


def test_doctor_fails_on_an_embedder_mismatch(home):
    (home / "config.yaml").write_text("embedder:\n  provider: ollama\n")
    out = run(home, "doctor", code=1)
    assert "FAIL embedder" in out and "FAIL index embedder" in out and "local-rag reembed" in out


def test_search_does_not_import_dagster(home):
    code = (
        "import sys; from click.testing import CliRunner; from rag_search.cli.main import cli;"
        f"r = CliRunner().invoke(cli, ['search', 'bread'], env={{'LOCAL_RAG_HOME': {str(home)!r}}});"
        "assert r.exit_code == 0, r.output;"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('dagster', 'rag_pipelines')];"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_compact_returns_free_pages_and_keeps_the_index(home, builtin_embedder):
    import numpy as np

    from rag_search.store import writes
    from rag_search.store.cache import cache_vectors

    store = Store.open(home / "rag.db")
    rng = np.random.default_rng(4)
    cache_vectors(store, "other/model", [(f"h{i}", rng.standard_normal(384).astype(np.float32)) for i in range(3000)])
    store.conn.execute("DELETE FROM embedding_cache WHERE embedder_id = 'other/model'")
    writes.ensure_collection(store, "notes")
    store.close()
    size = (home / "rag.db").stat().st_size
    out = run(home, "compact")
    assert "MB ->" in out and (home / "rag.db").stat().st_size < size - 3_000_000
    assert run(home, "search", "kube-proxy").startswith("1. k8s.md")
