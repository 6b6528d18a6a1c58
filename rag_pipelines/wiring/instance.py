"""The Dagster instance under the local-rag home: SQLite storage, telemetry off, one run at a time."""

import os
from pathlib import Path

from rag_search.config import Paths

from rag_pipelines.wiring.outcomes import BATCH_ITEMS

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

EVENT_LOG_YAML = """\
event_log_storage:   # Dagster's SQLite event log with its connections kept open (rag_pipelines/wiring/event_log.py)
  module: rag_pipelines.wiring.event_log
  class: LocalEventLogStorage
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
        config.write_text(DAGSTER_YAML + EVENT_LOG_YAML, encoding="utf-8")
    else:
        add_event_log(config)
    workspace = home / "workspace.yaml"
    if not workspace.exists():
        workspace.write_text(WORKSPACE_YAML, encoding="utf-8")
    nux_seen(home)
    os.environ["DAGSTER_HOME"] = str(home)
    # One "planned" event per run instead of one per partition: halves Dagster's per-item bookkeeping.
    # Items that fail get a planned event of their own (wiring/outcomes.py), so their partitions still show
    # as Failed; a crashed run leaves the partitions it had not finished unmarked (rag.db knows them).
    os.environ.setdefault("DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS", "1")
    # Item materialisations are logged in batches (wiring/outcomes.py) that the event log writes at once.
    os.environ.setdefault("DAGSTER_EVENT_BATCH_SIZE", str(4 * BATCH_ITEMS))
    return home


def add_event_log(config: Path) -> None:
    """Homes made before the kept-open event log get it, unless their storage was configured by hand."""
    text = config.read_text(encoding="utf-8")
    if text.startswith("# Written by local-rag") and "storage" not in text:
        config.write_text(text.rstrip("\n") + "\n" + EVENT_LOG_YAML, encoding="utf-8")


def nux_seen(home: Path) -> None:
    """Record the UI's first-visit dialog as seen: what its Skip button does (Dagster's .nux/nux.yaml), so
    homes whose dagster.yaml predates `nux: {enabled: false}` (or was edited) open without it too."""
    seen = home / ".nux" / "nux.yaml"
    if not seen.exists():
        seen.parent.mkdir(exist_ok=True)
        seen.write_text("seen: 1\n", encoding="utf-8")
