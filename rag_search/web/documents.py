"""One whole item for the page: its text by kind (a note, a mail with its headers, a chat window, a book chapter,
a commit), the passage that matched marked, what is known about it, and a citation.

Read from the index (store.reads.get_document), never from the source file; only items of collections the
principal may see can be opened (any other id is "not found", so ids reveal nothing). A note's [[wikilinks]] open
the note they name in the principal's collections (its own collection first), or say it is not among them (the
same words whether it exists elsewhere or nowhere). A note's properties (its front matter) are shown above it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rag_search.errors import NotFound
from rag_search.records import chunk_body, iso_utc
from rag_search.retrieval.keyword import parse_terms
from rag_search.retrieval.snippets import term_pattern
from rag_search.store import reads
from rag_search.web import rendering
from rag_search.web.backend import Backend
from rag_search.web.searching import local_date

MARKDOWN = frozenset({"markdown", "canvas", "book", "epub"})  # a book's text is Markdown-like (`# Chapter`)
CHAPTERED = frozenset({"book", "epub"})  # shown a chapter at a time: the whole book is too long for a page
_CHAPTER = re.compile(r"^# ", re.MULTILINE)  # a chapter starts at a top-level heading of the book's text
MONOSPACE = frozenset({"code", "commit", "json", "yaml", "csv"})
MAIL_FIELDS = ("to", "cc", "folders", "attachments")
COMMIT_FIELDS = ("sha", "committer", "commit_date", "files_changed", "additions", "deletions")
CHAT_FIELDS = ("start", "end", "messages", "channel", "conversation", "service")


MAX_ID = 2**63 - 1  # SQLite's largest integer: a longer /item/<digits> is no item


def item_collection(backend: Backend, item_id: int, allowed: frozenset[str] | None) -> str:
    """The item's collection, or NotFound when there is no such item or the principal may not see it."""
    if not 0 <= item_id <= MAX_ID:
        raise NotFound(f"There is no item {str(item_id)[:30]} in the collections you can see. Search for it again.")
    with backend.store.lock:
        row = backend.store.conn.execute("SELECT co.name FROM items i JOIN collections co ON co.id = i.collection_id "
                                         "WHERE i.id = ?", (item_id,)).fetchone()
    if row is None or (allowed is not None and row[0] not in allowed):
        raise NotFound(f"There is no item {item_id} in the collections you can see. Search for it again.")
    return row[0]


def open_item(backend: Backend, item_id: int, chunk: int | None, q: str, allowed: frozenset[str] | None,
              part: int | None = None) -> dict:
    """Everything the item page shows; `part`: a book's chapter to show instead of the matched one."""
    collection = item_collection(backend, item_id, allowed)
    with backend.store.lock:
        doc = reads.get_document(backend.store, f"item:{item_id}", collection)
        first, matched = _chunk(backend, item_id, 0), _chunk(backend, item_id, chunk) if chunk is not None else None
    first = first or {}
    pattern = term_pattern([w for t in parse_terms(q) for w in t.text.split()]) if q else None
    view = {"item_id": item_id, "collection": collection, "title": doc["title"] or doc["key"], "key": doc["key"],
            "uri": doc["uri"], "kind": doc["source_type"], "date": local_date(first.get("ts")),
            "author": first.get("author"), "participants": [p for p in first.get("participants", [])
                                                            if p != first.get("author")],
            "tags": doc["tags"], "q": q, "chunk": chunk,
            "matched_heading": " › ".join(matched["heading_path"]) if matched else None,
            "fields": _fields(doc["source_type"], doc["metadata"])}
    view["citation"] = citation(view, matched, first.get("ts"))
    links = wikilinks(backend, doc["text"], collection, allowed) if doc["source_type"] in MARKDOWN else {}
    view.update(_body(doc, matched if part is None else None, pattern, links, part))
    view["properties"] = properties(doc) if doc["source_type"] in ("markdown", "canvas") else []
    return view


def properties(doc: dict) -> list[tuple[str, str]]:
    """A note's front matter as (name, value) lines: its tags, then its other properties as written."""
    out = [("tags", ", ".join(f"#{t}" for t in doc["tags"]))] if doc["tags"] else []
    for name, value in doc["metadata"].items():
        if value in (None, "", [], {}):
            continue
        shown = ", ".join(map(str, value)) if isinstance(value, list) else \
            json.dumps(value, ensure_ascii=False) if isinstance(value, dict) else str(value)
        out.append((str(name), shown))
    return out


def wikilinks(backend: Backend, text: str, collection: str, allowed: frozenset[str] | None) -> dict[str, int | None]:
    """Each [[target]] of the note → the item it opens (the note's own collection first, then the others the
    principal may see), or None when no collection they may see holds it."""
    targets = {t.strip().lower() for t in rendering.wikilink_targets(text)}
    if not targets:
        return {}
    with backend.store.lock:
        rows = backend.store.conn.execute("SELECT id, name FROM collections").fetchall()
        own = next(i for i, n in rows if n == collection)
        order = [own] + [i for i, n in rows if i != own and (allowed is None or n in allowed)]
        return {t: _resolve(backend.store.conn, t, order) for t in targets}


def _resolve(conn, target: str, collections: list[int]) -> int | None:
    for coll in collections:
        row = conn.execute(
            "SELECT id FROM items WHERE collection_id = ? AND status = 'indexed' AND (lower(title) = ? OR lower(key) = ? "
            "OR lower(key) = ? OR lower(key) LIKE ? ESCAPE '\\') ORDER BY length(key) LIMIT 1",
            (coll, target, target, target + ".md", "%/" + _like(target) + ".md")).fetchone()
        if row:
            return row[0]
    return None


def _like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _chunk(backend: Backend, item_id: int, idx: int) -> dict[str, Any] | None:
    r = backend.store.conn.execute("SELECT idx, text, title, heading_path, page, ts, author, participants FROM chunks "
                                   "WHERE item_id = ? AND idx = ?", (item_id, idx)).fetchone()
    if r is None:
        return None
    return {"idx": r[0], "body": chunk_body(r[1], r[2]), "heading_path": json.loads(r[3]), "page": r[4], "ts": r[5],
            "author": r[6], "participants": json.loads(r[7])}


def _body(doc: dict, matched: dict | None, pattern, links: dict[str, int | None], part: int | None) -> dict[str, Any]:
    """The text part of the page: {"html": Markup} or {"messages": [...]}, plus chapter links for books."""
    kind, text, out = doc["source_type"], doc["text"], {}
    span = rendering.locate(text, matched["body"]) if matched else None
    out["located"] = matched is None or span is not None
    out["passage"] = rendering.terms(matched["body"], pattern) if matched and span is None else None
    if kind in CHAPTERED:
        text, span, out["book"] = _chapter(text, span, pattern, part)
    if kind in MARKDOWN:
        out["html"], out["frontmatter"] = rendering.markdown(text, span, links)
        out["markdown"] = True
    elif kind == "chat":
        out["messages"] = rendering.chat(text, span, pattern)
    else:
        out["html"], out["monospace"] = rendering.plain(text, span, pattern), kind in MONOSPACE
    return out


def _chapter(text: str, span: tuple[int, int] | None, pattern, part: int | None):
    """(the chapter's text, the passage within it, chapter links): the chapter `part`, else the one holding the first
    query word of the passage (a passage may run on from the chapter before), else the passage's start."""
    starts = [m.start() for m in _CHAPTER.finditer(text)]
    starts = starts if starts[:1] == [0] else [0, *starts]
    bounds = list(zip(starts, starts[1:] + [len(text)]))
    focus = span[0] if span else 0
    if span and pattern is not None:
        m = pattern.search(text, span[0], span[1])
        focus = m.start() if m else focus
    n = part if part is not None and 0 <= part < len(bounds) else \
        max(i for i, (a, _) in enumerate(bounds) if a <= focus)
    a, b = bounds[n]
    inside = span and span[0] < b and span[1] > a
    clipped = (max(span[0], a) - a, min(span[1], b) - a) if inside else None

    def label(i: int) -> str:
        first = text[bounds[i][0]:bounds[i][1]].lstrip().split("\n", 1)[0]
        return first.lstrip("#").strip()[:80] or f"part {i + 1}"

    nav = {"label": label(n), "number": f"{n + 1} of {len(bounds)}",
           "previous": {"label": label(n - 1), "part": n - 1} if n > 0 else None,
           "next": {"label": label(n + 1), "part": n + 1} if n + 1 < len(bounds) else None}
    return text[a:b], clipped, nav


def _fields(kind: str, metadata: dict[str, Any]) -> list[tuple[str, str]]:
    """Header lines by kind: a mail's recipients and folders, a commit's sha and size, a chat window's span."""
    names = {"email": MAIL_FIELDS, "commit": COMMIT_FIELDS, "chat": CHAT_FIELDS}.get(kind, ())
    out = []
    for name in names:
        value = metadata.get(name)
        if value in (None, "", [], ()):
            continue
        shown = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
        out.append((name.replace("_", " "), shown))
    return out


def citation(view: dict[str, Any], matched: dict | None, ts: int | None) -> str:
    """One line naming the item: title, who, when, where it is and the passage."""
    where = view["uri"]
    if matched is not None:
        where += f" (passage {matched['idx'] + 1}" + (f", {view['matched_heading']}" if view["matched_heading"]
                                                      else "") + (f", page {matched['page']}" if matched["page"]
                                                                  is not None else "") + ")"
    who = f"{view['author']}, " if view.get("author") else ""
    when = f"{(iso_utc(ts) or '')[:10]}, " if ts else ""
    return f"“{view['title']}”, {who}{when}{view['collection']}: {where}"
