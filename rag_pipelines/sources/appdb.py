"""Reading another app's SQLite database without ever writing it or blocking the app.

Rules (../shared/reference/sources.md §0): open `mode=ro` through a URI (never `immutable=1` on a live
file: it ignores the WAL), retry with backoff while the app holds a lock, keep read transactions
short, select only columns that exist (schemas drift), read base tables only (never the app's views,
triggers or FTS tables, which may need the app's own functions). `snapshot()` copies a consistent
image through SQLite's backup API into a private temp file for long reads.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

from rag_pipelines.sources.base import SourceUnavailable

BUSY_MS = 2_000  # per attempt
RETRIES = (0.2, 0.5, 1.0, 2.0, 4.0)  # backoff between attempts: ~18 s in all, then the source is skipped


def uri(path: Path) -> str:
    from urllib.parse import quote

    return f"file:{quote(str(Path(path).resolve()))}?mode=ro"


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(uri(path), uri=True, timeout=BUSY_MS / 1000, isolation_level=None,
                           check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
    conn.execute("PRAGMA query_only = 1")
    return conn


def _why(path: Path, exc: Exception, app: str) -> str:
    text = str(exc)
    if "locked" in text or "busy" in text:
        return (f"{path} stayed locked by {app} ({text}); nothing indexed from it was removed. It is tried again on "
                "the next run; if it stays locked, quit the app while indexing.")
    if "readonly" in text or "unable to open" in text:
        return (f"{path} cannot be opened read-only ({text}); check the path exists and is readable"
                f"{' (macOS: give the terminal Full Disk Access)' if 'Library' in str(path) else ''}.")
    return f"{path} is not a readable SQLite database ({text}); check it is {app}'s file, not a copy being written."


def _closed_wal(path: Path) -> bool:
    """A WAL-mode database that no process has open (no -wal, no -shm): opening it would create files."""
    try:
        with path.open("rb") as fh:
            header = fh.read(20)
    except OSError:
        return False
    # SQLite removes both files when the last connection closes; an EXCLUSIVE-mode writer has a -wal, no -shm
    in_use = Path(f"{path}-wal").exists() or Path(f"{path}-shm").exists()
    return header[:16] == b"SQLite format 3\x00" and header[18] == 2 and not in_use


@contextmanager
def open_ro(path: Path, app: str, required: Sequence[str] = ()) -> Iterator[sqlite3.Connection]:
    """A read-only connection to a live app database; SourceUnavailable when it cannot be read now.

    A WAL database that the app does not have open (no -shm beside it) is read from a private copy,
    so not even empty -wal/-shm files appear next to the app's data.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise SourceUnavailable(f"{path} does not exist; check the path in the config (is {app} installed and "
                                "has it run once?). Nothing indexed from it was removed.")
    if _closed_wal(path):
        with tempfile.TemporaryDirectory(prefix="local-rag-copy-") as tmp:
            copy = Path(tmp) / path.name
            import shutil

            shutil.copyfile(path, copy)
            with _open_ro(copy, app, required, shown=path) as conn:
                yield conn
        return
    with _open_ro(path, app, required, shown=path) as conn:
        yield conn


@contextmanager
def _open_ro(path: Path, app: str, required: Sequence[str], shown: Path) -> Iterator[sqlite3.Connection]:
    conn, tables, last = None, set(), None
    for pause in (0.0,) + RETRIES:
        time.sleep(pause)
        try:
            conn = _connect(path)
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            break
        except sqlite3.DatabaseError as exc:  # OperationalError (locked, busy, cannot open) included
            if conn is not None:
                conn.close()
            conn, last = None, exc
            if "locked" not in str(exc) and "busy" not in str(exc):
                break
    if conn is None:
        raise SourceUnavailable(_why(shown, last, app)) from last
    missing = [t for t in required if t not in tables]
    if missing:
        conn.close()
        raise SourceUnavailable(f"{shown} has no table {', '.join(missing)}: not {app}'s database, or a version "
                                "local-rag does not know. Nothing indexed from it was removed; please report the "
                                "app version.")
    try:
        yield conn
    finally:
        conn.close()


def query(conn: sqlite3.Connection, sql: str, params: Sequence = ()) -> list[tuple]:
    """Run a read with retries on a transient lock (a checkpoint, an app's exclusive moment)."""
    for pause in RETRIES + (None,):
        try:
            return conn.execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            if pause is None or ("locked" not in str(exc) and "busy" not in str(exc)):
                raise
            time.sleep(pause)
    return []


def columns(conn: sqlite3.Connection, table: str) -> set[str]:
    """Columns a table has (schemas drift between app versions)."""
    return {r[1] for r in conn.execute(f"PRAGMA table_info('{table}')")}


def pick(cols: set[str], *wanted: str) -> str:
    """A select list of the wanted columns, NULL for the missing ones (same order)."""
    return ", ".join(f'"{c}"' if c in cols else "NULL" for c in wanted)


@contextmanager
def snapshot(path: Path, app: str) -> Iterator[Path]:
    """A consistent private copy (backup API) of a live database, deleted afterwards."""
    with open_ro(path, app) as src:
        fd, tmp = tempfile.mkstemp(prefix="local-rag-snapshot-", suffix=".db")
        os.close(fd)
        try:
            dst = sqlite3.connect(tmp)
            try:
                src.backup(dst)
            finally:
                dst.close()
            yield Path(tmp)
        finally:
            for suffix in ("", "-wal", "-shm", "-journal"):
                try:
                    os.unlink(tmp + suffix)
                except FileNotFoundError:
                    pass
