"""Near-real-time indexing: watchdog events, debounced, synced through the same Dagster jobs.

File sources map a changed path to its item key; other sources (a mail store, a feed database) name
the files they live in, and a change there syncs the whole collection. Only events that can change a
file count (created, modified, moved, deleted, closed after writing): reading a file raises "opened"
and "closed_no_write" events, and indexing reads files, so counting those made every run start the next.
A failed item is retried when its stamp changes (or by `local-rag index` and the nightly rescan), not
each time an event names it. `stats()` reports what the watcher saw (the `ingestion://watch-stats` resource).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Callable

from rag_search.config import WATCH_STATS, Paths
from rag_search.records import iso_utc

from rag_pipelines.config import load_collections
from rag_pipelines.indexing.runs import index_collections
from rag_pipelines.indexing.scan import open_sources

WHOLE = "*"  # pending marker: sync the whole collection
READS = frozenset({"opened", "closed_no_write"})  # events of a file being read: indexing raises them itself
_stats: dict = {}
_stats_file: list[Path] = []


def stats() -> dict:
    """What the running watcher has seen: events, debounce, last event, last sync (empty when not running)."""
    return dict(_stats)


def _save_stats() -> None:
    """Written beside rag.db so other processes (the MCP server's ingestion://watch-stats) can read it."""
    if _stats_file:
        tmp = _stats_file[0].with_suffix(".tmp")
        tmp.write_text(json.dumps(_stats), encoding="utf-8")
        tmp.replace(_stats_file[0])


class _Pending:
    def __init__(self):
        self.lock = threading.Lock()
        self.keys: dict[str, set[str]] = {}
        self.last = 0.0

    def add(self, collection: str, key: str) -> None:
        with self.lock:
            self.keys.setdefault(collection, set()).add(key)
            self.last = time.monotonic()
            _stats["events"] = _stats.get("events", 0) + 1
            _stats["last_event"] = iso_utc(int(time.time()))

    def take_if_quiet(self, debounce: float) -> dict[str, list[str]]:
        with self.lock:
            if not self.keys or time.monotonic() - self.last < debounce:
                return {}
            out, self.keys = {k: sorted(v) for k, v in self.keys.items()}, {}
            return out


def _targets(collections) -> list[tuple[str, object, Path]]:
    """(collection, source, watched path) for every source that names paths to watch."""
    out = []
    for name, cfg in collections.items():
        for src in open_sources(cfg):
            out += [(name, src, Path(p)) for p in src.watch_paths()]
    return out


def _hit(path: Path, targets) -> tuple[str, str] | None:
    for name, src, watched in targets:
        if path == watched or watched in path.parents:
            key_for = getattr(src, "key_for_path", None)
            if key_for is None:
                return name, WHOLE
            key = key_for(path)
            if key:
                return name, key
    return None


def watch_collections(paths: Paths, names: list[str] | None, debounce: float = 2.0,
                      echo: Callable[[str], None] = print, stop: threading.Event | None = None) -> None:
    from watchdog.events import FileSystemEventHandler
    from watchdog.observers import Observer

    chosen = {n: c for n, c in load_collections(paths).items() if names is None or n in names}
    targets = _targets(chosen)
    pending = _Pending()
    _stats.clear()
    _stats.update(pid=os.getpid(), started=iso_utc(int(time.time())), collections=sorted(chosen), events=0,
                  debounce_seconds=debounce, watching=sorted({str(t[2]) for t in targets}), syncs=0)
    _stats_file[:] = [paths.home / WATCH_STATS]
    paths.home.mkdir(parents=True, exist_ok=True)
    _save_stats()

    class Handler(FileSystemEventHandler):
        def on_any_event(self, event):
            if event.is_directory or event.event_type in READS:
                return
            for p in filter(None, [getattr(event, "src_path", None), getattr(event, "dest_path", None)]):
                hit = _hit(Path(p), targets)
                if hit:
                    pending.add(*hit)

    observer = Observer()
    for folder in sorted({t[2] if t[2].is_dir() else t[2].parent for t in targets}):
        observer.schedule(Handler(), str(folder), recursive=True)
    observer.start()
    echo(f"watching {len(targets)} location(s) of {', '.join(chosen) or 'nothing'}; changes are indexed "
         f"{debounce:g}s after the last save")
    stop = stop or threading.Event()
    try:
        index_collections(paths, list(chosen), trigger="watch", on_wait=echo)  # catch up on what changed meanwhile
        while not stop.is_set():
            stop.wait(0.2)
            batch = pending.take_if_quiet(debounce)
            if batch:
                keys = {n: ks for n, ks in batch.items() if WHOLE not in ks}
                for s in index_collections(paths, list(batch), keys=keys, trigger="watch", retry_failed=False,
                                           on_wait=echo):
                    echo(s.line())
                _stats.update(syncs=_stats["syncs"] + 1, last_sync=iso_utc(int(time.time())),
                              last_batch={n: len(k) for n, k in batch.items()})
                _save_stats()
    finally:
        observer.stop()
        observer.join()
        _stats.update(stopped=iso_utc(int(time.time())))
        _save_stats()
        _stats.clear()
        _stats_file.clear()
