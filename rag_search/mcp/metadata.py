"""Bounded summaries of the metadata keys in the index: the rag_search filter schema and ingestion://metadata.

One item may carry thousands of frontmatter keys; what the MCP server advertises stays small anyway:
the MAX_KEYS keys found on most items. Only a short, low-cardinality key gets an enum, so the enum is
then all of its values: at most MAX_ENUM distinct values, none over MAX_ENUM_CHARS, and values that
repeat across items (a category such as status, not an identifier such as a date or a permalink).
The other keys are named in the description, with their common values (found on several items),
never presented as complete. A character budget caps the whole property.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rag_search.retrieval.bounds import MAX_FILTER_VALUES
from rag_search.mcp.args import ANY_METADATA_VALUE
from rag_search.store import Store

MAX_KEYS = 15  # keys listed (the ones present on most items)
MAX_ENUM = 10  # a key with more distinct values gets no enum
MAX_ENUM_CHARS = 30  # ... nor does one with a longer value
MAX_VALUE_CHARS = 40  # values longer than this are never listed; longer keys are not listed
COMMON_VALUES = 3  # values named beside a key without an enum
LISTED_VALUES = 25  # values per key in ingestion://metadata
SCHEMA_BUDGET = 2_000  # characters of the metadata property; past it, keys are only named
_META = "f.name >= 'meta.' AND f.name < 'meta/'"  # the meta.<key> facets, as an index range


@dataclass(frozen=True)
class KeySummary:
    key: str
    items: int
    values: tuple[str, ...]  # the most frequent short values
    distinct: int = 0  # distinct values of the key
    longest: int = 0  # characters of its longest value
    common: tuple[str, ...] = ()  # the most frequent values found on more than one item

    @property
    def is_enum(self) -> bool:
        """Few short values that repeat: values lists all of them, and they name categories."""
        return bool(self.values) and self.distinct <= MAX_ENUM and self.longest <= MAX_ENUM_CHARS \
            and self.items > self.distinct


def common_keys(store: Store, collection_id: int | None = None, limit: int = MAX_KEYS,
                skip: tuple[int, ...] = ()) -> list[KeySummary]:
    """The metadata keys on most items (of one collection, or all but `skip`), with their most frequent values."""
    scope, params = ("AND c.collection_id = ?", (collection_id,)) if collection_id is not None else ("", ())
    if skip:
        scope, params = f"{scope} AND c.collection_id NOT IN ({','.join('?' * len(skip))})", (*params, *skip)
    with store.lock:
        rows = store.conn.execute(
            "SELECT substr(f.name, 6), count(DISTINCT c.item_id), count(DISTINCT f.value), max(length(f.value)) "
            f"FROM chunk_facets f JOIN chunks c ON c.id = f.chunk_id WHERE {_META} {scope} "
            "GROUP BY f.name HAVING length(f.name) <= ? ORDER BY 2 DESC, 1 LIMIT ?",
            (*params, MAX_VALUE_CHARS + 5, limit)).fetchall()
        out = []
        for key, items, distinct, longest in rows:
            counted = _values(store, key, scope, params)
            common = tuple(v for v, n in counted if n > 1 and len(v) <= MAX_ENUM_CHARS)[:COMMON_VALUES]
            out.append(KeySummary(key, items, tuple(v for v, _ in counted), distinct, longest, common))
        return out


def _values(store: Store, key: str, scope: str, params: tuple) -> list[tuple[str, int]]:
    """(value, items) of the key's most frequent short values."""
    return store.conn.execute(
        "SELECT f.value, count(DISTINCT c.item_id) FROM chunk_facets f JOIN chunks c ON c.id = f.chunk_id "
        f"WHERE f.name = ? AND length(f.value) <= ? {scope} GROUP BY f.value ORDER BY 2 DESC, f.value LIMIT ?",
        (f"meta.{key}", MAX_VALUE_CHARS, *params, LISTED_VALUES)).fetchall()


def metadata_schema(store: Store, skip: tuple[int, ...] = ()) -> dict[str, Any]:
    """JSON schema of rag_search's metadata filter: enums for category keys, other common keys named (the
    collections `skip` left out); bounded as mcp_args bounds every filter."""
    props: dict[str, Any] = {}
    named: list[str] = []
    used = 0
    for k in common_keys(store, skip=skip):
        enum = _enum(sorted(k.values)) if k.is_enum else None
        if enum and used + _size(enum) <= SCHEMA_BUDGET:
            props[k.key], used = enum, used + _size(enum)
            continue
        label = f"{k.key} (common values: {', '.join(k.common)})" if k.common else k.key
        if used + len(label) + 2 <= SCHEMA_BUDGET:
            named.append(label)
            used += len(label) + 2
    text = "Metadata filters: {key: value or list of values}."
    if named:
        text += f" {'Other common' if props else 'Common'} keys: {'; '.join(named)}."
    text += " ingestion://metadata lists keys and values per collection."
    return {"type": "object", "properties": props, "additionalProperties": ANY_METADATA_VALUE,
            "maxProperties": MAX_FILTER_VALUES, "description": text}


def _size(prop: dict[str, Any]) -> int:
    return len(json.dumps(prop, ensure_ascii=False, separators=(",", ":")))


def _enum(values: list[str]) -> dict[str, Any]:
    return {"anyOf": [{"enum": values}, {"type": "array", "items": {"enum": values}}]}


def metadata_by_collection(store: Store, skip: tuple[str, ...] = ()) -> dict[str, dict[str, list[str]]]:
    """Per collection (but `skip`), its common metadata keys and their most frequent values (ingestion://metadata)."""
    with store.lock:
        collections = store.conn.execute("SELECT id, name FROM collections ORDER BY name").fetchall()
    out = {}
    for coll_id, name in [(i, n) for i, n in collections if n not in skip]:
        keys = common_keys(store, coll_id)
        if keys:
            out[name] = {k.key: list(k.values) for k in keys}
    return out
