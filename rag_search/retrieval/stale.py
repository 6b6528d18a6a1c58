"""Stale-result marks: whether a hit's source changed or disappeared since its item was indexed, checked cheaply.

One keyed read of the hits' item rows, then at most one stat() per item; no source is opened or read. What is
checked depends on what the index recorded about the item:

- items read from one file (notes, documents, code files, books with a file; size and mtime recorded, or a
  size:mtime stamp): the file is stat'ed: gone -> "deleted" (deleted, or moved/renamed away), another size or
  modification time -> "changed" (a touched but unchanged file counts as changed until the next index run);
- a Superwhisper recording: its folder's meta.json, the same way;
- a calendar event: the calendar file it came from is gone -> "deleted" (an edit inside the file is not checked:
  the file holds many events);
- items of app databases and mail archives (eM Client, Apple Mail/mbox, iMessage, Slack, NetNewsWire, git
  commits, a Calibre book without a file): not checked (no mark); re-index to refresh them.

A file that is gone counts as deleted only where its source can be seen: the configured folder of its collection
that holds it (or, for a collection config.yaml does not name, the file's own folder) must exist and hold something.
Otherwise this process cannot check (a search server without the sources mounted, an unmounted disk): "unchecked",
never "deleted". A path that cannot be stat'ed for another reason (permissions) gets no mark.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from typing import TYPE_CHECKING

from rag_search.records import Hit

if TYPE_CHECKING:
    from rag_search.store import Store

CHANGED = "changed"
DELETED = "deleted"
UNCHECKED = "unchecked"  # its file is not there, nor the source folder it came from: this process cannot see it
MARKS = (CHANGED, DELETED, UNCHECKED)
# source types whose item lives in a file other than its uri: the file under the uri that is stat'ed
STAT_INSIDE = {"recording": "meta.json"}
# items that are one of many in their uri's file: only its disappearance is checked
CONTAINER_TYPES = ("event",)
_FILE_STAMP = re.compile(r"(\d+):(\d+)(?::fresh)?(?:~\S*)?")  # ~p2, ~ocr-...: the parser's version, the OCR settings


def stale_marks(store: Store, item_ids: list[int], roots: SourceRoots | None = None) -> dict[int, str]:
    """item id -> "changed", "deleted" or "unchecked", for the items among these whose source no longer matches the
    index (or cannot be seen from here). `roots`: the collections' source folders (default: config.yaml's, read only
    when a file is missing)."""
    if not item_ids:
        return {}
    with store.lock:
        rows = store.conn.execute(
            "SELECT i.id, i.uri, i.source_type, i.size, i.mtime_ns, i.stamp, co.name FROM items i "
            "JOIN collections co ON co.id = i.collection_id WHERE i.id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(dict.fromkeys(item_ids))),)).fetchall()
    roots = roots or SourceRoots()
    marks = {}
    for item_id, uri, source_type, size, mtime_ns, stamp, collection in rows:
        size, mtime_ns = file_stamp(stamp) or (size, mtime_ns)
        mark = file_mark(uri, source_type, size, mtime_ns)
        if mark == DELETED and not roots.visible(collection, uri):
            mark = UNCHECKED
        if mark:
            marks[item_id] = mark
    return marks


class SourceRoots:
    """Whether this process sees the source a file came from: the deepest configured source folder of its collection
    holding the file exists and is not empty (an empty one is a mount point with nothing mounted); a file under no
    configured folder needs its own folder to exist. Read from config.yaml and registry.yaml at the first question."""

    def __init__(self, folders: dict[str, list[str]] | None = None):
        self._folders, self._seen = folders, {}

    def visible(self, collection: str, uri: str) -> bool:
        root = self._root(collection, uri)
        if root not in self._seen:
            self._seen[root] = _holds_something(root) if root else False
        return self._seen[root] if root else os.path.isdir(os.path.dirname(uri))

    def _root(self, collection: str, uri: str) -> str | None:
        folders = self.folders().get(collection, [])
        inside = [f for f in folders if uri == f or uri.startswith(f.rstrip(os.sep) + os.sep)]
        return max(inside, key=len) if inside else None

    def folders(self) -> dict[str, list[str]]:
        if self._folders is None:
            from rag_search.collection_config import declared, source_paths
            from rag_search.errors import RagError

            try:
                self._folders = {name: source_paths(entry) for name, entry in declared(with_disabled=True).items()}
            except RagError:  # a config being edited: each file's own folder decides
                self._folders = {}
        return self._folders


def _holds_something(folder: str) -> bool:
    try:
        with os.scandir(folder) as entries:
            return next(entries, None) is not None
    except OSError:
        return False


def file_stamp(stamp: str | None) -> tuple[int, int] | None:
    """(size, mtime_ns) of a file's change stamp ("size:mtime_ns", then what read it: "~p2", "~ocr-..."; a recording's
    may end in ":fresh"), the newest the index holds: a run that finds a touched file unchanged records its new
    stamp, not its size and mtime."""
    m = _FILE_STAMP.fullmatch(stamp or "")
    return (int(m[1]), int(m[2])) if m else None


def file_mark(uri: str, source_type: str, size: int | None, mtime_ns: int | None) -> str | None:
    """The mark of one item read from a file (None: unchanged, or not checkable from what the index holds)."""
    recorded = size is not None and mtime_ns is not None
    if not os.path.isabs(uri) or not (recorded or source_type in CONTAINER_TYPES):
        return None
    path = os.path.join(uri, STAT_INSIDE[source_type]) if source_type in STAT_INSIDE else uri
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return DELETED
    except (OSError, ValueError):  # no permission, a disk not mounted, a NUL in a stored name: unknown
        return None
    if recorded and source_type not in CONTAINER_TYPES and (st.st_size, st.st_mtime_ns) != (size, mtime_ns):
        return CHANGED
    return None


def mark_hits(store: Store, hits: list[Hit]) -> list[Hit]:
    """The hits, each with its stale mark (Hit.stale) when its source changed or disappeared since indexing, or cannot
    be seen from here."""
    marks = stale_marks(store, [h.item_id for h in hits])
    return [replace(h, stale=marks[h.item_id]) if h.item_id in marks else h for h in hits]


def stale_note(hits: list[Hit]) -> str | None:
    """One sentence for an assistant when some hits are stale or unchecked: what it means and what to do."""
    changed = sum(h.stale == CHANGED for h in hits)
    deleted = sum(h.stale == DELETED for h in hits)
    unchecked = sum(h.stale == UNCHECKED for h in hits)
    notes = []
    if changed or deleted:
        parts = [f"{changed} hit(s) changed" if changed else "",
                 f"{deleted} hit(s) deleted or moved" if deleted else ""]
        notes.append(f"{' and '.join(p for p in parts if p)} since indexed (stale: ...): their text is what was "
                     "indexed, not what is there now; do not quote a deleted one as current. Re-index the collection "
                     "to refresh them.")
    if unchecked:
        notes.append(f"{unchecked} hit(s) could not be checked (stale: unchecked): this server cannot see the folder "
                     "they were indexed from, so whether they changed since is unknown.")
    return " ".join(notes) or None
