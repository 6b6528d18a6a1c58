"""Watch mode: a saved note becomes searchable within seconds, through the same Dagster jobs."""

from __future__ import annotations

import threading
import time

import dagster as dg
from pipeline_env import make_home

from rag_pipelines.indexing.watch import watch_collections
from rag_search.mcp.server import watch_stats
from rag_pipelines.wiring import resources
from rag_search.retrieval import SearchEngine, SearchRequest


def test_saved_note_is_searchable_seconds_later(tmp_path, monkeypatch):
    paths, vault = make_home(tmp_path, monkeypatch)
    stop, messages = threading.Event(), []
    thread = threading.Thread(target=watch_collections, args=(paths, ["notes"], 0.5, messages.append, stop), daemon=True)
    thread.start()
    try:
        deadline = time.time() + 120
        while not any("watching" in m for m in messages) or not resources.RagResource().store().embedder:
            assert time.time() < deadline, messages
            time.sleep(0.2)
        time.sleep(3)  # the catch-up index of the whole vault has finished when items exist
        (vault / "Daily" / "2024-03-16.md").write_text("Saw a kingfisher by the river today.\n")
        saved = time.time()
        engine = SearchEngine(resources.RagResource().store(), resources.RagResource().embedder())
        while not engine.search(SearchRequest("kingfisher", mode="keyword")).hits:
            assert time.time() - saved < 90, messages  # seconds when idle; a loaded machine is slower
            time.sleep(0.2)
        assert time.time() - saved < 90
        runs = dg.DagsterInstance.get().get_runs(filters=dg.RunsFilter(tags={"local_rag/trigger": "watch"}))
        assert runs  # the watcher's runs are recorded in the instance
        deadline = time.time() + 10
        while watch_stats(paths).get("syncs", 0) < 1 and time.time() < deadline:
            time.sleep(0.2)
        seen = watch_stats(paths)  # what the MCP server's ingestion://watch-stats reports
        assert seen["running"] and seen["events"] >= 1 and seen["debounce_seconds"] == 0.5 and seen["last_event"]
    finally:
        stop.set()
        thread.join(timeout=30)
        resources.close_all()
    assert watch_stats(paths)["running"] is False


def test_the_watcher_stops_on_sigterm_even_when_sigint_is_ignored(tmp_path, monkeypatch):
    """`local-rag watch &` from a script starts with SIGINT ignored, and Dagster points SIGTERM at SIGINT's handler
    on every run: `kill` was ignored and only SIGKILL stopped it. A real process, a real signal."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    paths, _ = make_home(tmp_path, monkeypatch)
    exe = str(Path(sys.executable).with_name("local-rag"))
    proc = subprocess.Popen([exe, "watch", "--debounce", "0.5"], env={**os.environ}, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        deadline = time.time() + 120
        while not _watch_runs_done(paths):  # the catch-up run has gone through Dagster (which remaps SIGTERM)
            assert proc.poll() is None and time.time() < deadline
            time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        err = proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and "stopped watching" in err, err
    assert watch_stats(paths)["running"] is False
    assert not (paths.db.parent / "rag.db-wal").exists()  # its connection closed on the way out


def _watch_runs_done(paths) -> bool:
    if not (paths.dagster_home / "dagster.yaml").exists():
        return False
    try:
        instance = dg.DagsterInstance.from_config(str(paths.dagster_home))
    except Exception:  # noqa: BLE001 - the watcher is still creating the instance's tables
        return False
    try:
        runs = instance.get_runs(filters=dg.RunsFilter(tags={"local_rag/trigger": "watch"},
                                                       statuses=[dg.DagsterRunStatus.SUCCESS]))
        return bool(runs)
    finally:
        instance.dispose()


def _failed(paths) -> list:
    from rag_search.store import reads

    store = resources.RagResource().store()
    return reads.failures(store, collection="notes") if store.embedder else []


def _watch_runs(paths) -> int:
    instance = dg.DagsterInstance.get()
    return len(instance.get_runs(filters=dg.RunsFilter(tags={"local_rag/trigger": "watch"})))


def test_a_failed_item_is_not_retried_in_a_loop_only_when_it_changes(tmp_path, monkeypatch):
    """Re-reading a failed file raised "opened"/"closed_no_write" events that the watcher took for changes, and
    a watcher sync retried every failed item it was told of: 25 red runs in two minutes with no edit."""
    paths, vault = make_home(tmp_path, monkeypatch)
    broken = vault / "Archive" / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4 not really")
    (vault / "Archive" / "empty.docx").write_bytes(b"")
    stop, messages = threading.Event(), []
    thread = threading.Thread(target=watch_collections, args=(paths, ["notes"], 0.3, messages.append, stop), daemon=True)
    thread.start()
    try:
        deadline = time.time() + 120
        while len(_failed(paths)) < 2:  # the catch-up run recorded both (the instance exists: ask it now)
            assert time.time() < deadline, messages
            time.sleep(0.2)
        time.sleep(2)
        settled = _watch_runs(paths)
        time.sleep(6)  # 20 debounce periods with no edit
        assert _watch_runs(paths) == settled, messages
        broken.write_bytes(b"%PDF-1.4 still not a PDF, but changed")  # a change is retried, once
        deadline = time.time() + 60
        while _watch_runs(paths) == settled:
            assert time.time() < deadline, messages
            time.sleep(0.2)
        time.sleep(4)
        assert _watch_runs(paths) == settled + 1, messages
    finally:
        stop.set()
        thread.join(timeout=30)
        resources.close_all()


def test_sigterm_during_a_run_stops_the_watcher_without_a_traceback(tmp_path, monkeypatch):
    """Dagster turns a signal inside a run into DagsterExecutionInterruptedError (not KeyboardInterrupt): the
    watcher printed a 60-line traceback instead of saying it stopped."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    paths, vault = make_home(tmp_path, monkeypatch)
    for i in range(150):  # enough for the catch-up run to last a few seconds
        (vault / f"extra-{i}.md").write_text(f"# Extra {i}\n\n" + "Words about rivers and birds. " * 40)
    exe = str(Path(sys.executable).with_name("local-rag"))
    proc = subprocess.Popen([exe, "watch", "--debounce", "0.5"], env={**os.environ}, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while not _run_started(paths):
            assert proc.poll() is None and time.time() < deadline
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        err = proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "stopped watching" in err and "Traceback" not in err, err
    assert proc.returncode == 0


def test_ctrl_c_during_a_run_prints_one_line_and_leaves_no_process(tmp_path, monkeypatch):
    """A terminal's Ctrl-C signals the whole process group: Dagster's log-mirroring helpers (two `tail -F` and two
    watch_orphans.py) got it too and printed two KeyboardInterrupt tracebacks under the watcher's line."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    paths, vault = make_home(tmp_path, monkeypatch)
    for i in range(150):  # enough for the catch-up run to last a few seconds
        (vault / f"extra-{i}.md").write_text(f"# Extra {i}\n\n" + "Words about rivers and birds. " * 40)
    exe = str(Path(sys.executable).with_name("local-rag"))
    proc = subprocess.Popen([exe, "watch", "--debounce", "0.5"], env={**os.environ}, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # a group of its own, as a terminal's foreground job
    try:
        deadline = time.time() + 120
        while "watch_orphans" not in _group_commands(proc.pid):  # a run is capturing its logs
            assert proc.poll() is None and time.time() < deadline
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGINT)
        err = proc.communicate(timeout=60)[1]
        deadline = time.time() + 10
        while _group_commands(proc.pid) and time.time() < deadline:
            time.sleep(0.2)
        assert _group_commands(proc.pid) == ""  # the helpers were stopped with the run
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    lines = err.splitlines()
    assert lines[-1].startswith("stopped watching") and lines[0].startswith("watching"), err
    assert len(lines) == 2 and "Traceback" not in err, err
    assert proc.returncode == 0


def _group_commands(pgid: int) -> str:
    import subprocess

    return subprocess.run(["ps", "-ww", "-o", "cmd=", "-g", str(pgid)], capture_output=True, text=True).stdout.strip()


def _run_started(paths) -> bool:
    if not (paths.dagster_home / "dagster.yaml").exists() or not (paths.dagster_home / "storage").exists():
        return False
    try:
        instance = dg.DagsterInstance.from_config(str(paths.dagster_home))
    except Exception:  # noqa: BLE001 - the instance is still being created by the watcher
        return False
    try:
        return bool(instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED])))
    finally:
        instance.dispose()


def test_a_signal_dagster_loses_in_a_finalizer_still_stops_the_watcher():
    """Dagster's run-time handler raises; raised inside a finalizer the exception is dropped ("Exception ignored")
    and the signal was lost: the watcher ran on after SIGTERM. The wakeup pipe still sees it."""
    import os
    import signal

    from dagster._core.errors import DagsterExecutionInterruptedError

    from rag_pipelines.indexing.stop_signals import stop_on_signals

    def dagsters_handler(*_):
        raise DagsterExecutionInterruptedError()

    class Finalized:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGTERM)
            sum(range(100_000))  # the handler runs here; its exception cannot leave a finalizer

    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, dagsters_handler)
    try:
        with stop_on_signals(stop):
            Finalized()
            assert stop.wait(5)
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_the_watcher_follows_config_edits_and_ragignore_files(tmp_path, monkeypatch):
    """Without a restart: a broken edit of config.yaml keeps what is watched and says why (also in watch-stats); a
    collection added to it is indexed and its folder watched; a .ragignore written there re-plans it."""
    import yaml

    paths, vault = make_home(tmp_path, monkeypatch)
    papers = tmp_path / "papers"
    papers.mkdir()
    (papers / "wal.md").write_text("Write-ahead logging lets readers proceed while one writer appends.\n")
    stop, messages = threading.Event(), []
    thread = threading.Thread(target=watch_collections, args=(paths, None, 0.3, messages.append, stop), daemon=True)
    thread.start()
    engine = None
    try:
        _wait(lambda: any(m.startswith("watching") for m in messages), messages)
        good = paths.config.read_text()  # edits are taken in after the catch-up run, however long it takes
        paths.config.write_text(good + "search: {top_k: many}\n")
        _wait(lambda: "config_error" in watch_stats(paths), messages)
        assert "search.top_k" in watch_stats(paths)["config_error"] and any("stays in use" in m for m in messages)
        config = yaml.safe_load(good)
        config["collections"]["papers"] = {"sources": [{"type": "project", "paths": [str(papers)]}]}
        paths.config.write_text(yaml.safe_dump(config))
        engine = SearchEngine(resources.RagResource().store(), None)

        def found(word: str) -> set[str]:
            return {h.key for h in engine.search(SearchRequest(word, mode="keyword")).hits if h.collection == "papers"}

        _wait(lambda: found("readers") == {"wal.md"}, messages)  # the new collection was synced...
        assert "config_error" not in watch_stats(paths) and str(papers) in watch_stats(paths)["watching"]
        (papers / "birds.md").write_text("A kingfisher by the river.\n")
        _wait(lambda: found("kingfisher") == {"birds.md"}, messages)  # ...and its folder is watched
        (papers / ".ragignore").write_text("wal.md\n")
        _wait(lambda: found("readers") == set(), messages)  # a .ragignore re-plans: wal.md left the index
        assert found("kingfisher") == {"birds.md"}
    finally:
        stop.set()
        thread.join(timeout=30)
        resources.close_all()


def _wait(condition, messages, seconds: float = 120) -> None:
    deadline = time.time() + seconds
    while not condition():
        assert time.time() < deadline, messages
        time.sleep(0.2)
