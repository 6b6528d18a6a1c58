"""Writing items: embed their chunks through the cache, then one transaction per item.

Chunks are embedded in small groups and every item is written as soon as its last vector exists, and
new vectors go to the cache group by group: a killed run loses at most two groups of work (seconds),
and a restart finds the rest written or cached.

With `ahead`, the model runs in a worker thread one group ahead: while it embeds group N (onnxruntime releases
the GIL) the caller parses the next items and writes group N-1 with its listeners' bookkeeping. Writes and
listeners stay in the caller's thread, in the order the items came. It is off by default: on 2 cores the caller's
Python work (Dagster's per-item events, ~9 ms of CPU each) competes with onnxruntime's two threads, and 2,000
notes indexed in 86 s instead of 69 s (embedding inside the run 45 -> 83 s; bench/pipeline.py).
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np

from rag_search.embedders.base import Embedder, Progress
from rag_search.records import Chunk, Fingerprint, ItemRef, text_hash
from rag_search.store import Store, writes
from rag_search.store.cache import cache_vectors, cached_vectors

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
    ahead: bool = False  # embed the next group in a worker thread while this one is written (see above)
    stats: WriteStats = field(default_factory=WriteStats)
    _pending: list[ParsedItem] = field(default_factory=list)
    _pending_chunks: int = 0
    _inflight: _Group | None = None
    _worker: ThreadPoolExecutor | None = None

    def add(self, item: ParsedItem) -> None:
        self._pending.append(item)
        self._pending_chunks += len(item.chunks)
        if self._pending_chunks >= self.group_chunks:
            self._submit()

    def flush(self) -> None:
        """Embed and write everything added so far; returns when it is written."""
        try:
            self._submit()
            self._write_inflight()
        finally:
            self.close()

    def close(self) -> None:
        """Stop the worker (after an error: the group it embeds is dropped, its cached groups stay cached)."""
        if self._worker is not None:
            self._worker.shutdown(wait=True, cancel_futures=True)
            self._worker = None

    def _submit(self) -> None:
        """Start embedding the pending items, then write the group embedded before them."""
        items, self._pending, self._pending_chunks = self._pending, [], 0
        if not items:
            return
        self.store.bind_embedder(self.embedder.id, self.embedder.dimensions)
        group = self._start(items)
        try:
            self._write_inflight()
        finally:
            self._inflight = group
        if not self.ahead:
            self._write_inflight()

    def _start(self, items: list[ParsedItem]) -> _Group:
        """Vectors from the cache now; the rest handed to the model (the worker thread), group by group."""
        texts = [ch.vector_text for item in items for ch in item.chunks]
        hashes = [text_hash(t) for t in texts]
        have = cached_vectors(self.store, self.embedder.id, hashes)
        todo = {h: t for h, t in zip(hashes, texts) if h not in have}
        if self.progress and len(texts) - len(todo):
            self.progress(len(texts) - len(todo))
        group = _Group(items, hashes, have)
        pairs = list(todo.items())
        for start in range(0, len(pairs), self.group_chunks):  # one big item: cached group by group
            part = pairs[start : start + self.group_chunks]
            group.parts.append(([h for h, _ in part], self._run_model([t for _, t in part])))
        return group

    def _run_model(self, texts: list[str]) -> Future:
        if not self.ahead:
            done: Future = Future()
            t0 = time.perf_counter()
            done.set_result((self.embedder.embed_documents(texts, progress=self.progress), time.perf_counter() - t0))
            return done
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed")
        return self._worker.submit(self._timed_embed, texts)

    def _timed_embed(self, texts: list[str]) -> tuple[np.ndarray, float]:
        t0 = time.perf_counter()
        return self.embedder.embed_documents(texts, progress=self.progress), time.perf_counter() - t0

    def _write_inflight(self) -> None:
        group, self._inflight = self._inflight, None
        if group is None:
            return
        for hashes, future in group.parts:  # each part is cached as soon as it is embedded
            vecs, seconds = future.result()
            pairs = list(zip(hashes, vecs))
            cache_vectors(self.store, self.embedder.id, pairs)
            group.have.update(pairs)
            self.stats.embedded += len(hashes)
            self.stats.seconds_embedding += seconds
        t1 = time.perf_counter()
        offset = 0
        for item in group.items:
            n = len(item.chunks)
            vecs = np.stack([group.have[h] for h in group.hashes[offset : offset + n]]).astype(np.float32, copy=False) \
                if n else np.zeros((0, self.embedder.dimensions), dtype=np.float32)
            writes.replace_item(self.store, item.ref, item.fingerprint, item.title, item.chunks, vecs, item.links,
                                item.text)
            offset += n
            if self.on_written:
                self.on_written(item)
        self.stats.items += len(group.items)
        self.stats.chunks += offset
        self.stats.seconds_writing += time.perf_counter() - t1


@dataclass
class _Group:
    """Items on their way: their chunks' text hashes, the vectors known so far, the model's work still running."""

    items: list[ParsedItem]
    hashes: list[str]
    have: dict[str, np.ndarray]
    parts: list[tuple[list[str], Future]] = field(default_factory=list)


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
