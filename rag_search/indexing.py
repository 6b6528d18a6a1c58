"""Writing items: embed their chunks through the cache (shared batches), then one transaction per item."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterable, Sequence

from rag_search.embedders.base import Embedder, Progress
from rag_search.embedders.cached import embed_texts
from rag_search.records import Chunk, Fingerprint, ItemRef
from rag_search.store import Store, writes


@dataclass(frozen=True)
class ParsedItem:
    """An item ready to write: its chunks and what identifies its source version."""

    ref: ItemRef
    fingerprint: Fingerprint | None
    title: str
    chunks: Sequence[Chunk]
    links: Sequence[str] = ()


@dataclass(frozen=True)
class WriteStats:
    items: int
    chunks: int
    embedded: int  # texts that reached the model (the rest came from the cache)
    seconds_embedding: float = 0.0
    seconds_writing: float = 0.0


def write_items(store: Store, embedder: Embedder, items: Iterable[ParsedItem],
                progress: Progress | None = None) -> WriteStats:
    """Embed the chunks of many items in shared batches, then write each item in its own transaction."""
    items = list(items)
    store.bind_embedder(embedder.id, embedder.dimensions)
    texts = [ch.text for item in items for ch in item.chunks]
    t0 = time.perf_counter()
    vecs, embedded = embed_texts(store, embedder, texts, progress)
    t1 = time.perf_counter()
    offset = 0
    for item in items:
        n = len(item.chunks)
        writes.replace_item(store, item.ref, item.fingerprint, item.title, item.chunks, vecs[offset : offset + n],
                            item.links)
        offset += n
    return WriteStats(items=len(items), chunks=len(texts), embedded=embedded, seconds_embedding=t1 - t0,
                      seconds_writing=time.perf_counter() - t1)
