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

A path that cannot be stat'ed for another reason (permissions, an unmounted disk) gets no mark.
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
MARKS = (CHANGED, DELETED)
# source types whose item lives in a file other than its uri: the file under the uri that is stat'ed
STAT_INSIDE = {"recording": "meta.json"}
# items that are one of many in their uri's file: only its disappearance is checked
CONTAINER_TYPES = ("event",)
_FILE_STAMP = re.compile(r"(\d+):(\d+)(?::fresh)?(?:~\S*)?")  # ~p2, ~ocr-...: the parser's version, the OCR settings


def stale_marks(store: Store, item_ids: list[int]) -> dict[int, str]:
    """item id -> "changed" or "deleted", for the items among these whose source no longer matches the index."""
    if not item_ids:
        return {}
    with store.lock:
        rows = store.conn.execute(
            "SELECT id, uri, source_type, size, mtime_ns, stamp FROM items WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(dict.fromkeys(item_ids))),)).fetchall()
    marks = {}
    for item_id, uri, source_type, size, mtime_ns, stamp in rows:
        size, mtime_ns = file_stamp(stamp) or (size, mtime_ns)
        mark = file_mark(uri, source_type, size, mtime_ns)
        if mark:
            marks[item_id] = mark
    return marks


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
    """The hits, each with its stale mark (Hit.stale) when its source changed or disappeared since indexing."""
    marks = stale_marks(store, [h.item_id for h in hits])
    return [replace(h, stale=marks[h.item_id]) if h.item_id in marks else h for h in hits]


def stale_note(hits: list[Hit]) -> str | None:
    """One sentence for an assistant when some hits are stale: what it means and how to refresh them."""
    changed = sum(h.stale == CHANGED for h in hits)
    deleted = sum(h.stale == DELETED for h in hits)
    if not changed and not deleted:
        return None
    parts = [f"{changed} hit(s) changed" if changed else "", f"{deleted} hit(s) deleted or moved" if deleted else ""]
    return (f"{' and '.join(p for p in parts if p)} since indexed (stale: ...): their text is what was indexed, not "
            "what is there now; do not quote a deleted one as current. Re-index the collection to refresh them.")
