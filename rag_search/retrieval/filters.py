"""Search filters and the SQL that applies them inside each retriever (never after fusion).

The WHERE clause is built over `chunks c JOIN items i`; both the keyword and the vector retriever use
the same builder, so a filter means the same thing on both sides.
"""

from __future__ import annotations

import calendar
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from rag_search.errors import QueryError


@dataclass(frozen=True)
class Filters:
    collections: tuple[str, ...] = ()
    source_types: tuple[str, ...] = ()
    date_from: int | None = None  # unix seconds, inclusive
    date_to: int | None = None  # unix seconds, inclusive
    include_undated: bool = True  # items without a timestamp pass date filters unless this is False
    author: str | None = None  # case-insensitive substring of the author/sender
    participants: tuple[str, ...] = ()  # each must match (substring) one participant
    tags: tuple[str, ...] = ()  # each must be present; '#a' also matches nested '#a/b'
    path_prefix: str | None = None  # prefix of the item's path/URI, or of its key inside the collection
    metadata: dict[str, Any] = field(default_factory=dict)  # key -> value or list of accepted values

    def is_empty(self) -> bool:
        return self == Filters()

    def without_collections(self) -> Filters:
        return Filters(**{**self.__dict__, "collections": ()})


@dataclass(frozen=True)
class SqlFilter:
    """A WHERE fragment over `c` (chunks) and `i` (items) with its parameters."""

    sql: str
    params: tuple[Any, ...]

    @property
    def empty(self) -> bool:
        return self.sql == "1"


def build_where(filters: Filters, collection_ids: tuple[int, ...] = ()) -> SqlFilter:
    parts: list[str] = []
    params: list[Any] = []

    def add(sql: str, *values: Any) -> None:
        parts.append(sql)
        params.extend(values)

    if collection_ids:
        add(f"c.collection_id IN ({_marks(collection_ids)})", *collection_ids)
    if filters.source_types:
        add(f"i.source_type IN ({_marks(filters.source_types)})", *filters.source_types)
    undated = "c.ts IS NULL OR " if filters.include_undated else ""
    if filters.date_from is not None:
        add(f"({undated}c.ts >= ?)", filters.date_from)
    if filters.date_to is not None:
        add(f"({undated}c.ts <= ?)", filters.date_to)
    if filters.date_from is None and filters.date_to is None and not filters.include_undated:
        add("c.ts IS NOT NULL")
    if filters.author:
        add("c.author LIKE ? ESCAPE '\\'", f"%{_like_escape(filters.author)}%")
    for person in filters.participants:
        add(_facet_in("f.name = 'participant' AND f.value LIKE ? ESCAPE '\\'"), f"%{_like_escape(person)}%")
    for tag in filters.tags:
        t = tag.strip().lstrip("#").lower()
        # '#a' matches 'a' and nested 'a/...': the range ('a/', 'a0') holds exactly the strings 'a/...'.
        add(_facet_in("f.name = 'tag' AND (f.value = ? OR (f.value > ? AND f.value < ?))"), t, t + "/", t + "0")
    if filters.path_prefix:
        prefix = _expand_path(filters.path_prefix)
        add("(substr(i.uri, 1, ?) = ? OR substr(i.key, 1, ?) = ?)", len(prefix), prefix, len(filters.path_prefix), filters.path_prefix)
    for key, accepted in sorted(filters.metadata.items()):
        values = [_facet_value(v) for v in (accepted if isinstance(accepted, (list, tuple)) else [accepted])]
        add(_facet_in(f"f.name = ? AND f.value IN ({_marks(values)})"), f"meta.{key}", *values)
    return SqlFilter(" AND ".join(parts) or "1", tuple(params))


def passing(conn: Any, chunk_ids: list[int], where: SqlFilter) -> set[int]:
    """The chunk ids among `chunk_ids` that satisfy the filter."""
    if not chunk_ids:
        return set()
    sql = (
        "SELECT c.id FROM chunks c JOIN items i ON i.id = c.item_id "
        f"WHERE c.id IN (SELECT value FROM json_each(?)) AND {where.sql}"
    )
    return {r[0] for r in conn.execute(sql, (json.dumps(chunk_ids), *where.params))}


def _facet_in(condition: str) -> str:
    return f"c.id IN (SELECT f.chunk_id FROM chunk_facets f WHERE {condition})"


def _facet_value(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def _marks(values: tuple | list) -> str:
    return ",".join("?" * len(values))


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _expand_path(prefix: str) -> str:
    if prefix.startswith("~"):
        return str(Path(prefix).expanduser())
    return prefix


# -- dates ------------------------------------------------------------------------------------

_RELATIVE = re.compile(r"^(\d+)\s*([dwmy])$")


def parse_date(value: str | int | None, *, end: bool = False, now: datetime | None = None) -> int | None:
    """'2024', '2024-03', '2024-03-05', an ISO datetime, or relative '7d'/'2w'/'3m'/'1y' → unix seconds.

    With end=True a date without a time means the end of that year/month/day (inclusive upper bound).
    """
    if value is None or value == "":
        return None
    if isinstance(value, int):
        return value
    text = value.strip()
    now = now or datetime.now(timezone.utc)
    rel = _RELATIVE.match(text.lower())
    if rel:
        n, unit = int(rel.group(1)), rel.group(2)
        days = {"d": 1, "w": 7, "m": 30, "y": 365}[unit] * n
        return int((now - timedelta(days=days)).timestamp())
    try:
        if re.fullmatch(r"\d{4}", text):
            y = int(text)
            return _ts(datetime(y, 12, 31, 23, 59, 59) if end else datetime(y, 1, 1))
        if re.fullmatch(r"\d{4}-\d{2}", text):
            y, m = map(int, text.split("-"))
            last = calendar.monthrange(y, m)[1]
            return _ts(datetime(y, m, last, 23, 59, 59) if end else datetime(y, m, 1))
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            d = datetime.fromisoformat(text)
            return _ts(d.replace(hour=23, minute=59, second=59) if end else d)
        return _ts(datetime.fromisoformat(text.replace("Z", "+00:00")))
    except ValueError as exc:
        raise QueryError(
            f"Cannot read the date '{value}'. Use YYYY, YYYY-MM, YYYY-MM-DD, an ISO date-time, or 7d / 2w / 3m / 1y."
        ) from exc


def _ts(d: datetime) -> int:
    if d.tzinfo is None:
        d = d.replace(tzinfo=timezone.utc)
    return int(d.timestamp())
