"""An item's names: what people call it and type when they look for it — its title, its aliases, its file's name,
a book's authors. Stored in `item_names` (one FTS5 row each) and searched as a ranked list of its own
(retrieval/titles.py): in notes a page named for the question is the strongest evidence there is.
"""

from __future__ import annotations

import re
from typing import Any

MAX_NAMES = 16  # rows per item in item_names: rowid = item id * MAX_NAMES + n
MAX_NAME_CHARS = 200  # longer is text, not a name
_EXTENSION = re.compile(r"\.[A-Za-z0-9]{1,8}$")
_HASHED = re.compile(r"~[0-9a-f]{16}$")  # keys shortened with a hash suffix (rag_search.keys)


def item_names(title: str, key: str, source_type: str, metadata: dict[str, Any] | None,
               authors: tuple[str, ...] | list[str] = ()) -> list[tuple[str, str]]:
    """(name, kind) pairs, kinds title | alias | file | author; distinct ignoring case, at most MAX_NAMES.

    `authors` (a book's authors, its chunks' participants) are names of books only: people look books up by
    who wrote them; a mail's or chat's people are not what the item is called."""
    meta = metadata or {}
    found: list[tuple[str, str]] = [(title, "title")]
    found += [(a, "alias") for a in _strings(meta.get("aliases"))]
    stem = file_stem(key)
    if stem:
        found.append((stem, "file"))
    if source_type == "book":
        found += [(a, "author") for a in _strings(list(authors))]
    out, seen = [], set()
    for name, kind in found:
        name = " ".join(str(name).split())
        if name and len(name) <= MAX_NAME_CHARS and name.lower() not in seen:
            seen.add(name.lower())
            out.append((name, kind))
    return out[:MAX_NAMES]


def file_stem(key: str) -> str | None:
    """The file name without its extension, for keys that are paths of files (not message ids, not hashed)."""
    last = key.rsplit("/", 1)[-1]
    if not _EXTENSION.search(last) or _HASHED.search(last) or last.startswith(("<", "~")):
        return None
    return _EXTENSION.sub("", last).replace("%25", "%") or None


def _strings(value: Any) -> list[str]:
    values = value if isinstance(value, (list, tuple)) else [value]
    return [v for v in values if isinstance(v, str) and v.strip()]
