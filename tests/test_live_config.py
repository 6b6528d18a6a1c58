"""A running Dagster code location (UI, daemon) follows config.yaml edits: its sensors plan, and its runs index, with
the collection as configured now, without a reload."""

from __future__ import annotations

import dagster as dg
import pytest
import yaml
from pipeline_env import make_home
from test_pipelines import execute, tick

from rag_pipelines.config import load_collections
from rag_pipelines.wiring import resources
from rag_pipelines.wiring.definitions import build_definitions
from rag_search.store import reads


@pytest.fixture
def home(tmp_path, monkeypatch):
    paths, vault = make_home(tmp_path, monkeypatch)
    yield paths, vault
    resources.close_all()


def test_the_sensor_and_its_runs_follow_config_edits_without_a_reload(home):
    paths, _ = home
    defs, _ = build_definitions(load_collections(paths))  # what a running code location holds: built once
    indexed = lambda: set(reads.item_states(resources.RagResource().store(), "notes"))  # noqa: E731
    with dg.instance_for_test() as instance:
        first = tick(defs, instance)
        for request in first.run_requests:
            execute(defs, instance, request)
        assert "Templates/template.md" not in indexed()
        config = yaml.safe_load(paths.config.read_text())
        config["collections"]["notes"]["sources"][0]["exclude_folders"] = []  # Templates no longer excluded
        paths.config.write_text(yaml.safe_dump(config))
        second = tick(defs, instance, first.cursor)
        [request] = second.run_requests
        assert execute(defs, instance, request).success and "Templates/template.md" in indexed()

        paths.config.write_text(yaml.safe_dump(config) + "search: {top_k: many}\n")  # an edit with an error
        quiet = tick(defs, instance, second.cursor)  # the last good configuration stays in use
        assert quiet.run_requests == [] and "no changes" in quiet.skip_reason.skip_message
        config["collections"] = {"other": config["collections"]["notes"]}
        paths.config.write_text(yaml.safe_dump(config))
        removed = tick(defs, instance, quiet.cursor)
        assert isinstance(removed, dg.SkipReason) and "no longer configured" in removed.skip_message


@pytest.mark.slow
def test_a_collection_added_to_config_yaml_is_indexed_by_the_running_uis_sensor(tmp_path):
    """`local-rag ui` (webserver and daemon) reloads its definitions after a valid edit: the new collection's sensor
    runs in the daemon and indexes it. A real UI, a real daemon."""
    import os
    import signal
    import subprocess
    import sys
    import time
    import urllib.request
    from pathlib import Path

    from test_ui_command import free_port

    from rag_search.store import Store

    home, papers, port = tmp_path / "home", tmp_path / "papers", free_port()
    home.mkdir()
    papers.mkdir()
    (papers / "wal.md").write_text("Write-ahead logging lets readers proceed while one writer appends.\n")
    (home / "config.yaml").write_text("collections: {}\n")
    env = {**os.environ, "LOCAL_RAG_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")}
    exe = str(Path(sys.executable).with_name("local-rag"))
    with open(tmp_path / "ui.log", "w") as log:
        proc = subprocess.Popen([exe, "ui", "--port", str(port)], env=env, stdout=log, stderr=log,
                                start_new_session=True)
    try:
        deadline = time.time() + 180
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2)
                break
            except OSError:
                assert time.time() < deadline and proc.poll() is None, (tmp_path / "ui.log").read_text()
                time.sleep(1)
        config = {"collections": {"papers": {"sources": [{"type": "project", "paths": [str(papers)]}],
                                             "sensor_interval_seconds": 5}}}
        (home / "config.yaml").write_text(yaml.safe_dump(config))
        while not (home / "rag.db").exists() or not _items(Store, home / "rag.db", "papers"):
            assert time.time() < deadline and proc.poll() is None, (tmp_path / "ui.log").read_text()[-3000:]
            time.sleep(1)
        assert "configuration changed: the UI and its sensors use it now" in (tmp_path / "ui.log").read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=40)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)


def _items(store_cls, db, collection: str) -> set[str]:
    store = store_cls.open(db)
    try:
        return set(reads.item_states(store, collection))
    finally:
        store.close()
