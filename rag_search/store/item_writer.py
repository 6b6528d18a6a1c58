"""Writing items: embed their chunks through the cache, then one transaction per item.

Chunks are embedded in small groups and every item is written as soon as its group's vectors exist, and
new vectors go to the cache group by group: a killed run loses at most two groups of work (seconds),
and a restart finds the rest written or cached.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np

from rag_search.embedders.base import Embedder, Progress
from rag_search.embedders.cached import lookup
from rag_search.records import Chunk, Fingerprint, ItemRef
from rag_search.store import Store, writes
from rag_search.store.cache import cache_vectors

GROUP_CHUNKS = 128  # chunks embedded between writes: ~1.5 s of the builtin model on 2 cores (fewer, shorter tails)


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
class _Group:
    """Items whose chunks are being embedded: cached vectors in hand, the rest on the embedding thread."""

    items: list[ParsedItem]
    hashes: list[str]
    have: dict[str, np.ndarray]
    todo: dict[str, str]  # hash → text, for the model
    fresh: list[tuple[list[str], Future]]  # (hashes, their vectors to come), group_chunks texts each


@dataclass
class ItemWriter:
    """Collects parsed items, embeds their chunks in groups, writes each item once its vectors exist.

    A group is embedded on a thread of its own while this thread parses the next items and writes the
    previous group (the model lets go of the GIL): at most two groups are in flight. The store is only
    touched from the calling thread.
    """

    store: Store
    embedder: Embedder
    on_written: Callable[[ParsedItem], None] | None = None
    progress: Progress | None = None  # hears chunks just embedded (on the embedding thread) or found cached
    group_chunks: int = GROUP_CHUNKS
    stats: WriteStats = field(default_factory=WriteStats)
    _pending: list[ParsedItem] = field(default_factory=list)
    _pending_chunks: int = 0
    _inflight: _Group | None = None
    _thread: ThreadPoolExecutor | None = None

    def add(self, item: ParsedItem) -> None:
        self._pending.append(item)
        self._pending_chunks += len(item.chunks)
        if self._pending_chunks >= self.group_chunks:
            previous, self._inflight = self._inflight, self._start()
            if previous is not None:
                self._write(previous)

    def flush(self) -> None:
        """Embed and write everything added so far (waits for it)."""
        previous, self._inflight = self._inflight, None
        try:
            if previous is not None:
                self._write(previous)
            group = self._start()
            if group is not None:
                self._write(group)
        finally:
            self.close()

    def close(self) -> None:
        """Stop without writing what is not written yet (after an error: the next run redoes it)."""
        self._inflight, self._pending, self._pending_chunks = None, [], 0
        if self._thread is not None:
            self._thread.shutdown(wait=False, cancel_futures=True)
            self._thread = None

    def _start(self) -> _Group | None:
        items, self._pending, self._pending_chunks = self._pending, [], 0
        if not items:
            return None
        self.store.bind_embedder(self.embedder.id, self.embedder.dimensions)
        t0 = time.perf_counter()
        texts = [ch.vector_text for item in items for ch in item.chunks]
        hashes, have, todo = lookup(self.store, self.embedder, texts, self.progress)
        if todo and self._thread is None:
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="embed-group")
        keys, fresh = list(todo), []
        for start in range(0, len(keys), self.group_chunks):  # one big item: cached part by part
            part = keys[start : start + self.group_chunks]
            fresh.append((part, self._thread.submit(self.embedder.embed_documents, [todo[h] for h in part],
                                                    progress=self.progress)))
        self.stats.seconds_embedding += time.perf_counter() - t0
        return _Group(items, hashes, have, todo, fresh)

    def _write(self, group: _Group) -> None:
        t0 = time.perf_counter()
        for part, vectors in group.fresh:
            pairs = list(zip(part, vectors.result()))
            cache_vectors(self.store, self.embedder.id, pairs)  # a killed run finds them
            group.have.update(pairs)
        t1 = time.perf_counter()
        self.stats.seconds_embedding += t1 - t0  # waiting for the model: the part not hidden behind parsing
        offset = 0
        for item in group.items:
            n = len(item.chunks)
            vecs = np.stack([group.have[h] for h in group.hashes[offset : offset + n]]).astype(np.float32, copy=False)
            writes.replace_item(self.store, item.ref, item.fingerprint, item.title, item.chunks, vecs, item.links,
                                item.text)
            offset += n
            if self.on_written:
                self.on_written(item)
        self.stats.items += len(group.items)
        self.stats.chunks += len(group.hashes)
        self.stats.embedded += len(group.todo)
        self.stats.seconds_writing += time.perf_counter() - t1


def write_items(store: Store, embedder: Embedder, items: Iterable[ParsedItem],
                progress: Progress | None = None) -> WriteStats:
    """Embed and write items (each in its own transaction, as soon as its vectors exist)."""
    writer = ItemWriter(store, embedder, progress=progress)
    try:
        for item in items:
            writer.add(item)
        writer.flush()
    finally:
        writer.close()
    return writer.stats
