"""Bounded summaries of the metadata keys in the index: the rag_search filter schema and ingestion://metadata.

One item may carry thousands of frontmatter keys; what the MCP server advertises stays small anyway:
the MAX_KEYS keys found on most items, enums only for short value lists, and a character budget.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rag_search.store import Store

MAX_KEYS = 20  # keys listed (the ones present on most items)
MAX_ENUM = 25  # a key with more distinct values is a plain string
MAX_VALUE_CHARS = 40  # ... and so is one with a longer value; longer keys are not listed
SCHEMA_BUDGET = 6_000  # characters of the metadata property; past it, keys lose their enum
_META = "f.name >= 'meta.' AND f.name < 'meta/'"  # the meta.<key> facets, as an index range


@dataclass(frozen=True)
class KeySummary:
    key: str
    items: int
    values: tuple[str, ...]  # the most frequent short values
    complete: bool  # values are all the key's values (usable as an enum)


def common_keys(store: Store, collection_id: int | None = None, limit: int = MAX_KEYS) -> list[KeySummary]:
    """The metadata keys on most items (of one collection, or all), with their most frequent values."""
    scope, params = ("AND c.collection_id = ?", (collection_id,)) if collection_id is not None else ("", ())
    with store.lock:
        rows = store.conn.execute(
            "SELECT substr(f.name, 6), count(DISTINCT c.item_id), count(DISTINCT f.value), max(length(f.value)) "
            f"FROM chunk_facets f JOIN chunks c ON c.id = f.chunk_id WHERE {_META} {scope} "
            "GROUP BY f.name HAVING length(f.name) <= ? ORDER BY 2 DESC, 1 LIMIT ?",
            (*params, MAX_VALUE_CHARS + 5, limit)).fetchall()
        return [KeySummary(key, items, _values(store, key, scope, params), n <= MAX_ENUM and longest <= MAX_VALUE_CHARS)
                for key, items, n, longest in rows]


def _values(store: Store, key: str, scope: str, params: tuple) -> tuple[str, ...]:
    rows = store.conn.execute(
        "SELECT f.value FROM chunk_facets f JOIN chunks c ON c.id = f.chunk_id "
        f"WHERE f.name = ? AND length(f.value) <= ? {scope} GROUP BY f.value ORDER BY count(*) DESC, f.value LIMIT ?",
        (f"meta.{key}", MAX_VALUE_CHARS, *params, MAX_ENUM)).fetchall()
    return tuple(r[0] for r in rows)


def metadata_schema(store: Store) -> dict[str, Any]:
    """JSON schema of rag_search's metadata filter: common keys (with their values when few), others allowed."""
    props: dict[str, Any] = {}
    used = 0
    for k in common_keys(store):
        prop = _enum(sorted(k.values)) if k.complete and k.values else _ANY_STRING
        size = len(json.dumps(prop, ensure_ascii=False))
        if used + size > SCHEMA_BUDGET:
            prop, size = _ANY_STRING, len(json.dumps(_ANY_STRING))
        props[k.key], used = prop, used + size
    return {"anyOf": [{"type": "object", "properties": props, "additionalProperties": _ANY_STRING}, {"type": "null"}],
            "default": None,
            "description": "Metadata filters: key → value or list of accepted values. The common keys are listed "
                           "(with their values when there are few); other keys may be given too "
                           "(see the ingestion://metadata resource)."}


def _enum(values: list[str]) -> dict[str, Any]:
    return {"anyOf": [{"type": "string", "enum": values}, {"type": "array", "items": {"type": "string", "enum": values}}]}


_ANY_STRING: dict[str, Any] = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}


def metadata_by_collection(store: Store) -> dict[str, dict[str, list[str]]]:
    """Per collection, its common metadata keys and their most frequent values (the ingestion://metadata resource)."""
    with store.lock:
        collections = store.conn.execute("SELECT id, name FROM collections ORDER BY name").fetchall()
    out = {}
    for coll_id, name in collections:
        keys = common_keys(store, coll_id)
        if keys:
            out[name] = {k.key: list(k.values) for k in keys}
    return out
