"""Opening rag.db: a SQLite driver that can load extensions, sqlite-vec loaded, WAL, sane pragmas."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import ModuleType
from typing import Any

from rag_search.errors import ExtensionError, StoreError

BUSY_TIMEOUT_MS = 30_000

_FIX = (
    "Install a SQLite driver that can load extensions: `pip install sqlean.py sqlite-vec` "
    "(the stdlib sqlite3 of many Python builds, including macOS system Python, cannot). "
    "Then run `local-rag doctor`."
)


def sqlite_driver() -> ModuleType:
    """sqlean.py (sqlite3 with extension loading) or, failing that, a stdlib sqlite3 that can load them."""
    try:
        return importlib.import_module("sqlean")
    except ImportError:
        pass
    import sqlite3

    if hasattr(sqlite3.Connection, "enable_load_extension"):
        return sqlite3
    raise ExtensionError(f"No SQLite driver here can load the sqlite-vec extension. {_FIX}")


# SQLite's memory per connection: page cache and memory map, in MiB. Searching rereads the same pages of a
# large index, so they stay in the process; an indexing run mostly appends, and both would grow with the
# index (a 50k-note run reached 450 MB RSS), so it keeps a small cache and leaves rereads to the OS.
SEARCH_MEMORY = (64, 256)
INDEXING_MEMORY = (16, 0)


def connect(path: Path | str, *, readonly: bool = False, memory: tuple[int, int] = SEARCH_MEMORY) -> Any:
    """A connection with sqlite-vec loaded, WAL journal, foreign keys on; transactions are explicit."""
    driver = sqlite_driver()
    target = str(path)
    if target != ":memory:":
        p = Path(target)
        if readonly:
            if not p.exists():
                raise StoreError(f"No index at {p}. Index something first: `local-rag index ...`.")
            target = f"file:{p.resolve().as_posix()}?mode=ro"
        else:
            _create_private(p)
    try:
        conn = driver.connect(
            target, uri=readonly, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False, isolation_level=None
        )
    except driver.Error as exc:
        raise StoreError(f"Cannot open the index at {path}: {exc}. Check the path and its permissions.") from exc
    _load_vec(conn)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys = ON")
    if not readonly and target != ":memory:":
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA temp_store = MEMORY")
    cache_mib, mmap_mib = memory
    conn.execute(f"PRAGMA cache_size = -{cache_mib * 1024}")  # negative: KiB
    conn.execute(f"PRAGMA mmap_size = {mmap_mib * 1024 * 1024}")
    return conn


def _create_private(db: Path) -> None:
    """A new index readable by its owner only: its folder 0700, the file 0600 before SQLite opens it (its -wal and
    -shm files take the database file's permissions)."""
    from rag_search.file_updates import private_folder

    private_folder(db.parent)
    try:
        os.close(os.open(db, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass
    except OSError as exc:
        raise StoreError(f"Cannot create the index {db} ({exc.strerror or exc}). Check the folder's permissions, or "
                         "set LOCAL_RAG_HOME (or LOCAL_RAG_DB) to a place you can write.") from exc


def _load_vec(conn: Any) -> None:
    try:
        import sqlite_vec
    except ImportError as exc:
        raise ExtensionError(f"The sqlite-vec package is not installed. {_FIX}") from exc
    try:
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.enable_load_extension(False)
    except Exception as exc:  # driver-specific error types
        raise ExtensionError(f"sqlite-vec failed to load into SQLite: {exc}. {_FIX}") from exc


def versions(conn: Any) -> tuple[str, str]:
    """(SQLite version, sqlite-vec version) of a connection."""
    return conn.execute("SELECT sqlite_version(), vec_version()").fetchone()
