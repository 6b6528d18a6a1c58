"""`local-rag index` and `search` with `store: postgresql://...`: the pipelines write the PostgreSQL store (new,
changed, deleted and unreadable files), and search reads it, as they do rag.db."""

from __future__ import annotations

import json

import pytest
from pipeline_env import point_at_home
from click.testing import CliRunner
from postgres_server import fresh_database

from rag_pipelines.wiring import resources
from rag_search.cli.main import cli
from rag_search.store import open_store, reads

pytestmark = pytest.mark.postgres


@pytest.fixture
def env(tmp_path, monkeypatch, postgres_url):
    home = tmp_path / "home"
    home.mkdir()
    url = fresh_database(postgres_url, "t_pipeline")
    (home / "config.yaml").write_text(f"store: {url}\n")
    point_at_home(home, monkeypatch)
    yield home, url
    resources.close_all()


def run(*args, code=0):
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result.stdout


def search(query: str) -> list[str]:
    return [h["key"] for h in json.loads(run("search", query, "--json"))["hits"]]


def test_index_change_delete_and_a_bad_file_on_the_postgresql_store(env, tmp_path):
    home, url = env
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "rivers.md").write_text("# Rivers\n\nThe Danube flows through Vienna and Budapest.\n")
    (docs / "bread.md").write_text("# Bread\n\nSourdough needs a lively starter and patience.\n")
    (docs / "broken.pdf").write_bytes(b"not a pdf at all")
    run("index", "project", "docs", str(docs), code=6)  # one item failed; the others are indexed
    assert not (home / "rag.db").exists()  # nothing went to rag.db
    assert search("Danube Vienna")[0] == "rivers.md"
    (docs / "rivers.md").write_text("# Rivers\n\nThe Rhine flows through Basel and Cologne.\n")
    (docs / "bread.md").unlink()
    run("index", "project", "docs", str(docs), code=6)
    assert search("Rhine Cologne")[0] == "rivers.md"
    assert "bread.md" not in search("sourdough starter")
    with open_store(url) as store:
        states = reads.item_states(store, "docs")
        assert {k: s.status for k, s in states.items()} == {"rivers.md": "indexed", "broken.pdf": "failed"}
        [failure] = reads.failures(store)
        assert failure.key == "broken.pdf" and failure.message
