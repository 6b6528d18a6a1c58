"""The mail files under a gmail source's path: which are mbox files, and which are failed items (and why).

`path` is a file → that file, whatever its name. `path` is a folder → the files below it (hidden files and folders
skipped, linked folders followed once, sorted by path):

    *.mbox                        always (Takeout, mail clients' exports): one that is no mbox is a failed item;
    *.txt, files without suffix   when they start with an envelope line: a mailing list's archive as Mailman
                                  serves it (`2010-December.txt`), mutt's and Thunderbird's mail folders;
    *.mbox.gz, *.txt.gz           a failed item that says how to unpack it, unless the unpacked file is beside it
                                  (compressed archives are not read: the table of contents needs offsets);
    a folder that cannot be listed, a .txt that cannot be read: a failed item.

Failed items are keyed `file:<path relative to the source's path>` (as the calendar source does). Only `path`
itself missing or unreadable, or holding no mail file at all, makes the source unavailable.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from rag_pipelines.sources.mbox import envelope as mbox_envelope
from rag_pipelines.sources.base import SourceUnavailable
from rag_search.keys import path_key

SNIFFED = (".txt", "")  # mail only when the file starts with an envelope line
PACKED = (".mbox.gz", ".txt.gz")
SNIFF_BYTES = 2048


@dataclass
class Listing:
    files: list[Path] = field(default_factory=list)  # mbox files to read
    problems: dict[str, tuple[str, str]] = field(default_factory=dict)  # `file:<rel>` → (kind, message)


def list_files(path: Path) -> Listing:
    """The mbox files of `path` and the failed items found while listing it; SourceUnavailable when there is none."""
    try:
        if path.is_file():
            return Listing([path])
        if not path.is_dir():
            raise SourceUnavailable(f"{path} does not exist; check the path in the config (unpacked the Takeout "
                                    "archive?). Nothing indexed from it was removed.")
        os.listdir(path)
    except OSError as exc:
        raise SourceUnavailable(f"{path} cannot be read ({exc.strerror or exc}); check its permissions (macOS: Full "
                                "Disk Access). Nothing indexed from it was removed.") from exc
    out = Listing()
    _walk(path, out)
    out.files.sort()  # by path, as a copy of a message in two files is loaded from the first
    if not out.files and not out.problems:
        raise SourceUnavailable(f"{path} holds no mail file (.mbox, or a mailing list archive .txt); point `path` at "
                                "Takeout's Mail folder or an .mbox file. Nothing indexed from it was removed.")
    return out


def problem_key(root: Path, path: Path) -> str:
    """`file:<path relative to the source's path>` (the file's name when the source's path is the file)."""
    rel = path.name if path == root else os.path.relpath(path, root)
    return f"file:{path_key(rel)}"


def _walk(root: Path, out: Listing) -> None:
    seen: set[tuple[int, int]] = set()
    for folder, dirs, names in os.walk(root, onerror=lambda exc: _unlisted(root, exc, out), followlinks=True):
        try:
            st = os.stat(folder)
        except OSError as exc:
            _unlisted(root, exc, out)
            continue
        if (st.st_dev, st.st_ino) in seen:  # a linked folder met twice (or a link loop): once is enough
            dirs[:] = []
            continue
        seen.add((st.st_dev, st.st_ino))
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(n for n in names if not n.startswith(".")):
            _add(root, Path(folder) / name, out)


def _add(root: Path, file: Path, out: Listing) -> None:
    name = file.name.lower()
    if name.endswith(PACKED):
        if not file.with_name(file.name[:-3]).exists():
            out.problems[problem_key(root, file)] = ("unsupported", (
                f"{file} is compressed; unpack it beside itself (`gunzip -k '{file}'`): the unpacked file is indexed "
                "on the next run"))
        return
    suffix = file.suffix.lower()
    if suffix == ".mbox":
        if file.is_file():  # not a pipe or a dangling link
            out.files.append(file)
    elif suffix in SNIFFED:
        try:
            if starts_with_envelope(file):
                out.files.append(file)
        except OSError as exc:
            out.problems[problem_key(root, file)] = ("unreadable", (
                f"cannot read {file} ({exc.strerror or exc}) to tell whether it is a mail archive; check its "
                "permissions, or move it out of the folder"))


def starts_with_envelope(file: Path) -> bool:
    """Whether the file's first line (after blank lines) is an mbox envelope line."""
    if not file.is_file():
        return False
    with open(file, "rb") as fh:
        head = fh.read(SNIFF_BYTES).lstrip(b"\r\n")
    return mbox_envelope.parse(head.split(b"\n", 1)[0]) is not None


def _unlisted(root: Path, exc: OSError, out: Listing) -> None:
    where = Path(exc.filename) if exc.filename else root
    out.problems[problem_key(root, where)] = ("unreadable", (
        f"cannot list the folder {where} ({exc.strerror or exc}); check its permissions (macOS: Full Disk Access)"))
