"""Dagster's local compute logs, with the helper processes it starts deaf to a terminal's Ctrl-C.

To mirror a run's stdout and stderr into its log files, Dagster starts two `tail -F` processes and, for each,
a Python process (`watch_orphans.py`) that kills the tail if the run's process dies; it stops them with SIGTERM
when the capture ends. They run in the caller's process group, so Ctrl-C on `local-rag watch` or `index`
reached them too and each watcher printed a KeyboardInterrupt traceback (two of them) over the one line the
command says when it stops. Here SIGINT is blocked in the starting thread while they are started: a child
inherits the blocked signal, the caller gets its SIGINT as before (a signal that arrives meanwhile waits, and is
delivered when the block ends, a few milliseconds later).

local-rag's dagster.yaml names this class (`wiring/instance.py`); everything else is Dagster's.
"""

from __future__ import annotations

import os
import signal
from contextlib import ExitStack, contextmanager

from dagster._core.storage.local_compute_log_manager import LocalComputeLogManager as DagsterLocalComputeLogManager


class LocalComputeLogManager(DagsterLocalComputeLogManager):
    """`LocalComputeLogManager` whose tail and watcher processes ignore the terminal's SIGINT."""

    def __init__(self, base_dir: str | None = None, polling_timeout: float | None = None, inst_data=None):
        super().__init__(base_dir or default_base_dir(), polling_timeout, inst_data)

    @classmethod
    def config_type(cls):
        from dagster import Field, Float, StringSource

        return {"base_dir": Field(StringSource, is_required=False,
                                  description="Where the compute logs live (default: $DAGSTER_HOME/storage)."),
                "polling_timeout": Field(Float, is_required=False)}

    @classmethod
    def from_config_value(cls, inst_data, config_value) -> LocalComputeLogManager:
        return cls(inst_data=inst_data, **config_value)

    @contextmanager
    def capture_logs(self, log_key):
        with ExitStack() as stack:
            with sigint_blocked():
                context = stack.enter_context(super().capture_logs(log_key))
            yield context


@contextmanager
def sigint_blocked():
    """SIGINT blocked in this thread within (processes started meanwhile inherit it); pending ones follow after."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def default_base_dir() -> str:
    home = os.environ.get("DAGSTER_HOME")
    if not home:
        raise RuntimeError("LocalComputeLogManager needs DAGSTER_HOME (or a base_dir in dagster.yaml); "
                           "local-rag sets it to <LOCAL_RAG_HOME>/dagster: run it through `local-rag`.")
    return os.path.join(os.path.abspath(os.path.expanduser(home)), "storage")
