"""Tool arguments: their types with the bounds clients see in tools/list, and a refusal as one sentence.

The bounds are rag_search.retrieval.bounds' (the CLI applies the same ones). The SDK validates every call against these
types before the tool runs; a value past a bound comes back as "<parameter> ...; at most N ..." instead of
pydantic's report, and never echoes the value (a 1 MB query came back whole).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rag_search.retrieval import bounds
from rag_search.errors import quote

NO_NUL = r"^[^\x00]*$"  # a path: no file name holds a NUL character

Query = Annotated[str, Field(max_length=bounds.MAX_QUERY_CHARS)]
Text = Annotated[str, Field(max_length=bounds.MAX_VALUE_CHARS)]  # a name, tag, type, author, person, key or value
Texts = Annotated[list[Text], Field(max_length=bounds.MAX_FILTER_VALUES)]
PathText = Annotated[str, Field(max_length=bounds.MAX_PATH_CHARS, pattern=NO_NUL)]
DateText = Annotated[str, Field(max_length=bounds.MAX_DATE_CHARS)]
TopK = Annotated[int, Field(ge=1, le=bounds.MAX_TOP_K)]
Days = Annotated[int, Field(ge=1, le=bounds.MAX_DAYS)]
Metadata = Annotated[dict[Text, Text | Texts], Field(max_length=bounds.MAX_FILTER_VALUES)]
Queries = Annotated[list[Query], Field(min_length=1, max_length=bounds.MAX_BATCH_QUERIES)]
Intent = Annotated[str, Field(max_length=bounds.MAX_INTENT_CHARS)]
MinScore = Annotated[float, Field(ge=0, le=1)]
Span = Annotated[int, Field(ge=0, le=bounds.MAX_CONTEXT_CHUNKS)]  # chunks before or after a hit
ChunkIndex = Annotated[int, Field(ge=0, le=10_000_000)]


class SubSearch(BaseModel):
    """One typed sub-query of a query plan."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"maxProperties": 2})
    type: Literal["keyword", "semantic"]
    query: Annotated[str, Field(min_length=1, max_length=bounds.MAX_SUBQUERY_CHARS)]


Searches = Annotated[list[SubSearch], Field(max_length=bounds.MAX_SUBQUERIES)]

ANY_METADATA_VALUE: dict[str, Any] = {"anyOf": [  # the schema of one metadata value (metadata.py)
    {"type": "string", "maxLength": bounds.MAX_VALUE_CHARS},
    {"type": "array", "items": {"type": "string", "maxLength": bounds.MAX_VALUE_CHARS},
     "maxItems": bounds.MAX_FILTER_VALUES}]}


HINTS = {"query": " Semantic search reads about the first 1,000; search with the words that matter, or quote an "
                  "exact phrase."}


def refusal(tool: str, exc: ValidationError, arguments: dict[str, Any]) -> str:
    """One sentence for the first problem pydantic found in a call's arguments: what is wrong, what is allowed."""
    errors = exc.errors(include_url=False)
    # of a union (str | list), the branch the value has the type of says what is wrong with it
    first = next((e for e in errors if not e["type"].endswith(("_type", "_parsing"))), errors[0])
    name = str(first["loc"][0]) if first["loc"] else "the arguments"
    whole = first["type"] == "missing" or first.get("input") is arguments.get(name)
    whose = name if whole else f"a value in {name}"
    others = sorted({str(e["loc"][0]) for e in errors if e["loc"]} - {name})
    more = f" ({', '.join(others)}: wrong too.)" if others else ""
    return f"Error executing tool {tool}: {_sentence(whose, first)}{HINTS.get(whose, '')}{more} See the tool's input schema."


def _sentence(whose: str, error: Any) -> str:
    kind, ctx, value = error["type"], error.get("ctx") or {}, error.get("input")
    if kind == "string_too_long":
        return f"{whose} is {len(value):,} characters long; at most {ctx['max_length']:,} are allowed."
    if kind == "too_long":
        return f"{whose} has {len(value):,} entries; at most {ctx['max_length']:,} are allowed."
    if kind == "greater_than_equal":
        return f"{whose} must be at least {ctx['ge']:,} (got {_shown(value)})."
    if kind == "less_than_equal":
        return f"{whose} must be at most {ctx['le']:,} (got {_shown(value)})."
    if kind == "string_pattern_mismatch":
        return f"{whose} contains a NUL character (\\x00), which no path can hold."
    if kind == "missing":
        return f"{whose} is required."
    msg = str(error["msg"])
    return f"{whose}: {msg[:1].lower()}{msg[1:]} (got {_shown(value)})."


def _shown(value: Any) -> str:
    """The value a client sent, as a message shows it: short, never whole."""
    if isinstance(value, str):
        return quote(value, 30)
    if isinstance(value, (bool, int, float)) or value is None:
        return quote(json.dumps(value), 30).strip("'")
    return f"{'a list' if isinstance(value, list) else 'an object'} of {len(value):,} entries" \
        if isinstance(value, (list, dict)) else type(value).__name__
