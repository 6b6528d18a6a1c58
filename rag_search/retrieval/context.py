"""The chunks around a hit: its neighbours before and after it in the same item, by chunk index."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rag_search.errors import QueryError
from rag_search.records import chunk_body

if TYPE_CHECKING:
    from rag_search.store import Store


def chunks_around(store: Store, item_id: int, index: int, before: int, after: int,
                  budget_chars: int | None = None) -> dict[str, Any]:
    """Chunks index-before .. index+after of one item (each without the title line the chunker puts first), the
    hit's own marked; past budget_chars the farthest neighbours are left out first (a note says how many)."""
    with store.lock:
        total = store.conn.execute("SELECT count(*), max(idx) FROM chunks WHERE item_id = ?", (item_id,)).fetchone()
        if not total[0]:
            raise QueryError(f"Item {item_id} has no chunks (it failed to index, or holds no text).")
        if not 0 <= index <= total[1]:
            raise QueryError(f"Item {item_id} has chunks 0..{total[1]}; chunk_index {index} is not one of them. "
                             "Use the chunk_index of a search hit.")
        rows = store.conn.execute(
            "SELECT idx, title, text, heading_path, page FROM chunks WHERE item_id = ? AND idx BETWEEN ? AND ? "
            "ORDER BY idx", (item_id, index - before, index + after)).fetchall()
    chunks = [{"chunk_index": i, "heading": " > ".join(json.loads(h)) or None, "page": p,
               "content": chunk_body(text, title), **({"hit": True} if i == index else {})}
              for i, title, text, h, p in rows]
    chunks, left_out = _within(chunks, index, budget_chars)
    out = {"item_id": item_id, "chunk_index": index, "chunks_in_item": total[0],
           "chunks": [{k: v for k, v in c.items() if v is not None} for c in chunks]}
    if left_out:
        out["note"] = (f"{left_out} neighbouring chunk(s) left out to keep the answer short; ask for fewer before/"
                       "after, or open the whole item with rag_get_document.")
    return out


def _within(chunks: list[dict], index: int, budget_chars: int | None) -> tuple[list[dict], int]:
    """The chunks nearest the hit that fit the budget (the hit's own always)."""
    if budget_chars is None:
        return chunks, 0
    kept, used = set(), 0
    for c in sorted(chunks, key=lambda c: (abs(c["chunk_index"] - index), c["chunk_index"])):
        size = len(c["content"]) + 100
        if kept and used + size > budget_chars:
            break
        kept.add(c["chunk_index"])
        used += size
    return [c for c in chunks if c["chunk_index"] in kept], len(chunks) - len(kept)
