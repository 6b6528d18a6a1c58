"""Record types shared by the pipelines and the search side: item → document → chunk → hit."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any


def text_hash(text: str) -> str:
    """Content identity of a text: what the embedding cache and chunk rows are keyed by."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Fingerprint:
    """How an item on disk is recognised as unchanged: size + mtime fast path, sha256 to be sure."""

    size: int | None
    mtime_ns: int | None
    sha256: str | None
    stamp: str | None = None  # the source's change stamp; size:mtime for files when not given

    @property
    def change_stamp(self) -> str | None:
        if self.stamp is not None:
            return self.stamp
        return f"{self.size}:{self.mtime_ns}" if self.size is not None and self.mtime_ns is not None else None


@dataclass(frozen=True)
class ItemRef:
    """One indexable unit (a file, a message) of a collection."""

    collection: str
    key: str  # stable within the collection; the Dagster partition key
    uri: str  # absolute path or URI, what a user can open
    source_type: str  # markdown, pdf, docx, email, ...
    source: str | None = None  # which source of the collection (its label or type)


@dataclass(frozen=True)
class Section:
    """A stretch of a document's text under one heading path (or on one page)."""

    text: str
    heading_path: tuple[str, ...] = ()
    page: int | None = None


@dataclass(frozen=True)
class Document:
    """A parsed item: its text in sections plus what is known about it."""

    title: str
    sections: tuple[Section, ...]
    ts: int | None = None  # unix seconds, UTC
    author: str | None = None
    participants: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    links: tuple[str, ...] = ()  # targets of links to other items (e.g. wikilinks)
    text: str | None = None  # the item as written (a note's Markdown), when the parser keeps it; else built from sections


@dataclass(frozen=True)
class Chunk:
    """A piece of a document small enough for the embedder's input window."""

    index: int
    text: str
    title: str = ""
    heading_path: tuple[str, ...] = ()
    page: int | None = None
    ts: int | None = None
    author: str | None = None
    participants: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    embed_text: str | None = None  # what the vector is made from when it is not `text` (file-path ingest)
    keywords: str = ""  # words it is found by but never shows: split code identifiers (parseConfig → parse config)
    tokens: int | None = None  # the embedder's tokens in vector_text, when the chunker counted them on the way

    @property
    def vector_text(self) -> str:
        return self.text if self.embed_text is None else self.embed_text

    @property
    def content_hash(self) -> str:
        return text_hash(self.vector_text)


@dataclass(frozen=True)
class Hit:
    """One search result: a chunk with where it came from and why it ranked."""

    chunk_id: int
    item_id: int
    collection: str
    source_type: str
    key: str
    uri: str
    title: str
    text: str
    snippet: str
    chunk_index: int
    heading_path: tuple[str, ...]
    page: int | None
    ts: int | None
    author: str | None
    tags: tuple[str, ...]
    metadata: dict[str, Any]
    score: float
    vector_rank: int | None = None  # ranks of this chunk in the vector and the chunk keyword ranking
    keyword_rank: int | None = None
    item_ranks: dict[str, int] = field(default_factory=dict)  # the item's rank per retriever (vector, keyword, ...)
    sections: tuple[dict[str, Any], ...] = ()  # the item's other matching chunks: chunk_index, heading, page
    rerank_score: float | None = None
    # "changed" | "deleted": its source differs from what was indexed; "unchecked": its source cannot be seen from
    # here (rag_search.retrieval.stale)
    stale: str | None = None
    relevance: float | None = None  # 0..1, comparable across queries (rag_search.retrieval.relevance)

    def also_matches(self) -> list[str]:
        """The other matching sections by name, each once, not the hit's own: the heading, else the page, else
        the passage's position (several passages under one heading are one section to a reader)."""
        own = " > ".join(self.heading_path)
        labels = (s["heading"] or (f"page {s['page']}" if s.get("page") is not None else f"passage {s['chunk_index'] + 1}")
                  for s in self.sections)
        return [label for label in dict.fromkeys(labels) if label != own]

    def to_dict(self) -> dict[str, Any]:
        return {
            "chunk_id": self.chunk_id,
            "item_id": self.item_id,
            "collection": self.collection,
            "source_type": self.source_type,
            "key": self.key,
            "uri": self.uri,
            "title": self.title,
            "chunk_index": self.chunk_index,
            "heading_path": list(self.heading_path),
            "page": self.page,
            "timestamp": iso_utc(self.ts),
            "author": self.author,
            "tags": list(self.tags),
            "metadata": self.metadata,
            "score": round(self.score, 6),
            "vector_rank": self.vector_rank,
            "keyword_rank": self.keyword_rank,
            "item_ranks": self.item_ranks,
            "rerank_score": None if self.rerank_score is None else round(self.rerank_score, 6),
            "relevance": None if self.relevance is None else round(self.relevance, 3),
            "stale": self.stale,
            "sections": list(self.sections),
            "snippet": self.snippet,
            "text": self.text,
        }


def chunk_body(text: str, title: str) -> str:
    """A chunk's text without its context line (title > headings) that the chunker puts first."""
    if title and text.startswith(title) and "\n\n" in text:
        return text.split("\n\n", 1)[1]
    return text


def iso_utc(ts: int | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat().replace("+00:00", "Z")


def dumps(value: Any) -> str:
    """Compact, stable JSON for columns."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)
