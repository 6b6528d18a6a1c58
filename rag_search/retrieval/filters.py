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

from rag_search.retrieval.bounds import MAX_DAYS, MAX_FILTER_VALUES, MAX_PATH_CHARS, MAX_VALUE_CHARS
from rag_search.errors import QueryError, quote
from rag_search.people import like_patterns


@dataclass(frozen=True)
class Filters:
    collections: tuple[str, ...] = ()
    source_types: tuple[str, ...] = ()
    date_from: int | None = None  # unix seconds, inclusive
    date_to: int | None = None  # unix seconds, inclusive
    include_undated: bool = True  # items without a timestamp pass date filters unless this is False
    author: str | None = None  # case-insensitive substring of the author/sender, or of one of a chat window's authors
    # the author term's alternatives (its normal form first, then the ids and names of the people it names in the
    # people directory); set by rag_search.people.resolve_filters, else the term stands alone
    authors: tuple[str, ...] = ()
    participants: tuple[str, ...] = ()  # each must match (substring) one participant or the author
    # each participant's alternatives (its normal form, and every id and name of the people it names in the
    # people directory); set by rag_search.people.resolve_filters, else each participant stands alone
    people: tuple[tuple[str, ...], ...] = ()
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
    # When every condition is on facets (tags, metadata): one statement listing the passing chunk ids straight from
    # the facet index (same params). Listing them through `chunks` reads each chunk's row: 6 vs 60-100 ms for 20k.
    ids_sql: str | None = None
    # The same conditions (same params) for checking a few given rows: a facet condition as a lookup of that chunk's
    # facets. `sql` lists every chunk holding the facet once per statement (`c.id IN (...)`: a 2% tag of 1M chunks
    # is 20k rows, ~40 ms), right when a statement scans many chunks; checking 15 chunks costs microseconds this way.
    row_sql: str | None = None
    # When every condition is on the item (collections, source types, path): the same conditions (same params) over
    # `i` alone. An item-level ranking then checks each matching item by its own row, not by reading its chunks
    # (a word in 3,400 of 10k items, one collection: 21 -> 2.5 ms).
    item_sql: str | None = None

    @property
    def empty(self) -> bool:
        return self.sql == "1"

    @property
    def for_rows(self) -> str:
        """The WHERE fragment to use where a statement checks a few chunks it already has (by id or item)."""
        return self.row_sql or self.sql

    def ids_query(self) -> str:
        """A statement listing every chunk id that passes (with `params`)."""
        return self.ids_sql or f"SELECT c.id FROM chunks c JOIN items i ON i.id = c.item_id WHERE {self.sql}"


def build_where(filters: Filters, collection_ids: tuple[int, ...] = ()) -> SqlFilter:
    parts: list[str] = []
    row_parts: list[str] = []
    params: list[Any] = []
    facet_queries: list[str] = []
    others: list[str] = []
    item_parts: list[str | None] = []  # each condition over the item alone (None: it is on the chunk)

    def add(sql: str, *values: Any, row: str | None = None, item: str | None = None) -> None:
        parts.append(sql)
        row_parts.append(row or sql)
        params.extend(values)
        others.append(sql)
        item_parts.append(item)

    def add_facet(query: str, *values: Any, row: str) -> None:
        parts.append(f"c.id IN ({query})")
        row_parts.append(_facet_of_row(row))
        params.extend(values)
        facet_queries.append(query)
        item_parts.append(None)

    if collection_ids:  # a chunk's collection is its item's
        add(f"c.collection_id IN ({_marks(collection_ids)})", *collection_ids,
            item=f"i.collection_id IN ({_marks(collection_ids)})")
    if filters.source_types:
        sql = f"i.source_type IN ({_marks(filters.source_types)})"
        add(sql, *filters.source_types, item=sql)
    undated = "c.ts IS NULL OR " if filters.include_undated else ""
    if filters.date_from is not None:
        add(f"({undated}c.ts >= ?)", filters.date_from)
    if filters.date_to is not None:
        add(f"({undated}c.ts <= ?)", filters.date_to)
    if filters.date_from is None and filters.date_to is None and not filters.include_undated:
        add("c.ts IS NOT NULL")
    if filters.author:
        # the item's author, or one of a chat window's authors (a facet: one index range, as for participants)
        likes = author_patterns(filters.authors or (filters.author,))
        author = " OR ".join(["c.author LIKE ? ESCAPE '\\'"] * len(likes))
        wrote = "f.name = 'meta.authors' AND (" + " OR ".join(["f.value LIKE ? ESCAPE '\\'"] * len(likes)) + ")"
        add(f"({author} OR {_facet_in(wrote)})", *likes, *likes, row=f"({author} OR {_facet_of_row(wrote)})")
    for alternatives in filters.people or tuple((p,) for p in filters.participants):
        likes = [pattern for a in alternatives for pattern in like_patterns(a)]
        who = " OR ".join(["f.value LIKE ? ESCAPE '\\'"] * len(likes))
        author = " OR ".join(["c.author LIKE ? ESCAPE '\\'"] * len(likes))
        participant = f"f.name = 'participant' AND ({who})"
        add(f"({_facet_in(participant)} OR {author})", *likes, *likes,
            row=f"({_facet_of_row(participant)} OR {author})")
    for tag in filters.tags:
        t = tag.strip().lstrip("#").lower()
        # '#a' matches 'a' and nested 'a/...': the range ('a/', 'a0') holds exactly the strings 'a/...'.
        # Two index ranges, not one OR: with the OR SQLite reads every tag row (234 ms for a 2% tag at 1M chunks).
        add_facet("SELECT f.chunk_id FROM chunk_facets f WHERE f.name = 'tag' AND f.value = ? UNION ALL "
                  "SELECT f.chunk_id FROM chunk_facets f WHERE f.name = 'tag' AND f.value > ? AND f.value < ?",
                  t, t + "/", t + "0", row="f.name = 'tag' AND (f.value = ? OR (f.value > ? AND f.value < ?))")
    if filters.path_prefix:
        prefix = _expand_path(filters.path_prefix)
        sql = "(substr(i.uri, 1, ?) = ? OR substr(i.key, 1, ?) = ?)"
        add(sql, len(prefix), prefix, len(filters.path_prefix), filters.path_prefix, item=sql)
    for key, accepted in sorted(filters.metadata.items()):
        values = [_facet_value(v) for v in (accepted if isinstance(accepted, (list, tuple)) else [accepted])]
        condition = f"f.name = ? AND f.value IN ({_marks(values)})"
        add_facet(f"SELECT f.chunk_id FROM chunk_facets f WHERE {condition}", f"meta.{key}", *values, row=condition)
    ids_sql = None
    if facet_queries and not others:
        ids_sql = " INTERSECT ".join(f"SELECT * FROM ({q})" for q in facet_queries)
    item_sql = " AND ".join(item_parts) if item_parts and None not in item_parts else None
    return SqlFilter(" AND ".join(parts) or "1", tuple(params), ids_sql, " AND ".join(row_parts) or "1", item_sql)


def _facet_of_row(condition: str) -> str:
    """The chunk `c` holds a facet meeting the condition, looked up among its own few facets. Left to itself
    the planner walks the by-value index over every row of the facet's name (all tags: 1.8 s to check 400 chunks
    at 100k; 0.5 ms forced)."""
    return f"EXISTS (SELECT 1 FROM chunk_facets f INDEXED BY chunk_facets_by_chunk WHERE f.chunk_id = c.id AND {condition})"


def passing(conn: Any, chunk_ids: list[int], where: SqlFilter) -> set[int]:
    """The chunk ids among `chunk_ids` that satisfy the filter."""
    if not chunk_ids:
        return set()
    sql = (
        "SELECT c.id FROM chunks c JOIN items i ON i.id = c.item_id "
        f"WHERE c.id IN (SELECT value FROM json_each(?)) AND {where.for_rows}"
    )
    return {r[0] for r in conn.execute(sql, (json.dumps(chunk_ids), *where.params))}


def author_patterns(alternatives: tuple[str, ...]) -> list[str]:
    """LIKE patterns of an author term: the term itself anywhere (`--from` has always meant "contains"), the names
    and ids the people directory adds for it as `--with` matches them (names at word starts, ids anywhere)."""
    first, rest = alternatives[0], [a for a in alternatives[1:] if alternatives[0].lower() not in a.lower()]
    return list(dict.fromkeys([f"%{_like_escape(first)}%", *(p for a in rest for p in like_patterns(a))]))


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

_RELATIVE = re.compile(r"^(\d+)\s*(h|d|w|m|y|hours?|days?|weeks?|months?|years?)(\s+ago)?$")
_PERIOD = re.compile(r"^(this|last|past|previous)\s+(week|month|year)$")
_UNIT_DAYS = {"h": 1 / 24, "d": 1, "w": 7, "m": 30, "y": 365}
DATE_FORMS = ("YYYY, YYYY-MM, YYYY-MM-DD, an ISO date-time, 7d / 2w / 3m / 1y / 12h, '3 days ago', today, "
              "yesterday, 'this week', 'last month', 'last year'")


def parse_date(value: str | int | None, *, end: bool = False, now: datetime | None = None) -> int | None:
    """A date as a user writes it → unix seconds.

    Absolute: '2024', '2024-03', '2024-03-05', an ISO datetime (UTC unless it says). Relative to now: '7d',
    '2w', '3m', '1y', '12h', '3 days ago'; named periods in local time: 'today', 'yesterday', 'this week',
    'last week', 'this month', 'last month', 'this year', 'last year' (weeks start on Monday).
    With end=True a date or period means its end (an inclusive upper bound: `--before 2024` = end of 2024,
    `--before 'last week'` = Sunday night of last week).
    """
    if value is None or value == "":
        return None
    if isinstance(value, int):
        return value
    text = " ".join(value.strip().lower().removeprefix("since ").split())
    now = now or datetime.now(timezone.utc)
    rel = _RELATIVE.match(text)
    if rel:
        return int((now - timedelta(days=_relative_days(value, rel))).timestamp())
    period = _named_period(text, now)
    if period:
        return int((period[1] if end else period[0]).timestamp())
    text = value.strip()
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
        raise QueryError(f"Cannot read the date {quote(value)}. Use {DATE_FORMS}.") from exc


def _relative_days(value: str, rel: re.Match) -> float:
    """The days a relative date ('7d', '3 months ago') reaches back; at most MAX_DAYS."""
    digits, unit = rel.group(1), rel.group(2)[0]
    days = _UNIT_DAYS[unit] * int(digits) if len(digits) <= 9 else float("inf")
    if days > MAX_DAYS:
        raise QueryError(f"The date {quote(value)} reaches back more than {MAX_DAYS:,} days (about 1,000 years). "
                         "For older items give a year, e.g. 1850, or leave the date out.")
    return days


def _ts(d: datetime) -> int:
    if d.tzinfo is None:
        d = d.replace(tzinfo=timezone.utc)
    return int(d.timestamp())


def _named_period(text: str, now: datetime) -> tuple[datetime, datetime] | None:
    """(first second, last second) of today / yesterday / this or last week, month, year, in local time."""
    local = now.astimezone()
    day = local.replace(hour=0, minute=0, second=0, microsecond=0)
    if text in ("today", "yesterday"):
        start = day - timedelta(days=1 if text == "yesterday" else 0)
        return start, start + timedelta(days=1, seconds=-1)
    m = _PERIOD.match(text)
    if not m:
        return None
    back, unit = m.group(1) != "this", m.group(2)
    if unit == "week":
        start = day - timedelta(days=day.weekday()) - timedelta(weeks=1 if back else 0)
        return start, start + timedelta(weeks=1, seconds=-1)
    if unit == "month":
        start = day.replace(day=1)
        if back:
            start = (start - timedelta(days=1)).replace(day=1)
        following = (start + timedelta(days=32)).replace(day=1)
        return start, following - timedelta(seconds=1)
    start = day.replace(month=1, day=1)
    if back:
        start = start.replace(year=start.year - 1)
    return start, start.replace(year=start.year + 1) - timedelta(seconds=1)


def check_filters(filters: Filters) -> Filters:
    """The filters, or QueryError naming the first one with too many values or too long a value."""
    many = {"collections": filters.collections, "source types": filters.source_types, "tags": filters.tags,
            "participants": filters.participants, "metadata keys": tuple(filters.metadata)}
    many |= {f"values of metadata key {quote(k, 40)}": tuple(v) for k, v in filters.metadata.items()
             if isinstance(v, (list, tuple))}
    for what, values in many.items():
        if len(values) > MAX_FILTER_VALUES:
            raise QueryError(f"{len(values):,} {what} given; one search combines at most {MAX_FILTER_VALUES}. "
                             "Use fewer, or search several times.")
        for value in values:
            _check_value(what, value)
    for value in (filters.author, *(v for v in filters.metadata.values() if not isinstance(v, (list, tuple)))):
        _check_value("filter values", value)
    if filters.path_prefix and (len(filters.path_prefix) > MAX_PATH_CHARS or "\x00" in filters.path_prefix):
        raise QueryError(f"The path prefix must be a path of at most {MAX_PATH_CHARS:,} characters, without NUL "
                         "characters.")
    return filters


def _check_value(what: str, value: object) -> None:
    if value is not None and len(str(value)) > MAX_VALUE_CHARS:
        raise QueryError(f"One of the {what} is {len(str(value)):,} characters long; filter values have at most "
                         f"{MAX_VALUE_CHARS}.")
