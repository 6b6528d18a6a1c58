"""Stop signals Dagster cannot lose: SIGINT/SIGTERM seen through a wakeup pipe, whatever handler is installed.

Dagster points both signals at a handler that raises DagsterExecutionInterruptedError during a run; when the
signal lands while Python runs a finalizer, that exception is "ignored" (printed, then dropped) and the run goes
on. The C-level signal handler also writes the signal's number to the wakeup fd, so a reader thread sees every
signal and sets `stop`: the watcher then stops after the run in progress.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Iterator

STOPPING = frozenset({signal.SIGINT, signal.SIGTERM})


@contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """Within: a SIGINT or SIGTERM sets `stop` (besides what the installed handler does). Main thread only."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    previous = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    reader = threading.Thread(target=_read, args=(read_end, stop), daemon=True, name="stop-signals")
    reader.start()
    hook = sys.unraisablehook
    sys.unraisablehook = _quiet_interrupts(hook)
    try:
        yield
    finally:
        sys.unraisablehook = hook
        signal.set_wakeup_fd(previous)
        os.close(write_end)  # the reader reads end-of-file and returns
        reader.join(timeout=5)
        os.close(read_end)


def _read(fd: int, stop: threading.Event) -> None:
    while data := os.read(fd, 64):
        if STOPPING & set(data):
            stop.set()


def _quiet_interrupts(hook):
    """An interrupt raised inside a finalizer is not an error to print: the reader thread has noted the signal."""
    def unraisable(info):
        if isinstance(info.exc_value, KeyboardInterrupt) or type(info.exc_value).__name__ == \
                "DagsterExecutionInterruptedError":
            return
        hook(info)
    return unraisable
