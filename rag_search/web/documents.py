"""One whole item for the page: its text by kind (a note, a mail with its headers, a chat window, a book chapter,
a commit), the passage that matched marked, what is known about it, and a citation.

Read from the index (store.reads.get_document), never from the source file; only items of collections the
principal may see can be opened (any other id is "not found", so ids reveal nothing).
"""

from __future__ import annotations

import json
from typing import Any

from rag_search.errors import NotFound
from rag_search.records import chunk_body, iso_utc
from rag_search.retrieval.keyword import parse_terms
from rag_search.retrieval.snippets import term_pattern
from rag_search.store import reads
from rag_search.store.reads import _join_without_overlap  # the text of a few chunks, as get_document rebuilds it
from rag_search.web import rendering
from rag_search.web.backend import Backend
from rag_search.web.searching import local_date

MARKDOWN = frozenset({"markdown", "canvas"})
CHAPTERED = frozenset({"book", "epub"})  # shown a chapter at a time: the whole book is too long for a page
MONOSPACE = frozenset({"code", "commit", "json", "yaml", "csv"})
MAIL_FIELDS = ("to", "cc", "folders", "attachments")
COMMIT_FIELDS = ("sha", "committer", "commit_date", "files_changed", "additions", "deletions")
CHAT_FIELDS = ("start", "end", "messages", "channel", "conversation", "service")


def item_collection(backend: Backend, item_id: int, allowed: frozenset[str] | None) -> str:
    """The item's collection, or NotFound when there is no such item or the principal may not see it."""
    with backend.store.lock:
        row = backend.store.conn.execute("SELECT co.name FROM items i JOIN collections co ON co.id = i.collection_id "
                                         "WHERE i.id = ?", (item_id,)).fetchone()
    if row is None or (allowed is not None and row[0] not in allowed):
        raise NotFound(f"There is no item {item_id} in the collections you can see. Search for it again.")
    return row[0]


def open_item(backend: Backend, item_id: int, chunk: int | None, q: str, allowed: frozenset[str] | None) -> dict:
    """Everything the item page shows."""
    collection = item_collection(backend, item_id, allowed)
    with backend.store.lock:
        doc = reads.get_document(backend.store, f"item:{item_id}", collection)
        rows = _chunks(backend, item_id)
    matched = next((c for c in rows if c["idx"] == chunk), None)
    first = rows[0] if rows else {}
    pattern = term_pattern([w for t in parse_terms(q) for w in t.text.split()]) if q else None
    view = {"item_id": item_id, "collection": collection, "title": doc["title"] or doc["key"], "key": doc["key"],
            "uri": doc["uri"], "kind": doc["source_type"], "date": local_date(first.get("ts")),
            "author": first.get("author"), "participants": [p for p in first.get("participants", [])
                                                            if p != first.get("author")],
            "tags": doc["tags"], "metadata": doc["metadata"], "q": q, "chunk": chunk, "chunks": len(rows),
            "matched_heading": " › ".join(matched["heading_path"]) if matched else None}
    view["fields"] = _fields(doc["source_type"], doc["metadata"])
    view["citation"] = citation(view, matched, first.get("ts"))
    view.update(_body(doc, rows, matched, pattern, collection))
    return view


def _chunks(backend: Backend, item_id: int) -> list[dict[str, Any]]:
    rows = backend.store.conn.execute(
        "SELECT idx, text, title, heading_path, page, ts, author, participants FROM chunks WHERE item_id = ? "
        "ORDER BY idx", (item_id,)).fetchall()
    return [{"idx": r[0], "body": chunk_body(r[1], r[2]), "heading_path": json.loads(r[3]), "page": r[4], "ts": r[5],
             "author": r[6], "participants": json.loads(r[7])} for r in rows]


def _body(doc: dict, rows: list[dict], matched: dict | None, pattern, collection: str) -> dict[str, Any]:
    """The text part of the page: {"html": Markup} or {"messages": [...]}, plus chapter links for books."""
    kind, text, out = doc["source_type"], doc["text"], {}
    if kind in CHAPTERED and rows:
        text, out = _chapter(rows, matched or rows[0])
    span = rendering.locate(text, matched["body"]) if matched else None
    out["located"] = matched is None or span is not None
    out["passage"] = rendering.terms(matched["body"], pattern) if matched and span is None else None
    if kind in MARKDOWN:
        out["html"], out["frontmatter"] = rendering.markdown(text, span, collection)
    elif kind == "chat":
        out["messages"] = rendering.chat(text, span, pattern)
    else:
        out["html"], out["monospace"] = rendering.plain(text, span, pattern), kind in MONOSPACE
    return out


def _chapter(rows: list[dict], matched: dict) -> tuple[str, dict[str, Any]]:
    """The text of the matched chunk's chapter (its first heading, else its page), and links to the chapters
    before and after it (the chunk each starts at)."""
    def chapter_of(row: dict):
        return tuple(row["heading_path"][:1]) or row["page"]

    order = list(dict.fromkeys(chapter_of(r) for r in rows))
    mine = chapter_of(matched)
    n = order.index(mine)
    starts = {c: next(r["idx"] for r in rows if chapter_of(r) == c) for c in order[max(0, n - 1):n + 2]}
    text = _join_without_overlap([r["body"] for r in rows if chapter_of(r) == mine])
    label = (lambda c: " ".join(c) if isinstance(c, tuple) else f"page {c}" if c is not None else "start")
    nav = {"chapter": label(mine), "chapter_of": f"{n + 1} of {len(order)}",
           "previous": {"label": label(order[n - 1]), "chunk": starts[order[n - 1]]} if n > 0 else None,
           "next": {"label": label(order[n + 1]), "chunk": starts[order[n + 1]]} if n + 1 < len(order) else None}
    return text, nav


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
