"""Dead Dagster runs: find runs whose process is gone, mark them failed, and list active runs for `status`.

A SIGKILLed `local-rag index` (or a `serve` closed during `rag_index`) leaves its run in STARTED forever:
the sensors skip ("a run of this collection is in progress") and `max_concurrent_runs: 1` blocks the queue.
`reap_dead_runs` ends such runs the way Dagster's own monitoring does (`instance.report_run_failed`), so
the UI shows "Failure" with our message and the run queue frees its slot.

How the process of a run is found:
- runs we execute in-process (CLI, watcher, MCP) carry `owner_tags()`: pid, host and the process start
  time, so a reused pid is not mistaken for the run's process;
- runs launched by the Dagster daemon (sensors, schedules, the UI) have no such tags; their run worker
  logs an ENGINE_EVENT "Started process for run (pid: N)" (and the in-process executor "Executing steps
  in process (pid: N)") whose metadata holds the pid. A process that started after that event is not
  the run's process.
Where a run lives is recorded with it: the CLI's runs carry `owner_tags()` from the start, and every run's step
adds them when the run has none (`record_where`: a run worker in a Kubernetes pod records the pod's host name).
Only runs of this host are judged. A run on another host is never touched, nor one whose host is not known
(launched elsewhere, e.g. as a Kubernetes Job, and not yet at its step): its pid means nothing here, and Dagster's
run monitoring (the daemon's, which asks the run launcher) ends it if its worker dies. A run of this host with
no recorded process is left alone unless it has sat in NOT_STARTED/STARTING longer than `start_timeout` seconds.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from dataclasses import asdict, dataclass

PID_TAG = "local_rag/pid"
HOST_TAG = "local_rag/host"
PROC_START_TAG = "local_rag/proc_start"
OWNER_RUN_TAG = "local_rag/owner_run"  # the run the three tags above were written for (re-executions copy tags)
OWNER_TAGS = (PID_TAG, HOST_TAG, PROC_START_TAG, OWNER_RUN_TAG)
PARENT_RUN_TAG = "dagster/parent_run_id"  # = dagster._core.storage.tags.PARENT_RUN_ID_TAG
COLLECTION_TAG = "local_rag/collection"
TRIGGER_TAG = "local_rag/trigger"
GRPC_INFO_TAG = ".dagster/grpc_info"  # = dagster._core.storage.tags.GRPC_INFO_TAG, set by DefaultRunLauncher

START_TIMEOUT = 600.0  # seconds a run may sit in NOT_STARTED/STARTING with no process recorded
CLOCK_SLACK = 2.0  # seconds: boot-time rounding between a process start time and a run's timestamps
WATCHED = ("NOT_STARTED", "STARTING", "STARTED", "CANCELING")  # statuses that have (or wait for) a process
LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0", ""}


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    job_name: str
    status: str  # DagsterRunStatus value
    created: float  # epoch seconds
    started: float | None  # epoch seconds, None before the run started
    pid: int | None
    host: str | None  # the run's host when recorded
    alive: bool | None  # None: unknown (no process recorded, another host, or not checkable here)
    reason: str
    stuck: bool = False  # nothing will end this run: `reap_dead_runs` ends it
    collection: str | None = None
    trigger: str | None = None

    @property
    def age_seconds(self) -> float:
        return max(0.0, time.time() - (self.started or self.created))

    def to_dict(self) -> dict:
        return {**asdict(self), "age_seconds": round(self.age_seconds, 1)}


def owner_tags(run_id: str | None = None) -> dict[str, str]:
    """Tags for a run executed in this process, so another process can tell whether it still runs."""
    tags = {PID_TAG: str(os.getpid()), HOST_TAG: socket.gethostname()}
    token = _probe(os.getpid()).token
    if token:
        tags[PROC_START_TAG] = token
    if run_id:
        tags[OWNER_RUN_TAG] = run_id
    return tags


def record_where(instance, run, collection: str | None = None) -> None:
    """Record on a run that this process runs it (pid, host, start time), unless it already says where it runs, and
    the collection it writes (runs of Dagster's asset job, from the UI or a backfill, carry no such tag)."""
    tags = {} if HOST_TAG in own_tags(run) else owner_tags(run.run_id)
    if collection and COLLECTION_TAG not in run.tags:
        tags[COLLECTION_TAG] = collection
    if tags:
        instance.add_run_tags(run.run_id, tags)


def own_tags(run) -> dict[str, str]:
    """The run's tags without the owner tags a re-execution copied from the run it re-executes (they name that
    run's process): owner tags count when written for this run, or (older runs) on a run that re-executes none."""
    tags = run.tags
    owner = tags.get(OWNER_RUN_TAG)
    if owner == run.run_id or (owner is None and PARENT_RUN_TAG not in tags):
        return dict(tags)
    return {k: v for k, v in tags.items() if k not in OWNER_TAGS}


def stuck_runs(instance, collection: str | None = None, *, start_timeout: float = START_TIMEOUT) -> list[RunInfo]:
    """Every active run (QUEUED included) with its process state, oldest first, for `local-rag status`.

    `RunInfo.stuck` is true for the ones `reap_dead_runs` would end.
    """
    return [_judge(instance, record, start_timeout) for record in _records(instance, ("QUEUED", *WATCHED), collection)]


def reap_dead_runs(instance, collection: str | None = None, *, start_timeout: float = START_TIMEOUT) -> list[RunInfo]:
    """Mark failed the runs whose process is gone (CANCELING ones canceled); return the runs it ended.

    Safe to call from any process at any time: live runs, runs on other hosts and runs whose process is
    unknown (unless stuck before starting for `start_timeout` s) are left alone; a second call does nothing.
    """
    reaped = []
    for record in _records(instance, WATCHED, collection):
        info = _judge(instance, record, start_timeout)
        if info.stuck and _end(instance, record, info):
            reaped.append(info)
    return reaped


# --- finding the runs and their processes -------------------------------------------------------------

def _records(instance, statuses, collection: str | None):
    import dagster as dg

    filters = dg.RunsFilter(statuses=[dg.DagsterRunStatus(s) for s in statuses],
                            tags={COLLECTION_TAG: collection} if collection else {})
    return sorted(instance.get_run_records(filters=filters), key=lambda r: r.create_timestamp)


def _judge(instance, record, start_timeout: float) -> RunInfo:
    """What we know about the run's process, and whether the run is stuck."""
    run = record.dagster_run
    tags = own_tags(run)
    status = run.status.value
    created = record.create_timestamp.timestamp()
    here = socket.gethostname()

    def info(pid=None, host=None, alive=None, reason="", stuck=False):
        return RunInfo(run.run_id, run.job_name, status, created, record.start_time, pid, host, alive, reason,
                       stuck, tags.get(COLLECTION_TAG), tags.get(TRIGGER_TAG))

    if status == "QUEUED":
        return info(reason="queued: the Dagster daemon starts it when no other run is active")
    host = tags.get(HOST_TAG) or _grpc_host(tags)
    if host is None:
        return info(reason=f"{status}; where it runs is not recorded yet (launched elsewhere?): not checked from "
                           f"{here}; Dagster's run monitoring ends it if its process dies")
    if host != here and host not in LOCAL_HOSTS:
        return info(host=host, reason=f"runs on host {host}; not checked from {here}")

    # Our tags: the process must have started before the run was created (and, with proc_start, be the
    # very same process). Daemon-launched runs: the worker must have started before it logged its pid.
    pid, born_before, token = _int(tags.get(PID_TAG)), created, tags.get(PROC_START_TAG)
    if pid is None:
        token = None
        pid, born_before = _event_pid(instance, run.run_id) or (None, None)
    if pid is None:
        waited = time.time() - max(created, record.update_timestamp.timestamp())  # in this status since
        if status in ("NOT_STARTED", "STARTING") and waited > start_timeout:
            return info(host=host, reason=f"it sat in {status} for {waited / 60:.0f} min with no process recorded",
                        stuck=True)
        return info(host=host, reason=f"{status}; no process recorded yet")

    proc = _probe(pid)
    gone = f"the process that ran this (pid {pid}) is gone"
    if proc.alive is None:
        return info(pid, host, None, f"pid {pid} cannot be checked on this system")
    if not proc.alive:
        return info(pid, host, False, gone, stuck=True)
    if token and proc.token and token.split(":")[0] == proc.token.split(":")[0]:
        reused = token != proc.token
    else:
        reused = proc.start is not None and born_before is not None and proc.start > born_before + CLOCK_SLACK
    if reused:
        return info(pid, host, False, f"{gone} (pid {pid} now belongs to a newer process)", stuck=True)
    return info(pid, host, True, f"running in pid {pid}")


def _event_pid(instance, run_id: str) -> tuple[int, float] | None:
    """(pid, event time) of the run's worker from its first run-level ENGINE_EVENT carrying a pid.

    Dagster logs "Started process for run (pid: N)" from the run worker that DefaultRunLauncher's code
    server spawns (dagster/_grpc/impl.py `_run_in_subprocess`, also `dagster api execute_run` in
    _cli/api.py), and the in-process executor logs "Executing steps in process (pid: N)"
    (dagster/_core/executor/in_process.py), both with EngineEventData.in_process(pid) → metadata["pid"].
    """
    from dagster._core.events import DagsterEventType

    entries = instance.event_log_storage.get_logs_for_run(
        run_id, of_type=DagsterEventType.ENGINE_EVENT, limit=20, ascending=True)
    for entry in entries:
        event = entry.dagster_event
        if event is None or event.step_key:
            continue  # step-level events name step subprocesses, not the run's process
        value = (getattr(event.event_specific_data, "metadata", None) or {}).get("pid")
        pid = _int(getattr(value, "value", value))
        if pid is not None:
            return pid, entry.timestamp
    return None


def _grpc_host(tags) -> str | None:
    raw = tags.get(GRPC_INFO_TAG)
    if not raw:
        return None
    try:
        import json

        return str(json.loads(raw).get("host") or "")
    except (ValueError, AttributeError):
        return None


def _int(value) -> int | None:
    try:
        n = int(str(value))
    except (TypeError, ValueError):
        return None
    return n if n > 0 else None


@dataclass(frozen=True)
class _Proc:
    alive: bool | None  # None: cannot tell on this system
    token: str | None = None  # exact start-time token, comparable between processes of this host
    start: float | None = None  # start time, epoch seconds


def _probe(pid: int) -> _Proc:
    """Does `pid` live (zombies do not), and when did it start? /proc on Linux, else psutil, else kill 0."""
    if os.path.exists("/proc/self/stat"):
        return _probe_proc(pid)
    try:
        import psutil
    except ImportError:
        psutil = None
    if psutil is not None:
        try:
            p = psutil.Process(pid)
            if p.status() in (psutil.STATUS_ZOMBIE, getattr(psutil, "STATUS_DEAD", "dead")):
                return _Proc(False)
            started = p.create_time()
            return _Proc(True, f"psutil:{started:.2f}", started)
        except psutil.NoSuchProcess:
            return _Proc(False)
        except psutil.Error:
            return _Proc(True)
    if sys.platform == "win32":
        return _Proc(None)  # os.kill(pid, 0) would terminate the process on Windows
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return _Proc(False)
    except PermissionError:
        return _Proc(True)
    except OSError:
        return _Proc(None)
    return _Proc(True)


def _probe_proc(pid: int) -> _Proc:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("utf-8", "replace")
    except (FileNotFoundError, ProcessLookupError):
        return _Proc(False)
    except OSError:
        return _Proc(None)
    fields = stat[stat.rfind(")") + 2:].split()  # fields 3.. of proc(5); comm may hold spaces and ')'
    try:
        state, ticks = fields[0], int(fields[19])  # field 3: state, field 22: starttime (clock ticks after boot)
    except (IndexError, ValueError):
        return _Proc(True)
    if state in ("Z", "X", "x"):
        return _Proc(False)  # killed, not yet reaped by its parent
    return _Proc(True, f"linux:{ticks}", _boot_time() + ticks / os.sysconf("SC_CLK_TCK"))


def _boot_time() -> float:
    try:
        with open("/proc/stat", encoding="ascii") as f:
            for line in f:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except OSError:
        pass
    return time.time() - time.monotonic()  # CLOCK_MONOTONIC counts from boot on Linux


# --- ending a run ----------------------------------------------------------------------------------------

def _end(instance, record, info: RunInfo) -> bool:
    """Report the end of a dead run through the instance, as Dagster's run monitoring does; False if it
    changed meanwhile (finished, or moved on: judged again on the next call)."""
    from dagster._core.events import EngineEventData, JobFailureData, RunFailureReason
    from dagster._core.storage.dagster_run import DagsterRunStatus

    run = instance.get_run_by_id(record.dagster_run.run_id)
    if run is None or run.is_finished or run.status != record.dagster_run.status:
        return False
    message = (f"local-rag: {info.reason}; marked "
               f"{'canceled' if run.status == DagsterRunStatus.CANCELING else 'failed'}. "
               "Items it had not written are indexed again on the next run.")
    metadata = {"pid": str(info.pid) if info.pid else "unknown", "host": info.host or socket.gethostname(),
                "checked_by_pid": str(os.getpid())}
    instance.report_engine_event(message, run, EngineEventData(metadata=metadata))
    if run.status == DagsterRunStatus.CANCELING:
        # A cancel was requested and the process died: Dagster's monitor ends these as CANCELED too
        # (dagster/_daemon/monitoring/run_monitoring.py monitor_canceling_run).
        instance.report_run_canceled(run, message)
    else:
        # Same call as dagster/_daemon/monitoring/run_monitoring.py monitor_started_run /
        # monitor_starting_run and the code server's _check_for_orphaned_runs: a PIPELINE_FAILURE event,
        # which the run storage turns into status FAILURE (and end_time), freeing the run queue's slot.
        instance.report_run_failed(run, message, JobFailureData(
            error=None, failure_reason=RunFailureReason.UNEXPECTED_TERMINATION))
    _free_op_slots(instance, run.run_id)
    return True


def _free_op_slots(instance, run_id: str) -> None:
    """Release op-concurrency (pool) slots the dead run held; without pools this finds nothing."""
    try:
        storage = instance.event_log_storage
        if storage.supports_global_concurrency_limits and run_id in storage.get_concurrency_run_ids():
            storage.free_concurrency_slots_for_run(run_id)
    except Exception:  # noqa: BLE001 - best effort; the daemon frees them after free_slots_after_run_end_seconds
        pass
