"""The Dagster instance on PostgreSQL (a real server, tests/postgres_server.py): chosen by `dagster:` in config.yaml
and written into dagster.yaml; runs of two collections in parallel from two processes, the embedder pool holding
them to one embedding call at a time; config errors that say what to do."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import dagster as dg
import pytest
import yaml
from ollama_standin import OllamaStandIn
from pipeline_env import use_home
from postgres_server import fresh_database

from rag_pipelines.wiring.instance import ensure_instance, render
from rag_pipelines.wiring.pool import POOL
from rag_search.config import DagsterSettings, Paths, load_settings
from rag_search.errors import ConfigError

pytestmark = pytest.mark.postgres

INDEX_ONE = ("import sys; from rag_search.config import Paths; from rag_pipelines.indexing.runs import "
             "index_collections; [s] = index_collections(Paths.from_env(), [sys.argv[1]]); print(s.line())")


class GatedStandIn(OllamaStandIn):
    """The Ollama stand-in counting embed requests in flight; the first one is answered only once `gate` is set."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.gate, self.in_flight, self.max_in_flight, self._lock = threading.Event(), 0, 0, threading.Lock()
        self.first = True

    def _handler(self):
        base, standin = super()._handler(), self

        class Handler(base):
            def do_POST(self):
                with standin._lock:
                    standin.in_flight += 1
                    standin.max_in_flight = max(standin.max_in_flight, standin.in_flight)
                    first, standin.first = standin.first, False
                try:
                    if first:
                        standin.gate.wait(120)
                    super().do_POST()
                finally:
                    with standin._lock:
                        standin.in_flight -= 1

        return Handler


def make_home(tmp_path, monkeypatch, dagster, notes=12) -> Paths:
    collections = {}
    for name in ("alpha", "beta"):
        folder = tmp_path / name
        folder.mkdir()
        for i in range(notes):
            (folder / f"{name}{i:02d}.md").write_text(f"# {name} {i}\n\n" + f"{name} note {i} on herons. " * 40)
        collections[name] = {"sources": [{"type": "project", "paths": [str(folder)]}]}
    config = {"embedder": {"provider": "ollama", "batch_size": 4}, "dagster": dagster, "collections": collections}
    return use_home(tmp_path / "home", config, monkeypatch)


def wait_for(predicate, seconds=120.0):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def both_at_the_model(instance, ollama) -> bool:
    waiting = instance.event_log_storage.get_concurrency_info(POOL).pending_steps  # assigned or waiting
    return len({step.run_id for step in waiting}) == 2 or ollama.max_in_flight == 2


def test_two_collections_index_in_parallel_one_embedding_at_a_time(postgres_url, tmp_path, monkeypatch):
    """Both runs are in progress at once: the first one's first embedding request is held until the second run
    reaches the model too, which then waits for the pool's slot instead of sending a request of its own."""
    url = fresh_database(postgres_url, "parallel_runs")
    paths = make_home(tmp_path, monkeypatch, {"storage": url, "embedder_slots": 1})
    with GatedStandIn(delay=0.01) as ollama:
        monkeypatch.setenv("OLLAMA_HOST", ollama.host)
        ensure_instance(paths)
        procs = [subprocess.Popen([sys.executable, "-c", INDEX_ONE, name], env=dict(os.environ), text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE) for name in ("alpha", "beta")]
        with dg.DagsterInstance.get() as instance:
            try:  # until the second run waits for the embedder's slot (or, without the pool, embeds too)
                wait_for(lambda: both_at_the_model(instance, ollama) or any(p.poll() is not None for p in procs))
            finally:
                ollama.gate.set()
            outputs = [p.communicate(timeout=300) for p in procs]
            assert [p.returncode for p in procs] == [0, 0], outputs
            records = instance.get_run_records()
        assert "alpha: 12 indexed" in outputs[0][0] and "beta: 12 indexed" in outputs[1][0]
        assert sorted(r.dagster_run.tags["local_rag/collection"] for r in records) == ["alpha", "beta"]
        assert all(r.dagster_run.status == dg.DagsterRunStatus.SUCCESS for r in records)
        assert max(r.start_time for r in records) < min(r.end_time for r in records)  # the runs overlapped
        assert ollama.max_in_flight == 1 and len(ollama.requests) >= 6  # 24 notes, 4 texts a request


def test_dagster_yaml_follows_the_config(postgres_url, tmp_path, monkeypatch):
    url = fresh_database(postgres_url, "follows_config")
    paths = make_home(tmp_path, monkeypatch, url)  # the short form: dagster: postgresql://...
    ensure_instance(paths)
    written = (paths.dagster_home / "dagster.yaml")
    assert url.replace("postgresql://", "postgresql+psycopg2://") in written.read_text() and oct(written.stat().st_mode & 0o777) == "0o600"
    conf = yaml.safe_load(written.read_text())["concurrency"]["runs"]
    assert conf["max_concurrent_runs"] == 4 and conf["tag_concurrency_limits"][0]["key"] == "local_rag/collection"
    with dg.DagsterInstance.get() as instance:
        assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"

    ensure_instance(paths, DagsterSettings())  # back to SQLite: rewritten
    assert written.read_text() == render(DagsterSettings()) and "postgres" not in written.read_text()


def test_config_errors_say_what_to_do(postgres_url, tmp_path, monkeypatch):
    paths = make_home(tmp_path, monkeypatch, "mysql://me:secret@db/dagster")
    with pytest.raises(ConfigError) as err:
        load_settings(paths.config)
    assert "dagster.storage" in str(err.value) and "postgresql://user:password@host" in str(err.value)
    assert "secret" not in str(err.value)

    wrong = postgres_url.replace("@", "x@", 1)  # wrong password, kept out of the message
    with pytest.raises(ConfigError, match="Cannot reach the Dagster database .*\\*\\*\\*@.*fix `dagster:`"):
        ensure_instance(paths, DagsterSettings(storage=wrong))
    with pytest.raises(ConfigError, match="createdb"):
        ensure_instance(paths, DagsterSettings(storage=postgres_url.rsplit("/", 1)[0] + "/nonesuch"))

    (paths.dagster_home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")  # edited by hand
    with pytest.raises(ConfigError, match="Delete that file"):
        ensure_instance(paths, DagsterSettings(storage=postgres_url))
