"""One writer per collection, held by Dagster itself on a PostgreSQL instance (a real server, tests/postgres_server.py):
every kind of run that writes a collection waits for the collection's pool, whatever started it.

The runs are made the way they are deployed: a real code server (the workspace `local-rag ui` serves), the UI's own
GraphQL mutations (Materialize = a run of Dagster's asset job, Launch backfill, Re-execute), the sensor and backfill
daemons' iterations, the queue daemon's, and Dagster's run launcher starting each run in a process of its own; the
CLI's runs execute in its process, past the queue. While the CLI's run is in its step (its embedding request held
by the Ollama stand-in), the queue starts none of the others; launched anyway (as a run buffer or a second daemon
would), each waits for the pool's slot before its step starts. Afterwards no two steps overlapped.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from itertools import pairwise

import dagster as dg
import pytest
from ollama_standin import OllamaStandIn
from pipeline_env import use_home
from postgres_server import fresh_database

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

POOL = "local_rag_collection_notes"
ITEMS = ["notes", "items"]
REPOSITORY = {"repositoryLocationName": "rag", "repositoryName": "__repository__"}
INDEX_FORCED = ("import sys; from rag_search.config import Paths; from rag_pipelines.indexing.runs import "
                "index_collections; [s] = index_collections(Paths.from_env(), ['notes'], force=True); print(s.line())")
S = dg.DagsterRunStatus


def wait_for(predicate, what: str, seconds: float = 300.0):
    deadline = time.monotonic() + seconds
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
    return value


@contextmanager
def deployed(home, monkeypatch, postgres_url):
    """The instance on PostgreSQL as local-rag writes it, and the code location served by a code server of its own
    (as the Helm chart runs it), which launches each run in a process (Dagster's DefaultRunLauncher)."""
    from code_server import code_server
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import GrpcServerTarget

    from rag_pipelines.wiring.instance import ensure_instance

    notes = home.parent / "notes"
    notes.mkdir()
    for i in range(3):
        (notes / f"n{i}.md").write_text(f"# Note {i}\n\nHerons by the river, note {i}. " * 20)
    config = {"embedder": {"provider": "ollama"}, "dagster": {"storage": fresh_database(postgres_url, "pools")},
              "collections": {"notes": {"sensor_interval_seconds": 5,
                                        "sources": [{"type": "project", "paths": [str(notes)]}]}}}
    paths = use_home(home, config, monkeypatch)
    ensure_instance(paths)
    with code_server(dict(os.environ), home.parent / "code-server.log") as port, dg.DagsterInstance.get() as instance:
        target = GrpcServerTarget(host="127.0.0.1", port=port, socket=None, location_name="rag")
        with WorkspaceProcessContext(instance, target) as workspace:
            yield instance, workspace, notes


def graphql(workspace, mutation: str, variables: dict) -> dict:
    from dagster_graphql.test.utils import execute_dagster_graphql

    result = execute_dagster_graphql(workspace.create_request_context(), mutation, variables)
    assert not result.errors, result.errors
    [answer] = result.data.values()
    assert answer["__typename"] in ("LaunchRunSuccess", "LaunchBackfillSuccess"), answer
    return answer


def sensor_tick(workspace) -> None:
    from dagster._daemon.sensor import execute_sensor_iteration

    list(execute_sensor_iteration(workspace, logging.getLogger("sensor"), None, None))


def launch(instance, workspace, run_ids: list[str]) -> None:
    """Start the runs as the queue daemon does (the run launcher: a process of its own each), all at once."""
    threads = [threading.Thread(target=instance.launch_run, args=(run_id, workspace.create_request_context()))
               for run_id in run_ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def queued(instance) -> list[dg.DagsterRun]:
    return instance.get_runs(filters=dg.RunsFilter(statuses=[S.QUEUED]))


def from_the_ui(instance, workspace, first: dg.DagsterRun) -> None:
    """Queued: the UI's Materialize of one item, a backfill of all, a re-execution of the first run."""
    from dagster._daemon.backfill import execute_backfill_iteration
    from dagster_graphql.client.query import (LAUNCH_PARTITION_BACKFILL_MUTATION, LAUNCH_PIPELINE_EXECUTION_MUTATION,
                                              LAUNCH_PIPELINE_REEXECUTION_MUTATION)

    keys = instance.get_dynamic_partitions("notes_items")
    graphql(workspace, LAUNCH_PIPELINE_EXECUTION_MUTATION, {"executionParams": {
        "selector": {**REPOSITORY, "jobName": "__ASSET_JOB", "assetSelection": [{"path": ITEMS}]},
        "executionMetadata": {"tags": [{"key": "dagster/partition", "value": keys[1]}]}}})
    graphql(workspace, LAUNCH_PARTITION_BACKFILL_MUTATION, {"backfillParams": {
        "partitionNames": keys, "assetSelection": [{"path": ITEMS}], "fromFailure": False, "tags": []}})
    list(execute_backfill_iteration(workspace, logging.getLogger("backfill")))
    graphql(workspace, LAUNCH_PIPELINE_REEXECUTION_MUTATION, {"reexecutionParams": {
        "parentRunId": first.run_id, "strategy": "ALL_STEPS"}})


def kind(run: dg.DagsterRun) -> str:
    tags = run.tags
    if "dagster/parent_run_id" in tags:
        return "re-execution"
    if "dagster/backfill" in tags:
        return "backfill"
    if "dagster/sensor_name" in tags:
        return f"sensor {run.job_name}"
    return f"{tags.get('local_rag/trigger', 'ui')} {run.job_name}"


def step_events(instance, run_id: str) -> list:
    from dagster._core.events import DagsterEventType as E

    return instance.all_logs(run_id, of_type={E.STEP_START, E.STEP_SUCCESS, E.STEP_FAILURE})


def step_span(instance, run_id: str) -> tuple[float, float]:
    """When the run's one step started and ended."""
    [start, end] = step_events(instance, run_id)
    return start.timestamp, end.timestamp


def test_every_kind_of_writer_of_a_collection_waits_for_its_pool(postgres_url, tmp_path, monkeypatch):
    from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import QueuedRunCoordinatorDaemon

    from rag_pipelines.indexing.health import HOST_TAG, own_tags

    with OllamaStandIn() as ollama:
        monkeypatch.setenv("OLLAMA_HOST", ollama.host)
        with deployed(tmp_path / "home", monkeypatch, postgres_url) as (instance, workspace, notes):
            sensor_tick(workspace)  # the first tick: every note is new, one range run
            [first] = queued(instance)
            launch(instance, workspace, [first.run_id])
            wait_for(lambda: instance.get_run_by_id(first.run_id).is_finished, "the first sensor run")
            (notes / "n0.md").write_text("# Note 0\n\nKingfishers now. " * 20)
            wait_for(lambda: sensor_tick(workspace) or queued(instance), "the sensor's run for the changed note", 60)
            ollama.open.clear()  # the CLI's run embeds the changed note: held there, in its step
            cli = subprocess.Popen([sys.executable, "-c", INDEX_FORCED], env=dict(os.environ), text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            try:
                from_the_ui(instance, workspace, first)
                others = [r.run_id for r in queued(instance)]
                wait_for(lambda: ollama.held or cli.poll() is not None, "the CLI's embedding request")
                assert cli.poll() is None, cli.communicate()
                list(QueuedRunCoordinatorDaemon(interval_seconds=1).run_iteration(workspace))
                assert sorted(r.run_id for r in queued(instance)) == sorted(others)  # the queue holds them

                launch(instance, workspace, others)  # past the queue: each waits at its step for the slot
                pool = instance.event_log_storage
                wait_for(lambda: set(others) <= {s.run_id for s in pool.get_concurrency_info(POOL).pending_steps},
                         "every launched run waiting for the pool")
                assert not any(step_events(instance, r) for r in others)  # none has started its step
            finally:
                ollama.open.set()
            out, err = cli.communicate(timeout=300)
            assert cli.returncode == 0, err[-3000:]
            wait_for(lambda: all(r.is_finished for r in instance.get_runs()), "every run to end")
            runs = instance.get_runs()
            spans = sorted(step_span(instance, r.run_id) for r in runs)

    assert sorted(kind(r) for r in runs) == sorted(["sensor notes_index", "sensor notes_sync", "ui __ASSET_JOB",
                                                    "backfill", "re-execution", "cli notes_sync"])
    assert [r.status for r in runs] == [S.SUCCESS] * len(runs), [(kind(r), r.status) for r in runs]
    assert all(start >= end for (_, end), (start, _) in pairwise(spans)), spans  # never two steps at once
    for run in runs:  # each says where it ran and which collection it wrote (the UI's runs too)
        assert HOST_TAG in own_tags(run) and run.tags["local_rag/collection"] == "notes", kind(run)
    assert "notes: 3 indexed" in out

