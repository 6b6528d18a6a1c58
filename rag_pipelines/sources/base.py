"""The Source protocol: which items a source holds (a cheap scan) and how to read them (load).

A source is anything that holds items: a folder of files, a mail store, an ebook library, a feed
reader's database. The pipelines (Dagster asset, sensor, sync job, `local-rag index`, status, checks)
know only this protocol:

    scan()      → ScanResult: {key: Stamp(change stamp, uri)} for every item, without reading contents;
                  raises SourceUnavailable when the source cannot be read *at all* (missing, locked,
                  corrupt), so nothing already indexed from it is deleted.
    load(keys)  → one Loaded per key: its content hash and a parse() that yields the Document, or an
                  error (kind, message) recorded as a failed item, or `gone` when it vanished.

Stamps are opaque strings compared for equality (size:mtime for files, a modification date or row
version for database rows). The content hash decides whether a changed stamp is a changed item.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, ClassVar, Iterator, Protocol, Sequence, runtime_checkable

from rag_search.errors import RagError
from rag_search.records import Document

INGEST_STRATEGIES = ("chunked", "whole-document", "file-path")


class SourceUnavailable(RagError):
    """The whole source cannot be read now (missing, locked, corrupt, unexpected schema).

    The run skips the source and keeps everything already indexed from it; the message names the
    path and the next step.
    """


@dataclass(frozen=True)
class Stamp:
    """What a scan knows of an item without reading it."""

    value: str  # cheap change stamp, compared for equality
    uri: str  # where the item lives: a path, a message URI, a book file; shown and cited


@dataclass
class ScanResult:
    """Every item a source holds now, plus items it could see but not list properly (problems)."""

    items: dict[str, Stamp] = field(default_factory=dict)
    problems: dict[str, tuple[str, str]] = field(default_factory=dict)  # key → (kind, message): recorded failed


@dataclass(frozen=True)
class Loaded:
    """One item read from its source: identity of its content and how to turn it into a Document."""

    key: str
    uri: str
    source_type: str  # markdown, pdf, email, book, article, ...
    stamp: str = ""
    content_hash: str | None = None  # sha256 of what the document is made from; None = always re-parse
    parse: Callable[[], Document] | None = None  # raises ParseError for a bad item
    error: tuple[str, str] | None = None  # (kind, message) when it could not be read at all
    gone: bool = False  # vanished since the scan: leaves the index quietly
    plain: bool = False  # chunk as plain-text windows rather than by structure
    chunker: Callable | None = None  # (document, count_tokens, ChunkSpec) → chunks, instead of chunk_document
    size: int | None = None
    mtime_ns: int | None = None


@runtime_checkable
class Source(Protocol):
    """One configured source of a collection."""

    type: ClassVar[str]
    label: str | None  # prefixes keys when a collection has several sources

    def scan(self) -> ScanResult: ...

    def load(self, keys: Sequence[str]) -> Iterator[Loaded]: ...

    def owns(self, key: str) -> bool:
        """Whether a key (as stored in the index) belongs to this source."""
        ...

    def same_content(self, key: str, sha256: str | None) -> bool:
        """Cheap re-check for a changed stamp (files hash the bytes); False = treat as changed."""
        ...

    def watch_paths(self) -> list:
        """Folders or files whose changes the watcher should report (may be empty)."""
        ...


class BaseSource:
    """Defaults for the optional parts of the protocol, and label-prefixed keys."""

    type: ClassVar[str] = ""

    def __init__(self, label: str | None = None):
        self.label = label

    def key(self, local: str) -> str:
        return f"{self.label}/{local}" if self.label else local

    def local(self, key: str) -> str:
        return key[len(self.label) + 1 :] if self.label and key.startswith(self.label + "/") else key

    def owns(self, key: str) -> bool:
        return not self.label or key.startswith(self.label + "/")

    def same_content(self, key: str, sha256: str | None) -> bool:
        return False

    def watch_paths(self) -> list:
        return []
