"""The status view: collections (indexed, and configured ones not indexed yet) with counts and last index time, failed
items with their reasons, each collection's running or last Dagster run (linked into the Dagster UI where the
visitor's browser can reach it: server.dagster_url, or the local UI for a browser on this machine), and "index now".

"Index now" runs what MCP's rag_index runs (mcp_index.index: the collection's lock, so one run per collection,
and the same Dagster pipelines), in a thread of this process; the page shows it running and then its outcome.
Dagster is imported only when this view asks for runs, never on the search path.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from rag_search.collection_config import declared
from rag_search.config import dagster_runs_possible, load_settings, mask_password
from rag_search.errors import RagError
from rag_search.store import reads
from rag_search.web.backend import Backend

DAGSTER_UI = "http://127.0.0.1:3000"  # where `local-rag ui` serves the Dagster UI
FAILURES_SHOWN = 100


@dataclass
class IndexJob:
    collection: str
    started: float
    finished: float | None = None
    outcome: str | None = None  # the counts, when it ended well
    error: str | None = None

    @property
    def running(self) -> bool:
        return self.finished is None


class IndexJobs:
    """"Index now" runs started from the page, one at a time per collection (the collection lock enforces it
    across processes; this only keeps the page from starting a second thread that would just wait)."""

    def __init__(self, run: Callable[[str], dict]):
        self._run, self._jobs, self._guard = run, {}, threading.Lock()

    def start(self, collection: str) -> IndexJob:
        with self._guard:
            job = self._jobs.get(collection)
            if job is not None and job.running:
                return job
            job = self._jobs[collection] = IndexJob(collection, time.time())
        threading.Thread(target=self._work, args=(job,), name=f"index-{collection}", daemon=True).start()
        return job

    def _work(self, job: IndexJob) -> None:
        try:
            r = self._run(job.collection)
            job.outcome = (f"{r['indexed']} indexed, {r['skipped']} unchanged, {r['failed']} failed, "
                           f"{r['deleted']} deleted")
        except RagError as exc:
            job.error = str(exc)
        except Exception as exc:  # noqa: BLE001 - shown on the page; the server goes on
            job.error = f"Indexing stopped: {type(exc).__name__}: {exc}. Run `local-rag index {job.collection}` " \
                        "in a terminal to see the whole error."
        finally:
            job.finished = time.time()

    def all(self) -> dict[str, IndexJob]:
        return dict(self._jobs)


def mcp_index_run(backend: Backend) -> Callable[[str], dict]:
    """rag_index's own path (mcp_index.index): the same checks, lock and pipelines."""
    def run(collection: str) -> dict:
        from rag_search.mcp import index as mcp_index

        return mcp_index.index(backend.paths, collection, None)

    return run


def status(backend: Backend, allowed: frozenset[str] | None, dagster_ui: str | None) -> dict[str, Any]:
    """The view's figures; `dagster_ui` None: runs without links (the visitor cannot reach the UI)."""
    def seen(name: str) -> bool:
        return allowed is None or name in allowed

    with backend.store.lock:
        collections = [c.to_dict() for c in reads.list_collections(backend.store) if seen(c.name)]
        failures = [f.to_dict() for f in reads.failures(backend.store, limit=FAILURES_SHOWN) if seen(f.collection)]
    indexed = {c["name"] for c in collections}
    collections += [{"name": n, "kind": "configured", "description": "not indexed yet", "items": 0, "indexed": 0,
                     "failed": 0, "chunks": 0, "last_indexed": None} for n in configured(backend) if seen(n)
                    and n not in indexed]
    runs, runs_note = last_runs(backend, [c["name"] for c in collections])
    if allowed is not None and runs_note:  # where the server keeps its files is the owner's business
        runs_note = runs_note.split(" (")[0] + "."
    for c in collections:
        run = runs.get(c["name"])
        c["run"] = run and {**run, "url": f"{dagster_ui.rstrip('/')}/runs/{run['run_id']}" if dagster_ui else None}
    return {"collections": collections, "failures": failures, "runs_note": runs_note, "dagster_ui": dagster_ui}


def configured(backend: Backend) -> list[str]:
    """The collections of the config file and registry (so one never indexed can be indexed from here)."""
    try:
        return sorted(declared(backend.paths))
    except RagError:
        return []  # a config being edited: the indexed collections still show


def last_runs(backend: Backend, names: list[str]) -> tuple[dict[str, dict], str | None]:
    """Each collection's newest Dagster run (running or ended), read through the Dagster instance config.yaml names
    (SQLite at DAGSTER_HOME, or PostgreSQL)."""
    if not names:
        return {}, None
    try:
        settings = load_settings(backend.paths.config).dagster
        if not dagster_runs_possible(backend.paths, settings):
            return {}, f"No Dagster runs yet (the instance at {backend.paths.dagster_home} is empty)."
        import dagster as dg

        from rag_pipelines.indexing.health import COLLECTION_TAG
        from rag_pipelines.wiring.instance import ensure_instance

        ensure_instance(backend.paths, settings)
        with dg.DagsterInstance.get() as instance:
            runs = {name: _run(instance, dg, COLLECTION_TAG, name) for name in names}
            if any(runs.values()) or instance.get_run_records(limit=1):
                return runs, None
        where = mask_password(settings.storage) if settings.on_postgres else str(backend.paths.dagster_home)
        return runs, f"No Dagster runs yet (the instance at {where} is empty)."
    except Exception as exc:  # noqa: BLE001 - the rest of the status view still shows
        return {}, f"The Dagster runs could not be read ({type(exc).__name__}: {exc}); see them with `local-rag ui`."


def _run(instance, dg, tag: str, name: str) -> dict | None:
    records = instance.get_run_records(filters=dg.RunsFilter(tags={tag: name}), limit=1)
    if not records:
        return None
    r = records[0]
    run = r.dagster_run
    return {"run_id": run.run_id, "status": run.status.value, "job": run.job_name,
            "started": _clock(r.start_time or r.create_timestamp.timestamp()),
            "ended": _clock(r.end_time) if r.end_time else None, "trigger": run.tags.get("local_rag/trigger")}


def _clock(ts: float | None) -> str | None:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else None
