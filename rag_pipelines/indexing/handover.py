"""A run asked for while another process indexes the collection: answered at once, and taken over if that run dies.

Several MCP servers can run on one home (Claude Desktop and Claude Code each start their own `local-rag serve`).
Indexing stays one run per collection across them (lock.py): the server that takes a collection's lock indexes it,
and a server asked to index it meanwhile says at once who does. It also leaves one waiter thread per collection
behind, blocked on the lock: when the lock comes free it runs the sync, unless the run it waited for finished after
it was asked (the lock file's `finished` mark) - so the work of an indexer that was killed or crashed is taken
over, and a finished one is not repeated.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from rag_search.config import Paths

from rag_pipelines.indexing import runs  # runs.index_collections: tests stand in for it there
from rag_pipelines.indexing.lock import CollectionBusy, collection_lock
from rag_pipelines.indexing.runs import RunSummary

log = logging.getLogger("local_rag")
_waiters: dict[tuple[str, str], threading.Thread] = {}
_guard = threading.Lock()


def index_or_hand_over(paths: Paths, name: str, trigger: str = "mcp",
                       check: Callable[[], None] | None = None) -> RunSummary:
    """Sync collection `name` now, or raise CollectionBusy naming who does and take over if that run dies (after
    `check`, which raises when the collection may no longer be indexed)."""
    try:
        [summary] = runs.index_collections(paths, [name], trigger=trigger, wait=False)
    except CollectionBusy as exc:
        wait_in_background(paths, name, trigger, time.time(), check)
        raise CollectionBusy(
            f"Collection '{name}' is being indexed now by {exc.holder}; what it has indexed so far is already "
            "searchable. If that run stops before it has finished, this process indexes the rest; call again "
            "later for the counts.", name, exc.holder) from exc
    return summary


def wait_in_background(paths: Paths, name: str, trigger: str, asked: float,
                       check: Callable[[], None] | None = None) -> None:
    """Start (once per collection) the thread that waits for the lock and takes over an unfinished run."""
    key = (str(paths.db), name)
    with _guard:
        if key not in _waiters or not _waiters[key].is_alive():
            _waiters[key] = threading.Thread(target=_take_over, args=(paths, name, trigger, asked, check),
                                             name=f"take-over-{name}", daemon=True)
            _waiters[key].start()


def _take_over(paths: Paths, name: str, trigger: str, asked: float, check: Callable[[], None] | None) -> None:
    try:
        # The lock is let go before indexing: index_collections takes it again as the instance needs (on PostgreSQL
        # each run takes Dagster's pool slot first, then the lock).
        with collection_lock(paths.db, name, f"{trigger}, taking over", wait=True, finishes=False) as before:
            pass
        if before.get("finished", 0) >= asked:
            return  # the run that was busy finished after we were asked: nothing is left to do
        log.warning("%s: the run of %s stopped before it finished; this process (%s) indexes the collection now",
                    name, _who(before), trigger)
        if check is not None:
            check()
        [summary] = runs.index_collections(paths, [name], trigger=trigger)
        log.warning("%s", summary.line())
    except Exception as exc:  # noqa: BLE001 - a background thread: say why in the log, never die silently
        log.warning("%s: taking over its indexing failed (%s: %s); run `local-rag index %s` in a terminal.",
                    name, type(exc).__name__, exc, name)


def _who(record: dict) -> str:
    return f"pid {record['pid']}" if record.get("pid") else "another process"
