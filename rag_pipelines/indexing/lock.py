"""One indexing run per collection at a time, across processes: `local-rag index`, the watcher, MCP's `rag_index`
and runs the Dagster daemon or UI launch all take the collection's lock before they write its items.

The lock is an advisory `flock` on `<folder of rag.db>/locks/<collection>.lock`, held for the whole run and
released by the kernel when its process ends (a killed run never leaves it behind). The file names who holds
it, so a second run can say whom it waits for, and whether the run before it finished (`finished`, written when
a run ends without an error: a killed or failed run leaves its record without it). Within one process the lock is
re-entrant for the thread that holds it (the CLI takes it, then the in-process Dagster run it starts takes it
again); other threads wait.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from rag_search.errors import RagError

_guard = threading.Lock()
_threads: dict[str, threading.RLock] = {}  # lock file → this process's lock on it
_files: dict[str, tuple[object, int]] = {}  # lock file → (open file, depth) while this process holds it


class CollectionBusy(RagError):
    """Another process is indexing this collection now (raised only when the caller would rather not wait)."""

    def __init__(self, message: str, collection: str = "", holder: str = ""):
        super().__init__(message)
        self.collection, self.holder = collection, holder


def lock_path(db: Path, collection: str) -> Path:
    from rag_pipelines.config import safe_name

    return db.parent / "locks" / f"{safe_name(collection)}.lock"


@contextmanager
def collection_lock(db: Path, collection: str, trigger: str, *, wait: bool = True,
                    on_wait: Callable[[str], None] | None = None, finishes: bool = True) -> Iterator[dict]:
    """Hold the collection's indexing lock; yields the record of the run that held it before (`finished` set when
    that run ended without an error). Busy elsewhere: wait (telling `on_wait` who holds it), or raise
    CollectionBusy when `wait` is false. `finishes=False`: a hold that indexes nothing leaves no `finished` mark."""
    path = lock_path(db, collection)
    with _guard:
        local = _threads.setdefault(str(path), threading.RLock())
    if not local.acquire(blocking=False):
        _busy(path, collection, wait, on_wait, _other_holder(path))
        local.acquire()
    try:
        held = _files.get(str(path))
        if held is None:
            held = (*_take(path, collection, trigger, wait, on_wait), 0)
        _files[str(path)] = (held[0], held[1], held[2] + 1)
        completed = False
        try:
            yield held[1]
            completed = True
        finally:
            fh, before, depth = _files[str(path)]
            if depth == 1:
                del _files[str(path)]
                _release(fh, completed and finishes)
            else:
                _files[str(path)] = (fh, before, depth - 1)
    finally:
        local.release()


def _release(fh, completed: bool) -> None:
    """Close the lock file (which releases the flock), first marking the run finished if it ended without an error."""
    try:
        if completed:
            fh.seek(0)
            record = json.loads(fh.read() or "{}")
            fh.seek(0)
            fh.truncate()
            fh.write(json.dumps({**record, "finished": time.time()}))
            fh.flush()
    except (OSError, ValueError):
        pass  # the mark only spares a waiting server a rescan
    finally:
        fh.close()


def _take(path: Path, collection: str, trigger: str, wait: bool, on_wait) -> tuple[object, dict]:
    """Open and flock the lock file; (the open file, the record of the run before) once it is ours."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(path, "a+", encoding="utf-8")
    try:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _busy(path, collection, wait, on_wait, holder(path))
            fcntl.flock(fh, fcntl.LOCK_EX)
        fh.seek(0)
        before = _record(fh.read())
        fh.seek(0)
        fh.truncate()
        fh.write(json.dumps({"pid": os.getpid(), "trigger": trigger, "since": time.strftime("%H:%M:%S")}))
        fh.flush()
    except BaseException:
        fh.close()
        raise
    return fh, before


def _record(text: str) -> dict:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _other_holder(path: Path) -> str:
    """Who holds the lock when another thread of this process has it: maybe waiting for another process."""
    try:
        pid = _record(path.read_text(encoding="utf-8")).get("pid")
    except OSError:
        pid = None
    return holder(path) if pid not in (None, os.getpid()) else "another task of this process"


def holder(path: Path) -> str:
    """Who holds the lock, as its file says: `pid 812 (cli, since 14:02:11)`."""
    try:
        info = _record(path.read_text(encoding="utf-8"))
    except OSError:
        info = {}
    if not info:
        return "another process"
    return f"pid {info.get('pid')} ({info.get('trigger')}, since {info.get('since')})"


def _busy(path: Path, collection: str, wait: bool, on_wait, who: str) -> None:
    if not wait:
        raise CollectionBusy(f"Collection '{collection}' is being indexed now by {who}; what it has indexed so far "
                             "is already searchable. Try again when it has finished.", collection, who)
    if on_wait:
        on_wait(f"{collection}: waiting for {who}, which is indexing it now (one run per collection at a time)")
