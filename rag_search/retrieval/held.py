"""What a long-running server holds in RAM beside the index (the sign bits, the common words' rows): each is valid
for one index state and read again in a background thread while searches go to SQLite."""

from __future__ import annotations

import threading
import time
from typing import Any


class HeldInRam:
    """The index state a holding was read at, and its background (re)read. Subclasses define _load(stamp), which
    sets what is held and its _stamp (under the store's lock, if nothing was written meanwhile) and finally clears
    _loading, and ready(stamp)."""

    thread_name = "held-in-ram"

    def __init__(self, store: Any):
        self.store = store
        self._stamp: tuple[int, int] | None = None
        self._loading = False
        self._lock = threading.Lock()

    def stamp(self) -> tuple[int, int]:
        """Changes whenever the index does: commits by other connections, and the index connection's own writes."""
        conn = self.store.conn
        return conn.execute("PRAGMA data_version").fetchone()[0], conn.total_changes

    def ready(self, stamp: tuple[int, int] | None = None) -> bool:
        raise NotImplementedError

    def _start(self, stamp: tuple[int, int]) -> None:
        """Reads it again in the background (once at a time)."""
        with self._lock:
            if not self._loading:
                self._loading = True
                threading.Thread(target=self._load, args=(stamp,), name=self.thread_name, daemon=True).start()

    def _load(self, stamp: tuple[int, int]) -> None:
        raise NotImplementedError

    def wait(self, timeout: float = 600.0) -> bool:
        """Block until what is held is current (benchmarks, tests)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.store.lock:
                if self.ready():
                    return True
            time.sleep(0.05)
        return False


def words_held(tables: dict[str, Any], per_row: str) -> str:
    """A held words' tables as a line (bench output): words and rows per table, and the bytes. Each table has
    `words` (word -> (positions, counts)), `ids` and the per-row array named `per_row`."""
    parts = [f"{name}: {len(t.words)} words, {sum(len(p) for p, _ in t.words.values()):,} rows"
             for name, t in tables.items()]
    nbytes = sum(p.nbytes + c.nbytes for t in tables.values() for p, c in t.words.values()) + \
        sum(t.ids.nbytes + getattr(t, per_row).nbytes for t in tables.values())
    return "; ".join(parts) + f"; {nbytes / 2**20:.0f} MB"
