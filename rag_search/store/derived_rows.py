"""Rows derived from an item's chunks: its whole-text row (items_fts), its names (item_names), a chunk's hidden
keywords. Shared by every write and by the migrations that backfill them (inside the caller's transaction)."""

from __future__ import annotations

from typing import Any

from rag_search import cjk
from rag_search.store.names import MAX_NAMES, item_names

# An item's text for items_fts, from its chunks: each chunk without the item title that opens its context
# line (headings stay), in order. One definition for the backfill and for every write.
ITEM_TEXT_SQL = (
    "SELECT i.id, i.title, group_concat(CASE WHEN c.title != '' AND substr(c.text, 1, length(c.title)) = c.title "
    "THEN substr(c.text, length(c.title) + 1) ELSE c.text END || CHUNK_KEYWORDS, char(10) ORDER BY c.idx) "
    "FROM items i JOIN chunks c ON c.item_id = i.id WHERE {where} GROUP BY i.id"
)

# 0005_code_terms: a chunk's keywords (split code identifiers, never shown) are indexed with its text:
# a third column of chunks_fts (weighted below the text, so an exact identifier ranks first), and appended
# to the item's text in items_fts.
CHUNK_KEYWORDS_SQL = "CASE WHEN c.keywords = '' THEN '' ELSE char(10) || c.keywords END"
ITEM_TEXT_SQL = ITEM_TEXT_SQL.replace("CHUNK_KEYWORDS", CHUNK_KEYWORDS_SQL)


def write_item_text(conn: Any, item_id: int) -> None:
    """Re-derive the item's row of the whole-item keyword index from its chunks (inside the caller's transaction)."""
    conn.execute("DELETE FROM items_fts WHERE rowid = ?", (item_id,))
    conn.execute(f"INSERT INTO items_fts(rowid, title, text) {ITEM_TEXT_SQL.format(where='i.id = ?')}", (item_id,))


def write_item_names(conn: Any, item_id: int, title: str, key: str, source_type: str, metadata: dict,
                     authors: tuple[str, ...] = ()) -> None:
    """Replace the item's rows of item_names (its title, aliases, file name...: rag_search.store.names)."""
    base = item_id * MAX_NAMES
    conn.execute("DELETE FROM item_names WHERE rowid BETWEEN ? AND ?", (base, base + MAX_NAMES - 1))
    conn.executemany("INSERT INTO item_names(rowid, name, kind) VALUES (?, ?, ?)",
                     [(base + n, name, kind) for n, (name, kind) in
                      enumerate(item_names(title, key, source_type, metadata, authors))])


def chunk_keywords(keywords: str, title: str, text: str) -> str:
    """What a chunk is found by but never shows: its own keywords (split code identifiers) and the bigrams of its
    unspaced-script runs (rag_search.cjk)."""
    grams = cjk.bigrams(f"{title}\n{text}") if cjk.has_cjk(title) or cjk.has_cjk(text) else ""
    return f"{keywords} {grams}".strip() if grams else keywords
