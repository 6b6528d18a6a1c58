"""Near-real-time indexing: watchdog events, debounced, synced through the same Dagster jobs."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Callable

from rag_search.config import Paths

from rag_pipelines.config import load_collections
from rag_pipelines.runs import index_collections
from rag_pipelines.sources.files import root_labels
from rag_pipelines.sources.globs import GlobSet
from rag_pipelines.sources.keys import path_key


class _Pending:
    def __init__(self):
        self.lock = threading.Lock()
        self.keys: dict[str, set[str]] = {}
        self.last = 0.0

    def add(self, collection: str, key: str) -> None:
        with self.lock:
            self.keys.setdefault(collection, set()).add(key)
            self.last = time.monotonic()

    def take_if_quiet(self, debounce: float) -> dict[str, list[str]]:
        with self.lock:
            if not self.keys or time.monotonic() - self.last < debounce:
                return {}
            out, self.keys = {k: sorted(v) for k, v in self.keys.items()}, {}
            return out


def key_for(path: Path, roots) -> tuple[str, str] | None:
    """(collection, key) of a path under one of the watched roots, if the source wants it."""
    for collection, src, root, label in roots:
        try:
            rel = path.relative_to(root).as_posix()
        except ValueError:
            continue
        if GlobSet(src.include, src.excludes).wants_file(rel) and not any(
            GlobSet((), src.excludes).skips_folder(str(Path(rel).parents[i]))
            for i in range(len(Path(rel).parents) - 1)
        ):
            return collection, path_key(rel, label)
    return None


def watch_collections(paths: Paths, names: list[str] | None, debounce: float = 2.0,
                      echo: Callable[[str], None] = print, stop: threading.Event | None = None) -> None:
    from watchdog.events import FileSystemEventHandler
    from watchdog.observers import Observer

    collections = load_collections(paths)
    chosen = {n: c for n, c in collections.items() if names is None or n in names}
    roots = [(n, c.sources[i], root, label) for n, c in chosen.items() for i, root, label in root_labels(c)]
    pending = _Pending()

    class Handler(FileSystemEventHandler):
        def on_any_event(self, event):
            if event.is_directory:
                return
            for p in filter(None, [getattr(event, "src_path", None), getattr(event, "dest_path", None)]):
                hit = key_for(Path(p), roots)
                if hit:
                    pending.add(*hit)

    observer = Observer()
    for _, _, root, _ in roots:
        observer.schedule(Handler(), str(root), recursive=True)
    observer.start()
    echo(f"watching {len(roots)} folder(s) of {', '.join(chosen) or 'nothing'}; changes are indexed "
         f"{debounce:g}s after the last save")
    stop = stop or threading.Event()
    try:
        index_collections(paths, list(chosen), trigger="watch")  # catch up on what changed while not watching
        while not stop.is_set():
            stop.wait(0.2)
            batch = pending.take_if_quiet(debounce)
            if batch:
                for s in index_collections(paths, list(batch), keys=batch, trigger="watch"):
                    echo(s.line())
    finally:
        observer.stop()
        observer.join()
