"""The Dagster instance under the home: created once, whoever opens a new home first."""

from __future__ import annotations

import subprocess
import sys

import dagster as dg

OPEN_AND_READ = """
import sys
import dagster as dg
from rag_search.config import Paths
from rag_pipelines.wiring.instance import ensure_instance
home = ensure_instance(Paths.from_env({"LOCAL_RAG_HOME": sys.argv[1]}))
with dg.DagsterInstance.from_config(str(home)) as instance:
    instance.get_runs(limit=1)
"""


def test_processes_opening_a_new_home_at_once_all_get_a_working_instance(tmp_path, monkeypatch):
    """A watcher's first run and a poll of its runs both created Dagster's tables: `alembic_version` got two heads
    and every later open of the instance failed ("more than one head present")."""
    for attempt in range(2):
        home = tmp_path / f"home{attempt}"
        procs = [subprocess.Popen([sys.executable, "-c", OPEN_AND_READ, str(home)], stderr=subprocess.PIPE, text=True)
                 for _ in range(4)]
        errors = [p.communicate(timeout=300)[1] for p in procs]
        assert all(p.returncode == 0 for p in procs), errors
        monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))
        with dg.DagsterInstance.from_config(str(home / "dagster")) as instance:
            assert instance.get_runs(limit=1) == []
        assert sorted(f.name for f in (home / "dagster").glob(".dagster.yaml.*")) == []  # nothing half-written left
