"""Files several processes rewrite: each change is a read-modify-write under an exclusive lock, written to a
temporary file beside the target and renamed into place, so no reader sees half a file and no writer loses another's
change.

Writers: registry.yaml (`local-rag index`, the MCP `rag_index` tool), config.yaml's `users:` (`local-rag users`),
the records of what AI assistants and users added (mcp-collections.json, users-collections.json). Two
`local-rag index project NEW` at once used to rewrite registry.yaml from what each had read, and one collection was
lost. The lock is a separate file (`.NAME.lock`), so the target itself can be replaced while it is held.

`private_folder` makes the folders these files live in (the local-rag home first of all) readable by their owner
only (0700): the home holds keys' hashes, sessions, queries and the index; new files in it are 0600.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from rag_search.errors import ConfigError


def private_folder(folder: Path) -> Path:
    """`folder`, made (with its missing parents) readable by its owner only when it does not exist yet; a folder
    that cannot be made is a ConfigError saying what to do (never a traceback)."""
    if folder.is_dir():
        return folder
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise ConfigError(f"Cannot create the folder {folder} ({exc.strerror or exc}). Create it yourself, or point "
                          "LOCAL_RAG_HOME at a folder you can write.") from exc
    return folder


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the exclusive lock of `path` (waits for another process's change to finish)."""
    private_folder(path.parent)
    fd = os.open(path.parent / f".{path.name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def update(path: Path, change: Callable[[str | None], str], mode: int | None = None) -> str:
    """Replace the text of `path` by change(its text, or None when it does not exist yet), under its lock.

    `mode`: the file's permissions after the change; by default an existing file keeps its own and a new one is 0600
    (only its owner reads it). Returns the text written."""
    with locked(path):
        try:
            old = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            old = None
        new = change(old)
        write_atomic(path, new, mode)
        return new


def write_atomic(path: Path, text: str, mode: int | None = None) -> None:
    """Write `text` to a temporary file beside `path`, flush it to disk, and rename it over `path`."""
    if mode is None:
        try:
            mode = path.stat().st_mode & 0o777
        except FileNotFoundError:
            mode = 0o600
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def stamp(file: Path) -> tuple | None:
    """What changes when the file is replaced or edited (mtime, size, inode), or None when it does not exist: a
    reader keeps what it parsed until the stamp moves."""
    try:
        st = file.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino
