"""The tools on a home whose index and Dagster instance are on PostgreSQL (a real server, tests/postgres_server.py):
the page's status reads runs through the instance, `local-rag doctor` checks the store and instance configured, and
`local-rag record-index` fills a new instance from the index without re-indexing."""

from __future__ import annotations

import re

import dagster as dg
import pytest
import yaml
from click.testing import CliRunner
from ollama_standin import OllamaStandIn
from pipeline_env import use_home
from postgres_server import _free_port, fresh_database
from starlette.testclient import TestClient

from rag_search.cli.main import cli
from rag_search.config import Paths

pytestmark = pytest.mark.postgres
NOTES = ["heron.md", "kingfisher.md", "swift.md"]


@pytest.fixture(scope="module")
def pg_home(postgres_url, tmp_path_factory):
    """Store and instance on PostgreSQL, the notes indexed by one real run (broken.pdf fails); the page's status
    as it was before that run."""
    from rag_pipelines.indexing.runs import index_collections
    from rag_pipelines.wiring import resources

    mp, tmp = pytest.MonkeyPatch(), tmp_path_factory.mktemp("pg_tools")
    notes = tmp / "notes"
    notes.mkdir()
    for name in NOTES:
        (notes / name).write_text(f"# {name}\n\nA note on the {name[:-3]} and the river. " * 10)
    (notes / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    config = {"store": fresh_database(postgres_url, "tools_store"), "embedder": {"provider": "ollama"},
              "dagster": {"storage": fresh_database(postgres_url, "tools_dagster")},
              "collections": {"notes": {"sources": [{"type": "project", "paths": [str(notes)]}]}}}
    with OllamaStandIn() as ollama:
        mp.setenv("OLLAMA_HOST", ollama.host)
        paths = use_home(tmp / "home", config, mp)
        before = status_page(paths)
        [summary] = index_collections(paths, ["notes"])
        resources.close_all()
        yield paths, config, ollama, summary, before
    resources.close_all()
    mp.undo()


def status_page(paths: Paths) -> str:
    from rag_search.retrieval import SearchEngine
    from rag_search.store import open_store
    from rag_search.web import Backend, TokenGate, web_app

    store = open_store(yaml.safe_load(paths.config.read_text())["store"])
    try:
        app = web_app(Backend(paths, store, SearchEngine(store, None)), TokenGate(None),
                      dagster_ui="http://127.0.0.1:3999")
        return TestClient(app, base_url="http://127.0.0.1:8765").get("/status").text
    finally:
        store.close()


def write_config(paths: Paths, config: dict) -> None:
    paths.config.write_text(yaml.safe_dump(config))


def test_the_status_page_reads_the_runs_of_a_postgres_instance(pg_home):
    paths, _, _, summary, before = pg_home
    assert "No Dagster runs yet (the instance at postgresql://postgres:***@127.0.0.1" in before
    assert summary.outcomes == {"indexed": 3, "failed": 1}
    after = status_page(paths)
    row = after[after.index('data-collection="notes"'):after.index("</tr>", after.index('data-collection="notes"'))]
    [run_id] = summary.run_ids
    assert f'href="http://127.0.0.1:3999/runs/{run_id}"' in row and "No Dagster runs yet" not in after


def test_doctor_checks_the_postgres_store_and_instance_it_is_configured_with(pg_home, postgres_url, monkeypatch):
    from rag_pipelines.parsers.ocr import status as ocr_status

    paths, config, _, _, _ = pg_home
    monkeypatch.setattr(ocr_status, "self_test", lambda: "(OCR's own check: tests/test_cli.py)")
    ok = CliRunner().invoke(cli, ["doctor"], catch_exceptions=False)
    assert ok.exit_code == 0, ok.output
    assert re.search(r"ok   store: postgresql://postgres:\*\*\*@127\.0\.0\.1:\d+/tools_store \(PostgreSQL 18[\d.]*\), "
                     r"pgvector [\d.]+, store schema v1", ok.output), ok.output
    assert re.search(r"ok   dagster: PostgreSQL postgresql://postgres:\*\*\*@.*/tools_dagster: Dagster schema \w+, "
                     r"1 runs", ok.output), ok.output
    assert "ok   index embedder: index built with ollama/bge-m3" in ok.output

    empty = {**config, "store": fresh_database(postgres_url, "tools_empty")}  # a database made, nothing in it
    write_config(paths, empty)
    fresh = CliRunner().invoke(cli, ["doctor"], catch_exceptions=False)
    assert fresh.exit_code == 0 and "is installed on the server, not yet in this database" in fresh.output

    port = _free_port()  # nothing listens there; and an instance database nobody created
    broken = {**config, "store": f"postgresql://localrag:secret@127.0.0.1:{port}/rag",
              "dagster": {"storage": config["dagster"]["storage"].rsplit("/", 1)[0] + "/nonesuch"}}
    write_config(paths, broken)
    try:
        failed = CliRunner().invoke(cli, ["doctor"], catch_exceptions=False)
    finally:
        write_config(paths, config)
    assert failed.exit_code == 1
    assert f"FAIL store: Cannot connect to the PostgreSQL store postgresql://localrag:***@127.0.0.1:{port}/rag" \
        in failed.output and "Check that the server is running" in failed.output
    assert "FAIL dagster: Cannot reach the Dagster database" in failed.output and "createdb" in failed.output
    assert "secret" not in failed.output and "ok   store" not in failed.output


def test_record_index_fills_a_new_instance_without_reindexing(pg_home, postgres_url):
    """After moving Dagster to another database every item shows Missing; record-index gives each indexed item a
    materialisation from the store: no run, nothing read or embedded again; the failed item stays for `index`."""
    from dagster._core.storage.partition_status_cache import get_and_update_asset_status_cache_value

    paths, config, ollama, _, _ = pg_home
    moved = {**config, "dagster": {"storage": fresh_database(postgres_url, "tools_moved")}}
    write_config(paths, moved)
    requests = len(ollama.requests)
    try:
        first = CliRunner().invoke(cli, ["record-index"], catch_exceptions=False)
        again = CliRunner().invoke(cli, ["record-index", "notes"], catch_exceptions=False)
        with dg.DagsterInstance.get() as instance:
            partitions = dg.DynamicPartitionsDefinition(name="notes_items")
            cached = get_and_update_asset_status_cache_value(instance, dg.AssetKey(["notes", "items"]), partitions)
            shown = set(cached.deserialize_materialized_partition_subsets(partitions).get_partition_keys())
            assert shown == set(NOTES)  # what the UI shows materialised
            assert sorted(instance.get_dynamic_partitions("notes_items")) == sorted([*NOTES, "broken.pdf"])
            assert instance.get_runs() == []
            [event] = instance.fetch_materializations(dg.AssetKey(["notes", "items"]), limit=1).records
            assert event.asset_materialization.metadata["outcome"].value == "recorded"
    finally:
        write_config(paths, config)
    assert first.exit_code == 0 and again.exit_code == 0, first.output + again.output
    assert "notes: 3 item(s) recorded as materialised, 0 already were, 1 failed item(s)" in first.output
    assert "notes: 0 item(s) recorded as materialised, 3 already were" in again.output
    assert len(ollama.requests) == requests  # nothing embedded
