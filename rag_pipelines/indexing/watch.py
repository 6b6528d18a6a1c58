"""Near-real-time indexing: watchdog events, debounced, synced through the same Dagster jobs.

File sources map a changed path to its item key; other sources (a mail store, a feed database) name
the files they live in, and a change there syncs the whole collection. Only events that can change a
file count (created, modified, moved, deleted, closed after writing): reading a file raises "opened"
and "closed_no_write" events, and indexing reads files, so counting those made every run start the next.
A failed item is retried when its stamp changes (or by `local-rag index` and the nightly rescan), not
each time an event names it. A .ragignore that changes re-plans its whole collection. Edits of config.yaml and
registry.yaml are followed while it runs (_Watching). `stats()` reports what the watcher saw (the
`ingestion://watch-stats` resource).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Callable

from rag_search.config import WATCH_STATS, FileWatch, Paths
from rag_search.errors import RagError
from rag_search.file_updates import private_folder
from rag_search.records import iso_utc

from rag_pipelines.config import load_collections, registry_path
from rag_pipelines.indexing.runs import index_collections
from rag_pipelines.indexing.scan import open_sources

WHOLE = "*"  # pending marker: sync the whole collection
READS = frozenset({"opened", "closed_no_write"})  # events of a file being read: indexing raises them itself
CONFIG_LOOK_SECONDS = 1.0  # how often the config files' stamps are looked at (a stat each)
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
            replans = getattr(src, "replans", None)
            if replans is not None and replans(path):
                return name, WHOLE  # e.g. a .ragignore: what the source holds may change anywhere below it
            key_for = getattr(src, "key_for_path", None)
            if key_for is None:
                return name, WHOLE
            key = key_for(path)
            if key:
                return name, key
    return None


def _chosen(paths: Paths, names: list[str] | None) -> dict:
    return {n: c for n, c in load_collections(paths).items() if names is None or n in names}


class _Watching:
    """The collections watched now, their sources' paths, and the observer's watch of each folder; follows
    config.yaml and registry.yaml (looked at once a second): new or changed collections are synced and watched,
    removed ones no longer watched; an edit with an error keeps what is watched and says why."""

    def __init__(self, paths: Paths, names: list[str] | None, observer, handler, echo):
        self.paths, self.names, self.observer, self.handler, self.echo = paths, names, observer, handler, echo
        self.files = FileWatch([paths.config, registry_path(paths)])
        self.collections = _chosen(paths, names)
        self.targets: list[tuple[str, object, Path]] = []
        self.watches: dict[Path, object] = {}
        self._update()

    def _update(self) -> None:
        self.targets = _targets(self.collections)
        folders = {t[2] if t[2].is_dir() else t[2].parent for t in self.targets}
        for folder in set(self.watches) - folders:
            self.observer.unschedule(self.watches.pop(folder))
        for folder in sorted(folders - set(self.watches)):
            try:
                self.watches[folder] = self.observer.schedule(self.handler, str(folder), recursive=True)
            except OSError as exc:
                self.echo(f"cannot watch {folder} ({exc.strerror or exc}); its changes are indexed by "
                          "`local-rag index` or the nightly rescan")
        _stats.update(collections=sorted(self.collections), watching=sorted({str(t[2]) for t in self.targets}))

    def follow_config(self) -> list[str]:
        """Take in an edited config: the collections to sync now (new, or configured differently; all of them
        once an edit with an error is fixed, as changes seen meanwhile were not synced)."""
        if not self.files.changed():
            return []
        try:
            new = _chosen(self.paths, self.names)
        except RagError as exc:
            _config_broken(exc, self.echo)
            return []
        fixed = _stats.pop("config_error", None) is not None
        fresh = sorted(n for n, c in new.items() if fixed or self.collections.get(n) != c)
        gone = sorted(set(self.collections) - set(new))
        self.collections = new
        self._update()
        _save_stats()
        if fresh or gone:
            self.echo(f"configuration changed: {', '.join(fresh) or 'nothing'} to sync"
                      + (f"; no longer watching {', '.join(gone)}" if gone else ""))
        return fresh


def watch_collections(paths: Paths, names: list[str] | None, debounce: float = 2.0,
                      echo: Callable[[str], None] = print, stop: threading.Event | None = None) -> None:
    from watchdog.events import FileSystemEventHandler
    from watchdog.observers import Observer

    pending = _Pending()

    class Handler(FileSystemEventHandler):
        def on_any_event(self, event):
            if event.is_directory or event.event_type in READS:
                return
            for p in filter(None, [getattr(event, "src_path", None), getattr(event, "dest_path", None)]):
                hit = _hit(Path(p), watching.targets)
                if hit:
                    pending.add(*hit)

    _stats.clear()
    _stats.update(pid=os.getpid(), started=iso_utc(int(time.time())), events=0, debounce_seconds=debounce, syncs=0)
    _stats_file[:] = [paths.home / WATCH_STATS]
    private_folder(paths.home)
    observer = Observer()
    watching = _Watching(paths, names, observer, Handler(), echo)
    _save_stats()
    observer.start()
    echo(f"watching {len(watching.targets)} location(s) of {', '.join(watching.collections) or 'nothing'}; changes "
         f"are indexed {debounce:g}s after the last save")
    try:
        _loop(paths, watching, pending, debounce, echo, stop or threading.Event())
    finally:
        observer.stop()
        observer.join()
        _stats.update(stopped=iso_utc(int(time.time())))
        _save_stats()
        _stats.clear()
        _stats_file.clear()


def _loop(paths: Paths, watching: _Watching, pending: _Pending, debounce: float, echo, stop: threading.Event) -> None:
    _sync(paths, list(watching.collections), None, echo, quiet=True)  # catch up on what changed meanwhile
    next_look = time.monotonic() + CONFIG_LOOK_SECONDS
    while not stop.is_set():
        stop.wait(0.2)
        if time.monotonic() >= next_look:
            next_look = time.monotonic() + CONFIG_LOOK_SECONDS
            _sync(paths, watching.follow_config(), None, echo)
        if "config_error" in _stats:
            continue  # changes wait for the file to be fixed; then every collection is synced
        batch = {n: ks for n, ks in pending.take_if_quiet(debounce).items() if n in watching.collections}
        if batch:
            _sync(paths, list(batch), {n: ks for n, ks in batch.items() if WHOLE not in ks}, echo)
            _stats.update(syncs=_stats["syncs"] + 1, last_sync=iso_utc(int(time.time())),
                          last_batch={n: len(k) for n, k in batch.items()})
            _save_stats()


def _sync(paths: Paths, names: list[str], keys: dict[str, list[str]] | None, echo, quiet: bool = False) -> None:
    """Index the collections (only `keys` of those named there; a whole sync retries failed items too). An error
    is said and watching goes on; one from a config file edited into an error holds syncs until it is fixed."""
    if not names:
        return
    try:
        for s in index_collections(paths, names, keys=keys, trigger="watch", retry_failed=keys is None, on_wait=echo):
            if not quiet:
                echo(s.line())
    except RagError as exc:
        try:
            load_collections(paths)
        except RagError as broken:
            _config_broken(broken, echo)
        else:
            echo(f"error: {exc}")


def _config_broken(exc: RagError, echo) -> None:
    """An edit left config.yaml or registry.yaml with an error: say so (also in watch-stats); syncs wait for the fix."""
    if _stats.get("config_error") == str(exc):
        return  # said already
    _stats["config_error"] = str(exc)
    _save_stats()
    echo(f"{exc}\n(the configuration loaded before stays in use until the file is fixed; changes saved meanwhile "
         "are indexed then)")
