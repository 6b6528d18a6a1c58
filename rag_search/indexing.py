"""Writing items: embed their chunks through the cache, then one transaction per item.

Chunks are embedded in small groups and every item is written as soon as its last vector exists, and
new vectors go to the cache group by group: a killed run loses at most one group of work (seconds),
and a restart finds the rest written or cached.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np

from rag_search.embedders.base import Embedder, Progress
from rag_search.embedders.cached import embed_texts
from rag_search.records import Chunk, Fingerprint, ItemRef
from rag_search.store import Store, writes

GROUP_CHUNKS = 32  # chunks embedded between writes: ~1–2 s of the builtin model on 2 cores


@dataclass(frozen=True)
class ParsedItem:
    """An item ready to write: its chunks and what identifies its source version."""

    ref: ItemRef
    fingerprint: Fingerprint | None
    title: str
    chunks: Sequence[Chunk]
    links: Sequence[str] = ()
    text: str | None = None  # the item as written, stored for rag_get_document (None: not stored)


@dataclass
class WriteStats:
    items: int = 0
    chunks: int = 0
    embedded: int = 0  # texts that reached the model (the rest came from the cache)
    seconds_embedding: float = 0.0
    seconds_writing: float = 0.0


@dataclass
class ItemWriter:
    """Collects parsed items, embeds their chunks in groups, writes each item once its vectors exist."""

    store: Store
    embedder: Embedder
    on_written: Callable[[ParsedItem], None] | None = None
    progress: Progress | None = None  # called with the number of chunks just embedded (or found cached)
    group_chunks: int = GROUP_CHUNKS
    stats: WriteStats = field(default_factory=WriteStats)
    _pending: list[ParsedItem] = field(default_factory=list)
    _pending_chunks: int = 0

    def add(self, item: ParsedItem) -> None:
        self._pending.append(item)
        self._pending_chunks += len(item.chunks)
        if self._pending_chunks >= self.group_chunks:
            self.flush()

    def flush(self) -> None:
        items, self._pending, self._pending_chunks = self._pending, [], 0
        if not items:
            return
        self.store.bind_embedder(self.embedder.id, self.embedder.dimensions)
        texts = [ch.vector_text for item in items for ch in item.chunks]
        t0 = time.perf_counter()
        parts, embedded = [], 0
        for start in range(0, len(texts), self.group_chunks):  # one big item: cached group by group
            vecs, fresh = embed_texts(self.store, self.embedder, texts[start : start + self.group_chunks], self.progress)
            parts.append(vecs)
            embedded += fresh
        t1 = time.perf_counter()
        whole = np.concatenate(parts) if parts else np.zeros((0, self.embedder.dimensions), dtype=np.float32)
        offset = 0
        for item in items:
            n = len(item.chunks)
            vecs = whole[offset : offset + n]
            writes.replace_item(self.store, item.ref, item.fingerprint, item.title, item.chunks, vecs, item.links,
                                item.text)
            offset += n
            if self.on_written:
                self.on_written(item)
        self.stats.items += len(items)
        self.stats.chunks += len(texts)
        self.stats.embedded += embedded
        self.stats.seconds_embedding += t1 - t0
        self.stats.seconds_writing += time.perf_counter() - t1


def write_items(store: Store, embedder: Embedder, items: Iterable[ParsedItem],
                progress: Progress | None = None) -> WriteStats:
    """Embed and write items (each in its own transaction, as soon as its vectors exist)."""
    writer = ItemWriter(store, embedder, progress=progress)
    for item in items:
        writer.add(item)
    writer.flush()
    return writer.stats
