"""Progress from inside Dagster runs to whoever listens (the CLI's progress line, the watcher).

Two channels: per item (key, outcome) when an item is done, and per chunk ("queued" when an item's
chunks are ready to embed, "embedded" as the embedder returns vectors, or finds them cached). A
`Tracker` turns them into figures and an ETA (from a moving average of recent chunk rates, none until
there is enough data); a `Reporter` shows them: one redrawn line on a terminal, a plain line every
`LINE_SECONDS` elsewhere (logs, CI, pipes), so a long first index is never silent.
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, TextIO

Listener = Callable[[str, str], None]  # (item key, outcome: indexed|unchanged|failed|deleted)
WorkListener = Callable[[str, int], None]  # ("queued" | "embedded", chunks)
_listeners: list[Listener] = []
_work_listeners: list[WorkListener] = []

LINE_SECONDS = 10.0  # between progress lines when the output is not a terminal
TTY_SECONDS = 0.5  # between redraws of the terminal line
SAMPLE_SECONDS = 1.0  # rate samples are at least this far apart
EWMA_WEIGHT = 0.3  # weight of the newest rate sample
ETA_MIN_SECONDS = 5.0  # no ETA before this much time with chunks coming in ...
ETA_MIN_SAMPLES = 3  # ... and this many rate samples


def listen(fn: Listener) -> None:
    _listeners.append(fn)


def unlisten(fn: Listener) -> None:
    if fn in _listeners:
        _listeners.remove(fn)


def notify(key: str, outcome: str) -> None:
    for fn in list(_listeners):
        fn(key, outcome)


def listen_work(fn: WorkListener) -> None:
    _work_listeners.append(fn)


def unlisten_work(fn: WorkListener) -> None:
    if fn in _work_listeners:
        _work_listeners.remove(fn)


def notify_work(kind: str, chunks: int) -> None:
    for fn in list(_work_listeners):
        fn(kind, chunks)


@dataclass
class Snapshot:
    items_done: int
    items_total: int
    chunks_embedded: int
    chunks_estimate: int | None  # all chunks this run will embed, estimated from the items seen so far
    rate: float | None  # chunks per second (moving average)
    eta: float | None  # seconds left; None until the rate is known
    elapsed: float


@dataclass
class Tracker:
    """Counts items and chunks; estimates the chunks still to come and the time they take."""

    items_total: int
    clock: Callable[[], float] = time.monotonic
    items_done: int = 0
    items_parsed: int = 0  # items whose chunks were queued for embedding
    items_written: int = 0  # of those, written (their outcome arrived)
    chunks_queued: int = 0
    chunks_embedded: int = 0
    rate: float | None = None
    samples: int = 0
    started: float = field(default=0.0)
    _first_chunk_at: float | None = None
    _sample_at: float = 0.0
    _sample_chunks: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.started = self._sample_at = self.clock()

    def item(self, key: str, outcome: str) -> None:
        with self._lock:
            self.items_done += 1
            if outcome == "indexed":
                self.items_written += 1

    def work(self, kind: str, chunks: int) -> None:
        with self._lock:
            if kind == "queued":
                self.items_parsed += 1
                self.chunks_queued += chunks
            elif kind == "embedded":
                if self._first_chunk_at is None:
                    self._first_chunk_at = self._sample_at = self.clock()
                self.chunks_embedded += chunks
                self._sample(self.clock())

    def _sample(self, now: float) -> None:
        if self._first_chunk_at is None or now - self._sample_at < SAMPLE_SECONDS:
            return
        current = (self.chunks_embedded - self._sample_chunks) / (now - self._sample_at)
        self.rate = current if self.rate is None else EWMA_WEIGHT * current + (1 - EWMA_WEIGHT) * self.rate
        self.samples += 1
        self._sample_at, self._sample_chunks = now, self.chunks_embedded

    def estimate(self) -> int | None:
        """Chunks of the whole run: those queued, plus the unseen items at the average so far."""
        seen = self.items_parsed + (self.items_done - self.items_written)  # parsed or done without chunks
        if not seen:
            return None
        unseen = max(self.items_total - self.items_done - (self.items_parsed - self.items_written), 0)
        return self.chunks_queued + round(unseen * self.chunks_queued / seen)

    def snapshot(self) -> Snapshot:
        with self._lock:
            now = self.clock()
            self._sample(now)  # a stall (a slow parser, a busy machine) lowers the rate too
            estimate = self.estimate()
            eta = None
            ready = (self._first_chunk_at is not None and now - self._first_chunk_at >= ETA_MIN_SECONDS
                     and self.samples >= ETA_MIN_SAMPLES and self.rate)
            if ready and estimate is not None:
                eta = max(estimate - self.chunks_embedded, 0) / self.rate
            rate = self.rate
            if self.items_done >= self.items_total:  # done: the average over the run, not a decaying one
                eta = 0.0
                if self._first_chunk_at is not None and now > self._first_chunk_at:
                    rate = self.chunks_embedded / (now - self._first_chunk_at)
            return Snapshot(self.items_done, self.items_total, self.chunks_embedded, estimate, rate, eta,
                            now - self.started)

    @property
    def done(self) -> bool:
        return self.items_done >= self.items_total


def duration(seconds: float) -> str:
    if seconds < 1:
        return "< 1 s"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def describe(s: Snapshot) -> str:
    parts = [f"{s.items_done}/{s.items_total} items"]
    chunks = f"{s.chunks_embedded:,} chunks"
    if s.chunks_estimate and s.items_done < s.items_total:
        chunks = f"{s.chunks_embedded:,}/~{max(s.chunks_estimate, s.chunks_embedded):,} chunks"
    parts.append(chunks)
    if s.rate is not None:
        parts.append(f"{s.rate:.1f} chunks/s")
    if s.items_done >= s.items_total:
        parts.append(f"took {duration(s.elapsed)}")
    else:
        parts.append(f"ETA {duration(s.eta)}" if s.eta is not None else "ETA: measuring")
    return ", ".join(parts)


class Reporter:
    """Shows a Tracker: a redrawn line on a terminal, else a line every LINE_SECONDS; a last line on close."""

    def __init__(self, label: str, total: int, stream: TextIO | None = None, tty: bool | None = None,
                 interval: float | None = None):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.interval = interval if interval is not None else (TTY_SECONDS if self.tty else LINE_SECONDS)
        self.label, self.tracker = label, Tracker(total)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="local-rag-progress", daemon=True)
        self._width = 0

    def __enter__(self) -> "Reporter":
        listen(self.tracker.item)
        listen_work(self.tracker.work)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        unlisten(self.tracker.item)
        unlisten_work(self.tracker.work)
        self._stop.set()
        self._thread.join(timeout=5)
        self._show(final=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            if not self.tracker.done:  # the last line comes once, on close
                self._show()

    def _show(self, final: bool = False) -> None:
        text = f"{self.label}: {describe(self.tracker.snapshot())}"
        if self.tty:
            text = text[: max(shutil.get_terminal_size().columns - 1, 20)]  # a wrapped line cannot be redrawn
            pad = " " * max(self._width - len(text), 0)
            self._width = len(text)
            self.stream.write(f"\r{text}{pad}" + ("\n" if final else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
