"""What tools/list says about each tool: one line per parameter, and schemas without generator noise.

Every parameter of every tool is described here, in one line (a test fails for a parameter without
one): by "tool.parameter" when a tool needs its own wording, else by parameter name, so the same
parameter reads the same in every tool. The schemas pydantic generates are then made compact, which
changes nothing a client may send: titles are dropped ("Top K"), and an optional parameter is written
as its type alone (not "anyOf [type, null]" with "default": null; the server still accepts null).
Docstrings become one line of text per paragraph.
"""

from __future__ import annotations

import inspect
from typing import Any

PARAMETERS: dict[str, str] = {
    "query": "What to look for: words or a question; quote \"exact phrases\".",
    "collection": "Only this collection (names: rag_list_collections).",
    "collections": "Only these collections (any of them).",
    "top_k": "How many results to return.",
    "mode": "hybrid (keyword + semantic, the default), keyword (exact words) or semantic (meaning).",
    "source_type": "Only these item types, e.g. markdown, pdf, email, event (rag_collection_info lists them).",
    "date_from": "Items dated on or after: 2024, 2024-03, 2024-03-15, 7d/2w/3m/1y, 'last week', 'yesterday'.",
    "date_to": "Items dated on or before (same forms as date_from; a period counts to its end).",
    "days": "Only items of the last N days (same as date_from='Nd').",
    "author": "Who wrote it: author or sender contains this text (case-insensitive), or wrote in the chat window; people-file names too.",
    "participants": "People who all take part: names, e-mail addresses, phones or chat ids (the user's people file "
                    "maps a name to all their ids).",
    "tags": "Tags the items must all have, without '#'; 'a' also matches nested 'a/b'.",
    "path_prefix": "Only items whose path (or key in its collection) starts with this, e.g. ~/Notes/Work/.",
    "metadata": "Metadata filters: {key: value or list of values} (ingestion://metadata lists keys and values).",
    "chunks": "true: one result per matching passage instead of one per item.",
    "searches": "Sub-queries: keyword (exact words, names) or semantic (meaning), fused into one list.",
    "intent": "What the user is after, in a sentence (with searches).",
    "min_score": "Leave out hits with a lower relevance (0..1, one scale for all queries; 0.5 drops most off-topic hits).",
    "queries": "The queries (each as rag_search's query).",
    "rag_batch_search.top_k": "How many results per query.",
    "rag_context.path_or_id": "The hit's item_id.",
    "chunk_index": "The hit's chunk_index.",
    "before": "Chunks before the hit.",
    "after": "Chunks after the hit.",
    "path_or_id": "An item id, key or source path from search results.",
    "rag_get_document.collection": "The item's collection, when the key is in several.",
    "rag_collection_info.collection": "The collection's name.",
    "rag_related.top_k": "How many similar items to return.",
    "tag": "The tag, without '#'; nested tags below it count too.",
    "rag_search_by_tag.query": "Rank the tagged items by this query; without it, newest first.",
    "rag_search_by_tag.top_k": "How many items to return.",
    "rag_list_recent.days": "How many days back to look.",
    "limit": "How many items to return at most.",
    "rag_index.collection": "A configured collection to re-index, or the name of a new project collection.",
    "path": "A folder to index as a new project collection (under the user's home or an allowed root).",
}


def describe(tool: str, parameter: str) -> str | None:
    return PARAMETERS.get(f"{tool}.{parameter}") or PARAMETERS.get(parameter)


def one_line(doc: str) -> str:
    """A docstring without its indentation and line breaks; paragraphs stay apart."""
    return "\n".join(" ".join(p.split()) for p in inspect.cleandoc(doc or "").split("\n\n") if p.strip())


def compact_property(schema: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in schema.items() if k != "title"}
    branches = out.get("anyOf")
    if isinstance(branches, list) and {"type": "null"} in branches and out.get("default", ...) is None:
        rest = [b for b in branches if b != {"type": "null"}]
        out.pop("anyOf")
        out.pop("default")
        out = {**rest[0], **out} if len(rest) == 1 else {"anyOf": rest, **out}
    return out


def inline_refs(node: Any, defs: dict[str, Any]) -> Any:
    """A schema with each "$ref" to its $defs entry written in place (an object's properties compacted), so a
    model reads a sub-query's fields where it is used."""
    if isinstance(node, list):
        return [inline_refs(v, defs) for v in node]
    if not isinstance(node, dict):
        return node
    if str(node.get("$ref", "")).startswith("#/$defs/"):
        target = defs[node["$ref"].rsplit("/", 1)[1]]
        node = {**{k: v for k, v in target.items() if k not in ("title", "description")},
                **{k: v for k, v in node.items() if k != "$ref"}}
    out = {k: inline_refs(v, defs) for k, v in node.items() if k != "properties"}
    if isinstance(node.get("properties"), dict):
        out["properties"] = {n: compact_property(inline_refs(p, defs)) for n, p in node["properties"].items()}
    return out


def compact_parameters(tool: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A tool's input schema: compact properties, each with its one-line description."""
    props = {}
    defs = schema.get("$defs", {})
    for name, prop in schema.get("properties", {}).items():
        prop = compact_property(inline_refs(prop, defs))
        text = describe(tool, name)
        props[name] = {**prop, "description": text} if text and "description" not in prop else prop
    out = {k: v for k, v in schema.items() if k not in ("title", "properties", "$defs")}
    return {"type": out.pop("type", "object"), "properties": props, **out}


def compact_tools(server) -> None:
    """Describe and compact every tool registered on an MCPServer (call after registering them)."""
    for tool in server._tool_manager.list_tools():
        tool.parameters = compact_parameters(tool.name, tool.parameters)
        tool.description = one_line(tool.description)


def undescribed(server) -> list[str]:
    """tool.parameter of each parameter without a description (the test wants none)."""
    return [f"{t.name}.{name}" for t in server._tool_manager.list_tools()
            for name, prop in t.parameters.get("properties", {}).items() if not prop.get("description")]
