"""Per-item progress from inside Dagster runs to whoever listens (the CLI's progress bar, the watcher)."""

from __future__ import annotations

from typing import Callable

Listener = Callable[[str, str], None]
_listeners: list[Listener] = []


def listen(fn: Listener) -> None:
    _listeners.append(fn)


def unlisten(fn: Listener) -> None:
    if fn in _listeners:
        _listeners.remove(fn)


def notify(key: str, outcome: str) -> None:
    for fn in list(_listeners):
        fn(key, outcome)
