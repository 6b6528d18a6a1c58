"""A search from the page's query string: its parameters as Filters, the engine's answer as hits to draw.

The parameters are the form's fields, so `/?q=words&collection=notes&after=7d` is a bookmarkable results page:
q, mode, collection (repeatable), type (repeatable), after, before, tag (repeatable), person (repeatable), top.
The search itself is the library's (SearchEngine, people resolution, the CLI's bounds); nothing here ranks. Word
statistics are those of the collections the principal may see (SearchRequest.scope). Hits whose relevance is below
search.weaker_below are folded away as weaker matches; when none is above it, the page says nothing was found.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from markupsafe import Markup, escape

from rag_search.retrieval.bounds import MAX_TOP_K, check_query
from rag_search.retrieval.filters import check_filters
from rag_search.errors import NotFound, QueryError, RagError
from rag_search.people import resolve_filters
from rag_search.records import Hit
from rag_search.retrieval import Filters, SearchRequest, parse_date
from rag_search.retrieval.engine import MODES
from rag_search.retrieval.relevance import search_with_relevance
from rag_search.retrieval.snippets import MARK_OPEN
from rag_search.web.backend import Backend

DEFAULT_TOP = 20
MAX_PARTICIPANTS_SHOWN = 6


@dataclass(frozen=True)
class Query:
    """The form as submitted (strings as typed, so the page can show them back)."""

    q: str = ""
    mode: str = "hybrid"
    collections: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    after: str = ""
    before: str = ""
    tags: tuple[str, ...] = ()
    people: tuple[str, ...] = ()
    top: int = DEFAULT_TOP

    @classmethod
    def from_params(cls, params) -> Query:
        """From a query string (starlette QueryParams or a dict of lists); unknown keys are ignored."""
        def many(key: str) -> tuple[str, ...]:
            return tuple(dict.fromkeys(v.strip() for v in params.getlist(key) if v.strip()))

        mode = params.get("mode") or "hybrid"
        if mode not in MODES:
            raise QueryError(f"Unknown mode '{mode[:40]}'. Use one of: {', '.join(MODES)}.")
        try:
            top = int(params.get("top") or DEFAULT_TOP)
        except ValueError:
            raise QueryError(f"top must be a number from 1 to {MAX_TOP_K}.") from None
        return cls(q=(params.get("q") or "").strip(), mode=mode, collections=many("collection"), types=many("type"),
                   after=(params.get("after") or "").strip(), before=(params.get("before") or "").strip(),
                   tags=many("tag"), people=many("person"), top=max(1, min(top, MAX_TOP_K)))

    def filters(self) -> Filters:
        return Filters(collections=self.collections, source_types=self.types, date_from=parse_date(self.after or None),
                       date_to=parse_date(self.before or None, end=True), participants=self.people, tags=self.tags)

    @property
    def filtered(self) -> bool:
        return bool(self.collections or self.types or self.after or self.before or self.tags or self.people)


@dataclass
class Answer:
    """What the results part of the page draws."""

    query: Query
    hits: list[dict[str, Any]] = field(default_factory=list)
    weaker: list[dict[str, Any]] = field(default_factory=list)  # below the floor: folded away
    ms: float = 0.0
    error: str | None = None
    empty_index: bool = False


def search(backend: Backend, query: Query, allowed: frozenset[str] | None) -> Answer:
    """Run the query within the collections the principal may see; a bad filter is an error on the page."""
    answer = Answer(query)
    if not query.q:
        return answer
    t0 = time.perf_counter()
    try:
        filters = _scoped(query.filters(), allowed, _existing(backend))
        if filters is None:  # only collections of theirs that are not indexed yet
            answer.empty_index = True
            return answer
        filters = resolve_filters(check_filters(filters), backend.people)
        scope = None if allowed is None else tuple(sorted(allowed))
        result = search_with_relevance(backend.engine, SearchRequest(check_query(query.q), top_k=query.top,
                                                                     mode=query.mode, filters=filters, scope=scope))
    except RagError as exc:  # a bad filter, a collection not shared, an index built by another embedder
        answer.error = str(exc)
        return answer
    answer.ms = (time.perf_counter() - t0) * 1000
    answer.empty_index = result.chunks_in_index == 0
    people = _participants(backend, [h.chunk_id for h in result.hits])
    floor = backend.engine.settings.weaker_below
    for h in result.hits:
        shown = answer.hits if (h.relevance or 0.0) >= floor else answer.weaker
        shown.append(hit_view(h, people.get(h.chunk_id, [])))
    return answer


def _scoped(filters: Filters, allowed: frozenset[str] | None, existing: set[str]) -> Filters | None:
    """The filters narrowed to the allowed collections that are indexed (None: none of those asked for is yet);
    naming another one is 'no such collection'."""
    if allowed is None:
        return filters
    for name in filters.collections:
        if name not in allowed:
            raise NotFound(f"No collection named '{name[:80]}'. Pick one from the list.")
    if not allowed:
        raise NotFound("No collection is shared with you yet. Ask the owner of this index to share one.")
    names = tuple(n for n in (filters.collections or sorted(allowed)) if n in existing)
    return Filters(**{**filters.__dict__, "collections": names}) if names else None


def _existing(backend: Backend) -> set[str]:
    with backend.store.lock:
        return {r[0] for r in backend.store.conn.execute("SELECT name FROM collections")}


def _participants(backend: Backend, chunk_ids: list[int]) -> dict[int, list[str]]:
    if not chunk_ids:
        return {}
    with backend.store.lock:
        rows = backend.store.conn.execute("SELECT id, participants FROM chunks WHERE id IN (SELECT value FROM "
                                          "json_each(?))", (json.dumps(chunk_ids),)).fetchall()
    return {r[0]: json.loads(r[1]) for r in rows}


def hit_view(hit: Hit, participants: list[str]) -> dict[str, Any]:
    """One result as the template shows it: the item, its best passage marked, where else it matches."""
    others = [p for p in participants if p != hit.author]
    return {
        "item_id": hit.item_id, "chunk": hit.chunk_index, "title": hit.title or hit.key, "kind": hit.source_type,
        "key": hit.key, "relevance": hit.relevance,
        "collection": hit.collection, "uri": hit.uri, "date": local_date(hit.ts),
        "heading": " › ".join(hit.heading_path), "page": hit.page, "author": hit.author,
        "participants": others[:MAX_PARTICIPANTS_SHOWN], "more_participants": max(0, len(others) - MAX_PARTICIPANTS_SHOWN),
        "snippet": marked(hit.snippet), "tags": list(hit.tags), "sections": _sections(hit),
    }


def _sections(hit: Hit) -> list[dict[str, Any]]:
    """The item's other matching sections, each once, with the chunk to open it at."""
    own, seen, out = " > ".join(hit.heading_path), set(), []
    for s in hit.sections:
        label = s["heading"] or (f"page {s['page']}" if s.get("page") is not None else f"passage {s['chunk_index'] + 1}")
        if label != own and label not in seen:
            seen.add(label)
            out.append({"label": label.replace(" > ", " › "), "chunk": s["chunk_index"]})
    return out


def marked(snippet: str) -> Markup:
    """The snippet escaped, its match marks (**word**: one marker opens and closes) as <mark>."""
    parts = str(escape(snippet)).split(MARK_OPEN)
    out, inside = [parts[0]], False
    for part in parts[1:]:
        out.append("</mark>" if inside else "<mark>")
        out.append(part)
        inside = not inside
    if inside:
        out.append("</mark>")
    return Markup("".join(out))


def local_date(ts: int | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M").removesuffix(" 00:00")
