"""`local-rag ui` stops everything it started (webserver, daemon, code servers) when it is signalled.

The first version left them running and the port bound after a SIGTERM to the command; `dagster dev` (superseded)
printed a SupersessionWarning at every start.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_the_whole_ui(tmp_path, sig):
    port, home = free_port(), tmp_path / "home"
    env = {**os.environ, "LOCAL_RAG_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")}
    exe = str(Path(sys.executable).with_name("local-rag"))
    # started as a shell's background job would be: SIGINT ignored, in a group of its own
    log = (tmp_path / "ui.log").open("w")
    proc = subprocess.Popen([exe, "ui", "--port", str(port)], env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN) and None)
    try:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2)
                break
            except OSError:
                assert time.time() < deadline and proc.poll() is None, "the UI did not come up"
                time.sleep(1)
        children = subprocess.run(["pgrep", "-f", "--", f"(-p|--port) {port}"], capture_output=True, text=True).stdout.split()
        assert children  # the webserver runs
        proc.send_signal(signal.SIGTERM if sig == signal.SIGTERM else signal.SIGINT)
        if sig == signal.SIGINT:  # ignored by a background job: the terminal's Ctrl-C reaches the group
            os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=40) == 0
        time.sleep(1)
        left = [p for p in children if Path(f"/proc/{p}").exists()]
        assert left == []
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0  # the port is free
        said = (tmp_path / "ui.log").read_text()
        assert "Serving dagster-webserver" in said and "Dagster UI on" in said, said
        assert "Warning" not in said, said  # `dagster dev` printed a SupersessionWarning at every start
    finally:
        if group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)


REEXECUTE = """mutation($p: ReexecutionParams) { launchPipelineReexecution(reexecutionParams: $p) {
  __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }"""


@pytest.mark.slow
def test_the_ui_re_executes_a_run_started_by_the_cli(tmp_path, monkeypatch):
    """"Re-execute all" in the UI on a `local-rag index` run showed a raw stack trace (CheckError: Expected non-None
    value: the in-process run had no code location origin). A real CLI run, re-executed the way the UI does it (its
    GraphQL mutation), through the daemon's run queue, to success."""
    import json

    import dagster as dg
    import yaml

    port, home, notes = free_port(), tmp_path / "home", tmp_path / "notes"
    notes.mkdir()
    (notes / "heron.md").write_text("# Herons\n\nGrey herons stand still in shallow water.\n")
    home.mkdir()
    (home / "config.yaml").write_text(yaml.safe_dump({"collections": {"notes": {
        "sources": [{"type": "project", "paths": [str(notes)]}]}}}))
    env = {**os.environ, "LOCAL_RAG_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")}
    monkeypatch.setenv("DAGSTER_HOME", env["DAGSTER_HOME"])  # the instance is opened here too
    exe = str(Path(sys.executable).with_name("local-rag"))
    subprocess.run([exe, "index", "all"], env=env, check=True, capture_output=True, timeout=300)
    with dg.DagsterInstance.from_config(str(home / "dagster")) as instance:
        [parent] = instance.get_runs(filters=dg.RunsFilter(tags={"local_rag/trigger": "cli"}))
    proc = subprocess.Popen([exe, "ui", "--port", str(port)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: _up(port), 120, proc)
        body = json.dumps({"query": REEXECUTE, "variables": {"p": {"parentRunId": parent.run_id,
                                                                   "strategy": "ALL_STEPS"}}}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", body,
                                         {"Content-Type": "application/json"})
        answer = json.loads(urllib.request.urlopen(request, timeout=60).read())["data"]["launchPipelineReexecution"]
        assert answer["__typename"] == "LaunchRunSuccess", answer
        with dg.DagsterInstance.from_config(str(home / "dagster")) as instance:
            child = lambda: instance.get_run_by_id(answer["run"]["runId"])  # noqa: E731
            wait_for(lambda: child().is_finished, 180, proc)
            assert child().status == dg.DagsterRunStatus.SUCCESS
            assert (child().parent_run_id, child().job_name) == (parent.run_id, parent.job_name)
    finally:
        if group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=40)


def _up(port: int) -> bool:
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2)
        return True
    except OSError:
        return False


def wait_for(ready, seconds: float, proc) -> None:
    deadline = time.time() + seconds
    while not ready():
        assert time.time() < deadline and proc.poll() is None, "gave up waiting"
        time.sleep(1)
