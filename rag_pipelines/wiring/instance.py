"""The Dagster instance under the local-rag home: SQLite storage, telemetry off, one run at a time."""

import os
from pathlib import Path

from rag_search.config import Paths

DAGSTER_YAML = """\
# Written by local-rag. Nothing leaves this machine: telemetry is off.
telemetry:
  enabled: false
nux:
  enabled: false   # no newsletter sign-up dialog on the first visit of the UI
concurrency:
  runs:
    max_concurrent_runs: 1   # rag.db has one writer
retention:
  sensor:
    purge_after_days: {skipped: 1, failure: 14, success: 30}
  schedule:
    purge_after_days: {skipped: 7, failure: 30, success: 30}
"""

WORKSPACE_YAML = """\
load_from:
  - python_module:
      module_name: rag_pipelines
      attribute: defs
      location_name: rag
"""


def ensure_instance(paths: Paths) -> Path:
    """Create DAGSTER_HOME with local-rag's dagster.yaml if needed and point this process at it."""
    home = paths.dagster_home
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        config.write_text(DAGSTER_YAML, encoding="utf-8")
    workspace = home / "workspace.yaml"
    if not workspace.exists():
        workspace.write_text(WORKSPACE_YAML, encoding="utf-8")
    nux_seen(home)
    os.environ["DAGSTER_HOME"] = str(home)
    # One "planned" event per run instead of one per partition: halves Dagster's per-item bookkeeping.
    # Items that fail get a planned event of their own (wiring/outcomes.py), so their partitions still show
    # as Failed; a crashed run leaves the partitions it had not finished unmarked (rag.db knows them).
    os.environ.setdefault("DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS", "1")
    return home


def nux_seen(home: Path) -> None:
    """Record the UI's first-visit dialog as seen: what its Skip button does (Dagster's .nux/nux.yaml), so
    homes whose dagster.yaml predates `nux: {enabled: false}` (or was edited) open without it too."""
    seen = home / ".nux" / "nux.yaml"
    if not seen.exists():
        seen.parent.mkdir(exist_ok=True)
        seen.write_text("seen: 1\n", encoding="utf-8")
