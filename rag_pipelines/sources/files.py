"""Scanning a collection's roots: which files exist, with size, mtime and their partition key.

os.scandir walk that prunes excluded folders before entering them, follows symlinked folders once
(cycles are cut), and never reads file contents (hashing happens only for candidates).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from rag_pipelines.config import CollectionConfig, SourceConfig, compile_capture
from rag_pipelines.sources.globs import GlobSet
from rag_pipelines.sources.keys import path_key


@dataclass(frozen=True)
class FileEntry:
    key: str
    path: Path
    relpath: str
    size: int
    mtime_ns: int
    source_index: int  # which of the collection's sources it came from

    @property
    def suffix(self) -> str:
        return self.path.suffix.lower().lstrip(".")


def root_labels(cfg: CollectionConfig) -> list[tuple[int, Path, str | None]]:
    """(source index, root, label) per root; labels only when the collection has several roots."""
    roots = [(i, p) for i, src in enumerate(cfg.sources) for p in src.paths]
    if len(roots) == 1:
        return [(roots[0][0], roots[0][1], None)]
    labels, out = set(), []
    for i, root in roots:
        label, n = root.name or "root", 2
        while label in labels:
            label, n = f"{root.name}-{n}", n + 1
        labels.add(label)
        out.append((i, root, label))
    return out


def scan_collection(cfg: CollectionConfig) -> dict[str, FileEntry]:
    found: dict[str, FileEntry] = {}
    for index, root, label in root_labels(cfg):
        src = cfg.sources[index]
        globs = GlobSet(src.include, src.excludes)
        for rel, st in _walk(root, globs):
            key = path_key(rel, label)
            found[key] = FileEntry(key, root / rel, rel, st.st_size, st.st_mtime_ns, index)
    return found


def _walk(root: Path, globs: GlobSet) -> Iterator[tuple[str, os.stat_result]]:
    if not root.is_dir():
        return
    seen_dirs = {_dir_id(root)}
    stack = [(root, "")]
    while stack:
        folder, rel_folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue  # unreadable folder: skipped, the rest goes on
        for entry in entries:
            rel = f"{rel_folder}{entry.name}"
            try:
                if entry.is_dir():
                    if globs.skips_folder(rel):
                        continue
                    ident = _dir_id(Path(entry.path))
                    if ident not in seen_dirs:
                        seen_dirs.add(ident)
                        stack.append((Path(entry.path), rel + "/"))
                elif entry.is_file() and globs.wants_file(rel):
                    yield rel, entry.stat()
            except OSError:
                continue


def _dir_id(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_dev, st.st_ino


def captured_metadata(src: SourceConfig, relpath: str) -> dict[str, str]:
    """Static metadata plus named captures of the source's path patterns that match this path."""
    meta: dict = dict(src.metadata)
    for cap in src.captures:
        m = compile_capture(cap.pattern).match(relpath)
        if m:
            meta.update({k: v for k, v in m.groupdict().items() if v is not None})
    return meta


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
