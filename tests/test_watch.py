"""Watch mode: a saved note becomes searchable within seconds, through the same Dagster jobs."""

from __future__ import annotations

import threading
import time

import dagster as dg
from pipeline_env import make_home

from rag_pipelines.watch import watch_collections
from rag_search.mcp_server import watch_stats
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
