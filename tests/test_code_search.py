"""Keyword search over code (parseConfig ↔ parse_config ↔ "parse config"), the 0005 migration, and a code group
indexed end to end through Dagster: search with filters, history rewrites, no-op resyncs and the CLI."""

from __future__ import annotations

import json
import time

import dagster as dg
import pytest
import yaml
from click.testing import CliRunner

import git_fixture as fx
from conftest import add_doc
from rag_pipelines.indexing import runs
from rag_pipelines.wiring import resources
from rag_pipelines.wiring.assets import partitions_name
from rag_search.cli.main import cli
from rag_search.config import Paths
from rag_search.records import Chunk, Fingerprint, ItemRef
from rag_search.retrieval import Filters, SearchEngine, SearchRequest, keyword
from rag_search.retrieval.filters import SqlFilter
from rag_search.retrieval.identifiers import code_terms, split_identifier
from rag_search.store.item_writer import ParsedItem, write_items
from rag_search.store import Store, migrations, reads, writes
from rag_search.store.connection import connect

SNAKE = "def parse_config(path):\n    return read(path)"
CAMEL = "export function parseConfig(text: string) {\n  return read(text);\n}"
PROSE = "How we parse config files: one pair per line."


def add_code(store, embedder, key: str, text: str) -> None:
    writes.ensure_collection(store, "code")
    ref = ItemRef("code", key, f"/repo/{key}", "code")
    chunk = Chunk(index=0, text=text, title=key, keywords=code_terms(text))
    write_items(store, embedder, [ParsedItem(ref, Fingerprint(len(text), 1, "x"), key, [chunk])])


@pytest.fixture
def code_store(store, fake_embedder):
    for key, text in (("snake.py", SNAKE), ("camel.ts", CAMEL), ("notes.md", PROSE)):
        add_code(store, fake_embedder, key, text)
    add_doc(store, fake_embedder, "code", "other.md", "Reading JSON is not what this is about.")
    return store


def chunk_keys(store, query: str) -> list[str]:
    ids = keyword.search(store.conn, keyword.parse_terms(query), SqlFilter("1", ()), 10, 4, {}).ids
    rows = dict(store.conn.execute("SELECT c.id, i.key FROM chunks c JOIN items i ON i.id = c.item_id").fetchall())
    return [rows[i] for i in ids]


def test_identifier_forms_find_each_other_and_the_exact_form_ranks_first(code_store, fake_embedder):
    assert split_identifier("getHTTPResponse") == ["get", "http", "response"]
    assert code_terms(CAMEL) == "parse config" and code_terms(SNAKE) == ""
    for query, first in (("parseConfig", "camel.ts"), ("parse_config", "snake.py"), ("ParseConfig", "camel.ts")):
        found = chunk_keys(code_store, query)
        assert set(found) == {"snake.py", "camel.ts", "notes.md"} and found[0] == first, (query, found)
    assert set(chunk_keys(code_store, '"parse config"')) == {"snake.py", "camel.ts", "notes.md"}
    assert chunk_keys(code_store, "parseconfig") == ["camel.ts"]  # no case hint: the word itself only
    engine = SearchEngine(code_store, fake_embedder)
    for query in ("parseConfig", "parse_config", "parse config"):
        hits = engine.search(SearchRequest(query, mode="keyword")).hits
        assert {h.key for h in hits} == {"snake.py", "camel.ts", "notes.md"}, query
    hit = next(h for h in engine.search(SearchRequest("parse_config", mode="keyword")).hits if h.key == "camel.ts")
    assert "parse config" not in hit.text and "parse config" not in hit.snippet  # keywords are never shown


def test_0005_upgrades_an_index_in_place(tmp_path, monkeypatch, fake_embedder):
    conn = connect(tmp_path / "rag.db")
    monkeypatch.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:4])  # an index of before 0005
    migrations.migrate(conn)
    conn.execute("INSERT INTO collections(name, created_at) VALUES ('old', 'x')")
    conn.execute("INSERT INTO items(collection_id, source_type, key, uri) VALUES (1, 'markdown', 'a.md', '/a.md')")
    conn.execute("INSERT INTO chunks(item_id, collection_id, idx, text, content_hash) VALUES (1, 1, 0, 'loadSettings here', 'h')")
    conn.close()
    monkeypatch.undo()
    store = Store.open(tmp_path / "rag.db")
    assert "0005_code_terms" in migrations.applied(store.conn)
    assert [r[0] for r in store.conn.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH 'loadsettings'")] == [1]
    add_code(store, fake_embedder, "new.ts", "const x = loadSettings();")
    assert chunk_keys(store, "load settings") == ["new.ts"]  # the old chunk has no keywords until re-indexed
    writes.delete_items(store, "code", ["new.ts"])
    store.conn.execute("INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('integrity-check', 1)")  # raises if broken
    assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    store.close()


# -- end to end -----------------------------------------------------------------------------------------------


@pytest.fixture
def home(tmp_path, monkeypatch):
    built = fx.build(tmp_path / "src")
    h = tmp_path / "home"
    h.mkdir()
    (h / "config.yaml").write_text(yaml.safe_dump({"code_groups": {"work": [str(built.path)]},
                                                   "git_history_in_months": 6}))
    monkeypatch.setenv("LOCAL_RAG_HOME", str(h))
    monkeypatch.setenv("DAGSTER_HOME", str(h / "dagster"))
    monkeypatch.delenv("LOCAL_RAG_DB", raising=False)
    monkeypatch.delenv("LOCAL_RAG_CONFIG", raising=False)
    yield Paths.from_env(), built
    resources.close_all()


def search(query: str, mode: str = "hybrid", **filters) -> list:
    engine = SearchEngine(resources.RagResource().store(), resources.RagResource().embedder())
    return engine.search(SearchRequest(query, mode=mode, top_k=30, filters=Filters(**filters))).hits


def keys() -> set[str]:
    return set(reads.item_states(resources.RagResource().store(), "shop-api"))


def test_a_code_group_indexed_searched_and_kept_in_sync(home):
    paths, repo = home
    [summary] = runs.index_collections(paths, ["shop-api"])
    commits = {f"commit/{repo.sha(x)}" for x in ("rename", "feature", "main", "merge", "empty", "latin1", "skew",
                                                  "coauthor")}
    assert summary.outcomes == {"indexed": 19 + len(commits)} and not summary.failures
    assert keys() >= commits | {"src/settings.py", "web/config.ts"}
    assert set(dg.DagsterInstance.get().get_dynamic_partitions(partitions_name("shop-api"))) == keys()

    for query in ("parseConfig", "parse_config", "parse config"):
        found = {h.key for h in search(query, mode="keyword")}
        assert {"src/settings.py", "web/config.ts", "README.md"} <= found, (query, found)
    hit = next(h for h in search("charge the cart at checkout", source_types=("code",)) if h.key == "server/main.go")
    assert hit.metadata["language"] == "go" and hit.metadata["lines"] == "1-13" and hit.tags == ("work",)
    assert hit.uri == str(repo.path / "server/main.go")
    assert {h.key for h in search("discounts", author="carol")} == {f"commit/{repo.sha('feature')}"}
    window = search("checkout discounts", source_types=("commit",), include_undated=False,
                    date_from=repo.authored["feature"] - 3600, date_to=repo.authored["merge"] + 3600)
    assert {h.key for h in window} == {f"commit/{repo.sha(x)}" for x in ("feature", "main", "merge")}
    assert {h.key for h in search("config path helper", participants=("erin@example.com",))} == \
        {f"commit/{repo.sha('coauthor')}"}
    assert {h.metadata["language"] for h in search("retry payment", metadata={"language": "go"})} == {"go"}

    [again] = runs.index_collections(paths, ["shop-api"])
    assert again.outcomes == {} and again.run_ids == []  # a no-op resync indexes nothing

    (repo.path / "web/cart.ts").unlink()
    fx.git(repo.path, "commit", "-q", "-am", "Drop the cart total", when=int(time.time()) - 3600)
    fx.git(repo.path, "commit", "-q", "--amend", "-m", "Remove the cart total", when=int(time.time()) - 60)
    amended = fx.git(repo.path, "rev-parse", "HEAD")
    fx.git(repo.path, "reset", "-q", "--hard", f"{amended}~1")  # ... and then it was thrown away (force-push)
    fx.git(repo.path, "rebase", "-q", "--onto", repo.sha("latin1"), repo.sha("skew"))  # `skew` is dropped
    [synced] = runs.index_collections(paths, ["shop-api"])
    now_keys = keys()
    assert f"commit/{repo.sha('skew')}" not in now_keys and f"commit/{repo.sha('coauthor')}" not in now_keys
    rebased = fx.git(repo.path, "rev-parse", "HEAD")
    assert f"commit/{rebased}" in now_keys and "web/cart.ts" in now_keys  # the reset brought the file back
    assert "server/retry.go" not in now_keys  # it came with `skew`
    assert synced.outcomes == {"deleted": 3, "indexed": 1}

    fx.write(repo.path, "web/tax.ts", "export const vatRate = 0.19;\n")
    fx.commit(repo, "tax", "Add the VAT rate", int(time.time()) - 30)
    out = CliRunner().invoke(cli, ["index", "group", "work"], catch_exceptions=False)  # files only
    assert out.exit_code == 0, out.output
    assert "web/tax.ts" in keys() and f"commit/{repo.sha('tax')}" not in keys()
    out = CliRunner().invoke(cli, ["index", "group", "--history"], catch_exceptions=False)
    assert out.exit_code == 0 and f"commit/{repo.sha('tax')}" in keys()
    fx.write(repo.path, "web/tax.ts", "export const vatRate = 0.07;\n")
    fx.commit(repo, "reduced", "Use the reduced VAT rate", int(time.time()) - 10)
    out = CliRunner().invoke(cli, ["index", "all", "--json"], catch_exceptions=False)  # files and history
    assert out.exit_code == 0 and f"commit/{repo.sha('reduced')}" in keys()
    [summary] = json.loads(out.stdout)
    assert summary["collection"] == "shop-api" and summary["outcomes"] == {"indexed": 2}  # the file and the commit
