"""Dead runs (their process was SIGKILLed) are found and marked failed; live and foreign runs are left alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.events import DagsterEventType, EngineEventData
from dagster._core.remote_origin import InProcessCodeLocationOrigin, RemoteJobOrigin, RemoteRepositoryOrigin
from dagster._core.storage.tags import GRPC_INFO_TAG, RUN_FAILURE_REASON_TAG
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

from rag_pipelines.indexing import health as run_health
from rag_pipelines.indexing.health import HOST_TAG, PID_TAG, PROC_START_TAG, owner_tags, reap_dead_runs, stuck_runs
from rag_pipelines.wiring.instance import DAGSTER_YAML

S = dg.DagsterRunStatus
COLLECTION = {"local_rag/collection": "notes"}


@dg.op
def nap() -> None:
    time.sleep(60)


@dg.job(tags=COLLECTION)
def notes_sync() -> None:
    nap()


# Run in a subprocess: executes a job in-process against the test's instance, its op sleeps until killed.
WORKER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import dagster as dg
    from rag_pipelines.indexing.health import owner_tags

    home, marker, tagged = sys.argv[1], Path(sys.argv[2]), sys.argv[3] == "tagged"

    @dg.op
    def nap() -> None:
        marker.write_text("started")
        time.sleep(60)

    @dg.job(tags={"local_rag/collection": "notes"})
    def notes_index() -> None:
        nap()

    instance = dg.DagsterInstance.from_config(home)
    launched = {".dagster/grpc_info": '{"host": "localhost", "port": 4000}'}  # as DefaultRunLauncher tags its runs
    tags = {"test/worker": sys.argv[3], "local_rag/trigger": "cli", **(owner_tags() if tagged else launched)}
    notes_index.execute_in_process(instance=instance, tags=tags, raise_on_error=False)
""")


@pytest.fixture
def instance(tmp_path):
    home = tmp_path / "dagster"
    home.mkdir()
    (home / "dagster.yaml").write_text(DAGSTER_YAML)
    with dg.DagsterInstance.from_config(str(home)) as inst:
        yield inst


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def make_run(instance, status=S.STARTED, tags: dict | None = None) -> str:
    return instance.create_run_for_job(notes_sync, status=status, tags=tags or {}).run_id


def queued_run(instance) -> str:
    """A run as a sensor submits it (queued runs need a code-location origin)."""
    origin = RemoteJobOrigin(RemoteRepositoryOrigin(InProcessCodeLocationOrigin(
        LoadableTargetOrigin(python_file=__file__)), "__repository__"), "notes_sync")
    return instance.create_run_for_job(notes_sync, status=S.QUEUED, remote_job_origin=origin).run_id


def status_of(instance, run_id: str) -> dg.DagsterRunStatus:
    return instance.get_run_by_id(run_id).status


def log_pid(instance, run_id: str, pid: int, *, timestamp: float | None = None) -> None:
    """What a daemon-launched run worker logs first (dagster/_grpc/impl.py _run_in_subprocess)."""
    event = dg.DagsterEvent(DagsterEventType.ENGINE_EVENT.value, job_name="notes_sync",
                            message=f"Started process for run (pid: {pid}).",
                            event_specific_data=EngineEventData.in_process(pid))
    instance.report_dagster_event(event, run_id=run_id, timestamp=timestamp)


def test_sigkilled_in_process_runs_are_marked_failed_once(instance, tmp_path):
    """(a) + (e): one worker carries owner_tags(), the other only Dagster's own pid event."""
    home = str(Path(instance.root_directory))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parents[1]),
                                                                      os.environ.get("PYTHONPATH")]))}
    workers = {}
    for kind in ("tagged", "untagged"):
        marker = tmp_path / f"{kind}.started"
        proc = subprocess.Popen([sys.executable, "-c", WORKER, home, str(marker), kind], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        workers[kind] = (proc, marker)
    try:
        deadline = time.time() + 30
        while not all(marker.exists() for _, marker in workers.values()):
            for kind, (proc, _) in workers.items():
                assert proc.poll() is None, f"{kind} worker exited: {proc.stderr.read().decode()[-2000:]}"
            assert time.time() < deadline, "the workers did not start their op in time"
            time.sleep(0.05)
        runs = {kind: instance.get_runs(dg.RunsFilter(tags={"test/worker": kind}))[0] for kind in workers}
        assert {r.status for r in runs.values()} == {S.STARTED}
        assert runs["tagged"].tags[PID_TAG] == str(workers["tagged"][0].pid)

        listed = {info.run_id: info for info in stuck_runs(instance)}
        for kind, run in runs.items():
            info = listed[run.run_id]
            assert (info.status, info.pid, info.alive, info.stuck) == ("STARTED", workers[kind][0].pid, True, False)
            assert info.collection == "notes" and info.job_name == "notes_index"
            assert info.to_dict()["age_seconds"] >= 0
        assert reap_dead_runs(instance) == []  # both alive

        for proc, _ in workers.values():
            os.kill(proc.pid, signal.SIGKILL)
        workers["untagged"][0].wait()  # the tagged one stays a zombie until reaped below: still dead

        reaped, deadline = [], time.time() + 5
        while len(reaped) < 2 and time.time() < deadline:
            reaped += reap_dead_runs(instance)
            time.sleep(0.05)
    finally:
        for proc, _ in workers.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            proc.stderr.close()

    assert sorted(r.run_id for r in reaped) == sorted(r.run_id for r in runs.values())
    for kind, run in runs.items():
        assert status_of(instance, run.run_id) == S.FAILURE
        assert instance.get_run_by_id(run.run_id).tags[RUN_FAILURE_REASON_TAG] == "UNEXPECTED_TERMINATION"
        [failure] = instance.all_logs(run.run_id, of_type=DagsterEventType.RUN_FAILURE)
        assert failure.dagster_event.message.startswith(
            f"local-rag: the process that ran this (pid {workers[kind][0].pid}) is gone; marked failed.")
    assert reap_dead_runs(instance) == []  # a second call does nothing
    assert stuck_runs(instance) == []


def test_run_of_this_live_process_is_left_alone(instance):
    """(b)"""
    run_id = make_run(instance, tags=owner_tags())
    assert reap_dead_runs(instance) == []
    assert status_of(instance, run_id) == S.STARTED
    [info] = stuck_runs(instance)
    assert (info.run_id, info.pid, info.alive, info.stuck) == (run_id, os.getpid(), True, False)


def test_owner_tags_a_re_execution_inherited_are_not_its_own(instance):
    """The UI's re-execution copies the parent run's tags: the pid of the CLI that ran the parent (gone by then)
    marked the running re-execution failed. Its own worker's pid (its engine event) is what counts."""
    inherited = {**owner_tags("the-parent-run"), PID_TAG: str(dead_pid())}
    run_id = make_run(instance, tags={**inherited, **LOCAL_LAUNCH})  # launched by the daemon through the code server
    log_pid(instance, run_id, os.getpid())  # the daemon-launched worker: this live process
    assert reap_dead_runs(instance) == []
    [info] = stuck_runs(instance)
    assert (info.run_id, info.pid, info.alive, info.stuck) == (run_id, os.getpid(), True, False)
    own = make_run(instance, tags={**owner_tags(), PID_TAG: str(dead_pid())})  # tags made for it: trusted
    assert [r.run_id for r in reap_dead_runs(instance)] == [own]


def test_owner_tags_describe_this_process():
    tags = owner_tags()
    assert tags[PID_TAG] == str(os.getpid())
    assert tags[HOST_TAG]
    assert tags[PROC_START_TAG] == owner_tags()[PROC_START_TAG]  # stable for one process
    child = subprocess.run([sys.executable, "-c", "from rag_pipelines.indexing.health import owner_tags; "
                            "print(owner_tags()['local_rag/proc_start'])"], capture_output=True, text=True,
                           check=True)
    assert child.stdout.strip() != tags[PROC_START_TAG]


def test_reused_pid_is_not_mistaken_for_the_run(instance):
    """(c) The pid is alive (it is ours) but that process started at another time."""
    tags = owner_tags()
    kind = tags[PROC_START_TAG].split(":")[0]
    run_id = make_run(instance, tags={**tags, PROC_START_TAG: f"{kind}:1"})
    [info] = reap_dead_runs(instance)
    assert (info.run_id, info.pid, info.alive) == (run_id, os.getpid(), False)
    assert "newer process" in info.reason
    assert status_of(instance, run_id) == S.FAILURE


LOCAL_LAUNCH = {GRPC_INFO_TAG: '{"host": "localhost", "port": 4000}'}  # DefaultRunLauncher via a local code server


def test_daemon_launched_run_worker_pid_from_its_engine_event(instance):
    dead = make_run(instance, tags=LOCAL_LAUNCH)
    log_pid(instance, dead, dead_pid())
    live = make_run(instance, tags=LOCAL_LAUNCH)
    log_pid(instance, live, os.getpid())
    reused = make_run(instance, tags=LOCAL_LAUNCH)  # our pid, but the event predates this process: another had it
    log_pid(instance, reused, os.getpid(), timestamp=time.time() - 10 * 365 * 86400)

    assert sorted(r.run_id for r in reap_dead_runs(instance)) == sorted([dead, reused])
    assert status_of(instance, dead) == status_of(instance, reused) == S.FAILURE
    assert status_of(instance, live) == S.STARTED


def test_a_run_launched_elsewhere_is_left_to_dagsters_run_monitoring(instance):
    """A run worker in a Kubernetes pod (K8sRunLauncher: no gRPC tag, no host) logs its pid, which is another pid
    namespace's: here it names a dead process, or nothing. Not reaped, not even after the start timeout; once its
    step has recorded where it runs (another host), still never."""
    pod = make_run(instance)
    log_pid(instance, pod, dead_pid())
    starting = make_run(instance, status=S.STARTING)
    assert reap_dead_runs(instance, start_timeout=0) == []
    assert status_of(instance, pod) == S.STARTED and status_of(instance, starting) == S.STARTING
    infos = {i.run_id: i for i in stuck_runs(instance, start_timeout=0)}
    assert not infos[pod].stuck and infos[pod].alive is None and "run monitoring" in infos[pod].reason

    run_health.record_where(instance, instance.get_run_by_id(pod))  # as its step does, but from "another host"
    tags = instance.get_run_by_id(pod).tags
    assert tags[HOST_TAG] == owner_tags()[HOST_TAG] and tags[PID_TAG] == str(os.getpid())
    instance.add_run_tags(pod, {HOST_TAG: "local-rag-run-7f9c-xk2p", PID_TAG: str(dead_pid())})
    assert reap_dead_runs(instance, start_timeout=0) == [] and status_of(instance, pod) == S.STARTED
    run_health.record_where(instance, instance.get_run_by_id(pod))  # a run that says where it runs keeps it
    assert instance.get_run_by_id(pod).tags[HOST_TAG] == "local-rag-run-7f9c-xk2p"


def test_runs_on_another_host_are_never_touched(instance):
    """(d)"""
    ours = make_run(instance, tags={PID_TAG: str(dead_pid()), HOST_TAG: "elsewhere.example"})
    grpc = make_run(instance, status=S.STARTING, tags={GRPC_INFO_TAG: '{"host": "build-box", "port": 4000}'})
    log_pid(instance, grpc, dead_pid())
    assert reap_dead_runs(instance, start_timeout=0) == []
    assert status_of(instance, ours) == S.STARTED and status_of(instance, grpc) == S.STARTING
    infos = {i.run_id: i for i in stuck_runs(instance)}
    assert infos[ours].alive is None and "elsewhere.example" in infos[ours].reason
    assert infos[grpc].host == "build-box" and not infos[grpc].stuck


def test_run_without_a_process_is_failed_only_after_the_start_timeout(instance):
    starting = make_run(instance, status=S.STARTING, tags={GRPC_INFO_TAG: '{"host": "localhost", "port": 4000}'})
    started = make_run(instance)  # STARTED with no pid recorded: never guessed dead
    assert reap_dead_runs(instance) == []
    time.sleep(0.05)
    [info] = reap_dead_runs(instance, start_timeout=0.01)
    assert info.run_id == starting and "no process recorded" in info.reason
    assert status_of(instance, starting) == S.FAILURE and status_of(instance, started) == S.STARTED


def test_canceling_run_whose_process_died_is_canceled(instance):
    run_id = make_run(instance, tags={PID_TAG: str(dead_pid()), HOST_TAG: owner_tags()[HOST_TAG]})
    instance.report_run_canceling(instance.get_run_by_id(run_id))
    assert status_of(instance, run_id) == S.CANCELING
    [info] = reap_dead_runs(instance)
    assert info.run_id == run_id and status_of(instance, run_id) == S.CANCELED


def test_collection_filter_and_queued_runs(instance):
    here = owner_tags()[HOST_TAG]
    other = make_run(instance, tags={PID_TAG: str(dead_pid()), HOST_TAG: here, "local_rag/collection": "books"})
    queued = queued_run(instance)
    assert reap_dead_runs(instance, "notes") == []
    infos = {i.run_id: i for i in stuck_runs(instance)}
    assert infos[other].stuck and infos[other].collection == "books"
    assert infos[queued].status == "QUEUED" and not infos[queued].stuck
    assert [i.run_id for i in stuck_runs(instance, "books")] == [other]
    assert [i.run_id for i in reap_dead_runs(instance)] == [other]
    assert status_of(instance, queued) == S.QUEUED  # the daemon's queue starts it once the slot is free


def test_process_probe_on_linux():
    if not os.path.exists("/proc/self/stat"):
        pytest.skip("Linux /proc only")
    assert run_health._probe(dead_pid()).alive is False
    me = run_health._probe(os.getpid())
    assert me.alive is True and me.token.startswith("linux:")
    assert me.start <= time.time()
    psutil = pytest.importorskip("psutil")
    assert abs(me.start - psutil.Process().create_time()) < 1.5
