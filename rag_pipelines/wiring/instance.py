"""The Dagster instance under the local-rag home, written from config.yaml's `dagster:` section: SQLite (one run at
a time) or PostgreSQL (runs of different collections in parallel), telemetry off."""

import fcntl
import hashlib
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from rag_search.config import DagsterSettings, Paths, load_settings, mask_password
from rag_search.errors import ConfigError
from rag_search.file_updates import private_folder

from rag_pipelines.wiring.outcomes import BATCH_ITEMS

HEADER = "# Written by local-rag from config.yaml (dagster:); rewritten when it changes. Remove this line to keep edits."
LEGACY = "# Written by local-rag"  # homes made before the `dagster:` setting
COLLECTION_TAG = "local_rag/collection"

# local-rag's dagster.yaml before the `dagster:` setting and the kept-open event log: Dagster's default SQLite
# storage (benches compare with it; homes that still have it get the current file).
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

COMMON_YAML = """\
# Nothing leaves this machine: telemetry is off.
telemetry:
  enabled: false
nux:
  enabled: false   # no newsletter sign-up dialog on the first visit of the UI
compute_logs:   # Dagster's, its helper processes deaf to a terminal's Ctrl-C (rag_pipelines/wiring/compute_logs.py)
  module: rag_pipelines.wiring.compute_logs
  class: LocalComputeLogManager
retention:
  sensor:
    purge_after_days: {skipped: 1, failure: 14, success: 30}
  schedule:
    purge_after_days: {skipped: 7, failure: 30, success: 30}
"""

SQLITE_RUNS_YAML = """\
concurrency:
  runs:
    max_concurrent_runs: {runs}   # config.yaml dagster.max_concurrent_runs (default 1)
event_log_storage:   # Dagster's SQLite event log with its connections kept open (rag_pipelines/wiring/event_log.py)
  module: rag_pipelines.wiring.event_log
  class: LocalEventLogStorage
"""

POSTGRES_YAML = """\
storage:
  postgres:
    postgres_url: {url}
concurrency:
  runs:
    max_concurrent_runs: {runs}
    tag_concurrency_limits:   # runs of different collections at once, never two of one
      - key: {tag}
        value: {{applyLimitPerUniqueValue: true}}
        limit: 1
  pools:   # each collection's writers are in a pool of their own (wiring/pool.py): one step at a time, however
    granularity: op   # the run started (its job, the UI's asset job, a backfill, a sensor, a re-execution, the CLI)
    default_limit: 1
"""


def render(settings: DagsterSettings) -> str:
    """dagster.yaml for these settings."""
    if settings.on_postgres:
        import json

        # the driver named: SQLAlchemy 2.1 reads postgresql:// as psycopg 3, whose server-side parameters break
        # dagster-postgres' `NOTIFY run_events, $1` (it is written for psycopg2)
        url = settings.storage.replace("postgresql://", "postgresql+psycopg2://", 1)
        body = POSTGRES_YAML.format(url=json.dumps(url), runs=settings.runs, tag=COLLECTION_TAG)
    else:
        body = SQLITE_RUNS_YAML.format(runs=settings.runs)
    return f"{HEADER}\n{COMMON_YAML}{body}"


WORKSPACE_YAML = """\
load_from:
  - python_module:
      module_name: rag_pipelines
      attribute: defs
      location_name: rag
"""


def ensure_instance(paths: Paths, settings: DagsterSettings | None = None) -> Path:
    """Write DAGSTER_HOME's dagster.yaml from the config (unless edited by hand) and point this process at it."""
    settings = settings or load_settings(paths.config).dagster
    home = paths.dagster_home
    private_folder(home)
    if settings.on_postgres:
        check_postgres(settings.storage)
    os.environ["DAGSTER_HOME"] = str(home)
    with _locked(home):  # two processes starting on a new home: one creates the storage, the other waits
        write_config(home / "dagster.yaml", settings)  # creates the storage when it writes the file
    workspace = home / "workspace.yaml"
    if not workspace.exists():
        workspace.write_text(WORKSPACE_YAML, encoding="utf-8")
    nux_seen(home)
    # One "planned" event per run instead of one per partition: halves Dagster's per-item bookkeeping.
    # Items that fail get a planned event of their own (wiring/outcomes.py), so their partitions still show
    # as Failed; a crashed run leaves the partitions it had not finished unmarked (rag.db knows them).
    os.environ.setdefault("DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS", "1")
    # Item materialisations are logged in batches (wiring/outcomes.py) that the event log writes at once.
    os.environ.setdefault("DAGSTER_EVENT_BATCH_SIZE", str(4 * BATCH_ITEMS))
    return home


def write_config(config: Path, settings: DagsterSettings) -> None:
    """Ours (or a legacy local-rag file without a storage section, or none): written from the settings.
    Anything else was edited by hand and is left alone, unless the config asks for PostgreSQL there."""
    text = config.read_text(encoding="utf-8") if config.exists() else ""
    wanted = render(settings)
    if ours(text):
        if text != wanted:
            publish(config, wanted)
        return
    problem = edited_problem(config, text, settings)
    if problem:
        raise ConfigError(problem)


def ours(text: str) -> bool:
    """dagster.yaml as local-rag writes it (or none yet): rewritten from config.yaml when that changes."""
    return not text or text.startswith(HEADER) or (text.startswith(LEGACY) and "storage" not in text)


def edited_problem(config: Path, text: str, settings: DagsterSettings) -> str | None:
    """Why a dagster.yaml edited by hand cannot serve config.yaml's `dagster:` setting, or None."""
    if settings.on_postgres and "storage" not in text:
        return (f"config.yaml asks for Dagster on PostgreSQL, but {config} was edited by hand and has no storage "
                "section. Delete that file (local-rag writes it again from config.yaml) or add a `storage: "
                "postgres:` section to it yourself.")
    return None


def publish(config: Path, text: str) -> None:
    """Write dagster.yaml so that a reader never sees half of it, nor an instance whose tables are not made yet:
    written beside it (only its owner can read it: the URL may hold a password), its storage created, renamed."""
    fresh = config.with_name(f".{config.name}.{os.getpid()}")
    fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    try:
        create_storage(config.parent, fresh.name)
    except BaseException:
        fresh.unlink(missing_ok=True)
        raise
    os.replace(fresh, config)


@contextmanager
def _locked(home: Path) -> Iterator[None]:
    with open(home / ".instance.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def create_storage(home: Path, filename: str) -> None:
    """Create the instance's tables once per storage configuration. Dagster creates them on first open, and two
    processes opening a new home at once (a watcher's first run, a poll of its runs) both stamped the schema:
    `alembic_version` had two heads and every later open of the instance failed."""
    import dagster as dg

    stamp = hashlib.sha256((home / filename).read_bytes()).hexdigest()
    ready = home / ".storage-created"
    if ready.exists() and ready.read_text(encoding="utf-8") == stamp:
        return
    with dg.DagsterInstance.from_config(str(home), filename) as instance:
        instance.get_runs(limit=1)
    ready.write_text(stamp, encoding="utf-8")


def check_postgres(url: str) -> None:
    """dagster-postgres is installed and the server answers; else a ConfigError that says what to do."""
    try:
        import dagster_postgres  # noqa: F401
        import psycopg2
    except ImportError as exc:
        raise ConfigError("config.yaml puts the Dagster instance on PostgreSQL (dagster: postgresql://...), which "
                          "needs dagster-postgres: pip install 'local-rag[postgres]'. Or remove the dagster: "
                          "setting to stay on SQLite.") from exc
    try:
        psycopg2.connect(url, connect_timeout=10).close()
    except psycopg2.Error as exc:
        from urllib.parse import urlsplit

        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        password = urlsplit(url).password
        reason = reason.replace(password, "***") if password else reason
        raise ConfigError(f"Cannot reach the Dagster database {mask_password(url)}: {reason}. Start the PostgreSQL "
                          "server and create the database (createdb), or fix `dagster:` in config.yaml.") from exc


def describe_instance(paths: Paths, settings: DagsterSettings) -> str:
    """What `local-rag doctor` says of the Dagster instance config.yaml names (SQLite or PostgreSQL): where it is, its
    schema and runs; a ConfigError that says what to do when it cannot serve."""
    config = paths.dagster_home / "dagster.yaml"
    text = config.read_text(encoding="utf-8") if config.exists() else ""
    problem = None if ours(text) else edited_problem(config, text, settings)
    if problem:
        raise ConfigError(problem)
    edited = "" if ours(text) else f" ({config} was edited by hand: local-rag leaves it as it is)"
    if settings.on_postgres:
        check_postgres(settings.storage)
        revision, runs = _postgres_instance(settings.storage)
        where = f"PostgreSQL {mask_password(settings.storage)}"
        if revision is None:
            return f"{where}: no Dagster tables yet (the first run creates them){edited}"
        return f"{where}: Dagster schema {revision}, {runs} runs{edited}"
    runs_db = paths.dagster_home / "history" / "runs.db"
    if not runs_db.exists():
        return f"SQLite at {paths.dagster_home}: no runs yet{edited}"
    import sqlite3

    with sqlite3.connect(f"{runs_db.as_uri()}?mode=ro", uri=True) as conn:
        runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
    return f"SQLite at {paths.dagster_home}: {runs} runs{edited}"


def _postgres_instance(url: str) -> tuple[str | None, int]:
    """(the Dagster schema's alembic revision or None when no tables exist yet, the number of runs)."""
    import psycopg2

    conn = psycopg2.connect(url, connect_timeout=10)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT to_regclass('alembic_version') IS NOT NULL, to_regclass('runs') IS NOT NULL")
            has_version, has_runs = cur.fetchone()
            if not has_version or not has_runs:
                return None, 0
            cur.execute("SELECT (SELECT version_num FROM alembic_version LIMIT 1), (SELECT count(*) FROM runs)")
            revision, runs = cur.fetchone()
            return revision, runs
    finally:
        conn.close()


def nux_seen(home: Path) -> None:
    """Record the UI's first-visit dialog as seen: what its Skip button does (Dagster's .nux/nux.yaml), so
    homes whose dagster.yaml predates `nux: {enabled: false}` (or was edited) open without it too."""
    seen = home / ".nux" / "nux.yaml"
    if not seen.exists():
        seen.parent.mkdir(exist_ok=True)
        seen.write_text("seen: 1\n", encoding="utf-8")
