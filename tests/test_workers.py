"""`dagster.workers`: one run's items indexed by several worker processes (rag_pipelines/indexing/workers.py), on
rag.db and on the PostgreSQL store; a worker killed mid-run loses nothing written and its items are retried."""

from __future__ import annotations

import os
import re
import signal
import threading
import time

import dagster as dg
import psutil
import pytest
from pipeline_env import use_home

from rag_pipelines.indexing import progress
from rag_pipelines.indexing.runs import index_collections
from rag_pipelines.indexing.workers import deal
from rag_pipelines.wiring import resources
from rag_pipelines.wiring.assets import items_key
from rag_search.config import Paths
from rag_search.store import open_store, reads

WORDS = ("river mountain coffee compiler kernel garden piano violin history ocean lantern meadow copper harbour "
         "orchard glacier tundra canyon").split()


def make_home(tmp_path, monkeypatch, notes: int, workers: int, store: str | None = None) -> Paths:
    folder = tmp_path / "notes"
    folder.mkdir()
    for i in range(notes):
        body = " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(120))
        (folder / f"n{i:03}.md").write_text(f"# Note {i}\n\nMarker zq{i:03}x sits here. {body}\n")
    config = {"dagster": {"workers": workers},
              "collections": {"notes": {"sources": [{"type": "project", "paths": [str(folder)]}]}}}
    if store:
        config["store"] = store
    return use_home(tmp_path / "home", config, monkeypatch)


def worker_lines(run_ids: list[str]) -> list[str]:
    instance = dg.DagsterInstance.get()
    try:
        return [e.user_message for r in run_ids for e in instance.all_logs(r)
                if re.match(r"worker \d \(pid \d+\)", e.user_message or "")]
    finally:
        instance.dispose()


def worker_processes() -> list[psutil.Process]:
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "spawn_main" in " ".join(child.cmdline()):
                found.append(child)
        except psutil.Error:  # a child that ended meanwhile
            pass
    return found


def materialised(name: str) -> set[str]:
    instance = dg.DagsterInstance.get()
    try:
        return set(instance.get_materialized_partitions(items_key(name)))
    finally:
        instance.dispose()


def check_index(paths: Paths, location, notes: int, workers: int) -> None:
    [summary] = index_collections(paths)
    assert summary.outcomes == {"indexed": notes}, summary.line()
    lines = worker_lines(summary.run_ids)
    pids = {int(re.search(r"pid (\d+)", line).group(1)) for line in lines}
    assert len(lines) == workers and len(pids) == workers and os.getpid() not in pids, lines
    assert materialised("notes") == {f"n{i:03}.md" for i in range(notes)}
    with open_store(location) as store:
        states = reads.item_states(store, "notes")
        assert len(states) == notes and {s.status for s in states.values()} == {"indexed"}
        chunks = store.conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        assert chunks >= notes
    [again] = index_collections(paths)  # nothing changed: nothing is re-read, whatever the workers
    assert again.outcomes == {} and again.unchanged == notes


def test_keys_are_dealt_in_blocks_of_neighbours():
    keys = [f"k{i:02}" for i in range(20)]
    shares = deal(keys, 2)
    assert shares[0] == keys[0:8] + keys[16:20] and shares[1] == keys[8:16]
    assert deal(keys[:3], 4) == [keys[:3]]  # no empty shares


def test_two_worker_processes_index_a_run_on_rag_db(tmp_path, monkeypatch):
    paths = make_home(tmp_path, monkeypatch, notes=110, workers=2)
    try:
        check_index(paths, paths.db, 110, workers=2)
        from rag_search.retrieval import SearchRequest
        from rag_search.retrieval import search_engine

        with open_store(paths.db) as store:
            hits = search_engine(store, None).search(SearchRequest(query="zq057x", top_k=3, mode="keyword")).hits
            assert hits[0].key == "n057.md"
    finally:
        resources.close_all()


@pytest.mark.postgres
def test_two_worker_processes_write_the_postgresql_store_at_once(tmp_path, monkeypatch, postgres_url):
    from postgres_server import fresh_database

    url = fresh_database(postgres_url, "t_workers")
    paths = make_home(tmp_path, monkeypatch, notes=110, workers=2, store=url)
    try:
        check_index(paths, url, 110, workers=2)
        assert not paths.db.exists()
    finally:
        resources.close_all()


def test_a_killed_worker_loses_nothing_written_and_its_items_are_retried(tmp_path, monkeypatch):
    paths = make_home(tmp_path, monkeypatch, notes=160, workers=2)
    heard, killed = threading.Event(), []

    def first_item(key: str, outcome: str) -> None:
        heard.set()

    def kill_one_worker() -> None:  # once the first item is written, while both workers have more to do
        heard.wait(120)
        workers = [p for p in worker_processes() if p.is_running()]
        if workers:
            killed.append(workers[-1].pid)
            os.kill(workers[-1].pid, signal.SIGKILL)

    progress.listen(first_item)
    killer = threading.Thread(target=kill_one_worker, daemon=True)
    killer.start()
    try:
        [summary] = index_collections(paths)
        killer.join(5)
        assert killed, "no worker process was found to kill"
        failed, indexed = summary.outcomes.get("failed", 0), summary.outcomes.get("indexed", 0)
        assert failed > 0 and indexed > 0 and failed + indexed == 160, summary.line()
        assert all("worker process ended (exit code -9)" in f["message"] for f in summary.failures), summary.failures
        with open_store(paths.db) as store:
            states = reads.item_states(store, "notes")
            assert sum(s.status == "indexed" for s in states.values()) == indexed
        time.sleep(0.1)
        [retry] = index_collections(paths)  # the failed items are retried; the indexed ones are left alone
        assert retry.outcomes == {"indexed": failed}, retry.line()
        assert materialised("notes") == {f"n{i:03}.md" for i in range(160)}
    finally:
        progress.unlisten(first_item)
        resources.close_all()
