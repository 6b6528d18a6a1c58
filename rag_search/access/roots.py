"""Path policy: which folders an AI assistant may add as a new collection (through the MCP `rag_index` tool).

A new root must resolve (symlinks included) to a folder under the user's home or under a configured
`mcp.allowed_roots` entry, and never be the home folder itself, a system folder, a hidden folder
(~/.ssh, ~/.aws, ~/.config, ...) or the local-rag home. The user can always index anything from a terminal.
`refusal` is the same policy for a folder an assistant added earlier, checked again wherever it leads now
(mcp/guard.py).
"""

from __future__ import annotations

import sys
from pathlib import Path, PurePath

from rag_search.errors import RootRefused

SYSTEM_FOLDERS = (
    "/etc", "/usr", "/bin", "/sbin", "/var", "/proc", "/sys", "/dev", "/boot", "/root", "/opt", "/run",
    "/snap", "/private", "/System", "/Library", "/Applications", "/cores",
    "C:/Windows", "C:/Program Files", "C:/Program Files (x86)", "C:/ProgramData",
)


def check_new_root(path: str | Path, allowed_roots: list[str] | tuple[str, ...] = (), *,
                   rag_home: Path | None = None, config: Path | None = None) -> Path:
    """The resolved folder `path`, or RootRefused saying why and what the user can do instead."""
    given = Path(path).expanduser()
    if not given.is_absolute():
        raise RootRefused(f"'{path}' is not an absolute path. Give the full path of a folder, e.g. ~/Notes/Project.")
    folder = given.resolve()
    why = refusal(folder, allowed_roots, rag_home=rag_home)
    hint = _hint(config)
    if why == OUTSIDE:
        raise RootRefused(f"{folder} {why}, so it cannot be added from an AI assistant. {hint}")
    if why == WHOLE_HOME:
        raise RootRefused(f"{folder} {why}; pick one of its subfolders (e.g. ~/Notes), or run "
                          "`local-rag index project NAME PATH` yourself in a terminal.")
    if why == RAG_HOME:
        raise RootRefused(f"{folder} {why}; pick a folder of notes or documents instead.")
    if why == SYSTEM:
        raise RootRefused(f"{folder} {why} and is never indexed from an AI assistant. {hint}")
    if why == HIDDEN:
        raise RootRefused(f"{folder} {why}: these hold keys and settings, not notes. {hint}")
    if not folder.is_dir():
        raise RootRefused(f"{folder} is not a folder. Give the absolute path of an existing folder to index.")
    return folder


OUTSIDE = "is outside your home folder"
WHOLE_HOME = "is your whole home folder"
RAG_HOME = "is local-rag's own data folder (its index and settings)"
SYSTEM = "is a system folder"
HIDDEN = "is a hidden folder (its name starts with '.', like ~/.ssh or ~/.config)"


def refusal(folder: Path, allowed_roots: list[str] | tuple[str, ...] = (), *, rag_home: Path | None = None) -> str | None:
    """Why an AI assistant may not index the folder (already resolved), as "is ..."; None when it may.

    Where the folder is, not whether it exists: rag_index checks that on its own, and a collection's folder
    that is gone for now holds nothing from anywhere else."""
    home = Path.home().resolve()
    base = _base(folder, home, [Path(r).expanduser().resolve() for r in allowed_roots])
    if base is None:
        return OUTSIDE
    if folder == home:
        return WHOLE_HOME
    if rag_home is not None and _within(folder, rag_home.expanduser().resolve()):
        return RAG_HOME
    if _system(folder, base):
        return SYSTEM
    if _hidden(folder, base):
        return HIDDEN
    return None


def _hint(config: Path | None) -> str:
    where = f" in {config}" if config else " in the config file"
    return (f"If you really want it indexed, add it to mcp.allowed_roots{where}, or run "
            "`local-rag index project NAME PATH` yourself in a terminal.")


def _base(folder: Path, home: Path, allowed: list[Path]) -> Path | None:
    """The most specific allowed root (or home) that contains the folder; None when there is none."""
    bases = [r for r in allowed if _within(folder, r)] + ([home] if _within(folder, home) else [])
    return max(bases, key=lambda p: len(p.parts), default=None)


def _system(folder: Path, base: Path) -> bool:
    """True when the folder is (in) a system folder that the user did not allow explicitly (home or a root in it)."""
    if len(folder.parts) <= 1:
        return True  # / or C:\
    systems = [Path(s) for s in SYSTEM_FOLDERS]
    if _fold(folder.parts[1]).startswith("lib"):  # /lib, /lib64, /libexec, ...
        systems.append(Path(folder.parts[0], folder.parts[1]))
    return any(_within(folder, s) and not _within(base, s) for s in systems)


def _hidden(folder: Path, base: Path) -> bool:
    return any(part.startswith(".") for part in folder.parts[len(base.parts):])


def _within(path: PurePath, root: PurePath) -> bool:
    """path == root or path is inside root (case-insensitively where the file system usually is)."""
    p, r = [_fold(part) for part in path.parts], [_fold(part) for part in root.parts]
    return p[:len(r)] == r


def _fold(text: str) -> str:
    return text.casefold() if sys.platform in ("darwin", "win32") else text
