"""Counting what one search does (tests/test_query_work.py): never a timer, so a regression shows under any load.

- statements: the SQL statements the engine runs on the index's connection (SQLite's trace callback);
- internal: the statements SQLite runs inside those (FTS5 reads a doclist page, one row's size per row it scores;
  vec0 reads its blocks): the rows read, as the engine cannot see them;
- steps: thousands of SQLite VM instructions (the progress handler), all statements included;
- embeds: query embeddings; reloads: re-reads of the sign bits or common words in RAM started; writes: rows the search changed
  on the index's connection (total_changes, TEMP tables included: there must be none).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

STEP = 1000  # VM instructions per progress callback


@dataclass
class Work:
    statements: list[str] = field(default_factory=list)
    internal: int = 0
    steps: int = 0
    embeds: int = 0
    reloads: int = 0
    writes: int = 0

    def figures(self) -> dict[str, int]:
        return {"statements": len(self.statements), "internal": self.internal, "steps": self.steps,
                "embeds": self.embeds, "reloads": self.reloads, "writes": self.writes}

    def add(self, other: Work) -> None:
        self.statements += other.statements
        for name in ("internal", "steps", "embeds", "reloads", "writes"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


@contextmanager
def counting(engine) -> Iterator[Work]:
    """Counts the work of whatever runs inside on the engine's store, embedder and bit matrix."""
    conn, work = engine.store.conn, Work()

    def trace(sql: str) -> None:
        if sql.startswith("--"):  # a statement SQLite runs inside one of ours (a virtual table's, a trigger's)
            work.internal += 1
        else:
            work.statements.append(sql)

    def step() -> int:
        work.steps += 1
        return 0

    changes = conn.total_changes
    second = getattr(engine, "second", None)
    conns = [conn] + ([second.connection] if second is not None and second.connection is not None else [])
    for c in conns:  # the index's connection, and a server's second one (retrieval/parallel.py)
        c.set_trace_callback(trace)
        c.set_progress_handler(step, STEP)
    undo = [_wrap(engine.embedder, "embed_query", work, "embeds")]
    for held in (engine.bit_matrix, getattr(engine, "common_words", None)):  # what a server holds in RAM
        if held is not None:
            undo.append(_wrap(held, "_load", work, "reloads"))
    try:
        yield work
    finally:
        for c in conns:
            c.set_trace_callback(None)
            c.set_progress_handler(None, STEP)
        for restore in undo:
            restore()
        work.writes = conn.total_changes - changes


def _wrap(obj, name: str, work: Work, counter: str):
    """Counts calls of obj.name (as an instance attribute); returns what removes the wrapper."""
    original = getattr(obj, name)

    def counted(*args, **kwargs):
        setattr(work, counter, getattr(work, counter) + 1)
        return original(*args, **kwargs)

    setattr(obj, name, counted)
    return lambda: delattr(obj, name)
