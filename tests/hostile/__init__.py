"""Hostile inputs for the sources that are not folders of files (mail, calendars, chats): one `Shape` each.

Folder-of-files shapes live in `tests/badinput_corpus.py`; these are the others. Each area module
(`mail.py`, `calendar.py`, ...) lists its shapes in `SHAPES`; `all_shapes()` gathers them. A shape writes
its input under a folder and says how to index it and what the run must end with; `bench/faults.py` runs
each in a fresh home through `local-rag index ... --json` and prints seconds, peak RSS and the outcome.
Tests build the same inputs through `shape.build` so the bench and the tests cannot drift apart.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable


@dataclass(frozen=True)
class Shape:
    name: str                                 # short, unique: "ics-secondly-unbounded"
    what: str                                 # one line: what is hostile about it
    build: Callable[[Path], list[str]]        # writes the input under a folder; returns the args after `local-rag index`
    expect: dict[str, int] = field(default_factory=dict)  # outcomes the summary must show, e.g. {"indexed": 3, "failed": 1}
    limit_s: float = 60.0                     # slower than this is a defect (the bound), as is ~1 GB RSS


def all_shapes() -> list[Shape]:
    shapes: list[Shape] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        shapes += getattr(importlib.import_module(f"{__name__}.{info.name}"), "SHAPES", [])
    return shapes
