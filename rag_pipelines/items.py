"""Indexing items of a collection by key: read → parse → chunk → embed (shared batches) → write.

Plain functions used by the Dagster asset, the sync op and the CLI alike. One bad file never stops
the others: it is recorded as failed with its reason and the run goes on.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

from rag_search.embedders.base import Embedder
from rag_search.indexing import ParsedItem, write_items
from rag_search.records import Fingerprint, ItemRef
from rag_search.store import Store, reads, writes

from rag_pipelines import parsers
from rag_pipelines.chunking import chunk_document, chunk_spec
from rag_pipelines.config import CollectionConfig
from rag_pipelines.sources.files import FileEntry, captured_metadata, root_labels, scan_collection
from rag_pipelines.sources.keys import path_key

BATCH_ITEMS = 128  # items whose chunks are embedded together: bigger groups sort by length better
PLAIN_TYPES = {"text", "csv", "json", "yaml"}
ItemListener = Callable[[str, str], None]  # (key, outcome) with outcome indexed|unchanged|failed|deleted


@dataclass
class IndexStats:
    items: int = 0
    indexed: int = 0
    unchanged: int = 0
    failed: int = 0
    deleted: int = 0
    chunks: int = 0
    tokens: int = 0
    embedded: int = 0
    seconds_parsing: float = 0.0
    seconds_embedding: float = 0.0
    seconds_writing: float = 0.0
    failures: list[tuple[str, str, str]] = field(default_factory=list)  # (key, kind, message)
    outcomes: dict[str, str] = field(default_factory=dict)

    def as_metadata(self) -> dict:
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in self.__dict__.items()
                if k not in ("failures", "outcomes")}


def resolve_entries(store: Store, cfg: CollectionConfig, keys: Sequence[str]) -> dict[str, FileEntry]:
    """FileEntry per key: from the index's known path when it still maps to the key, else by a scan."""
    known = reads.item_states(store, cfg.name)
    roots = root_labels(cfg)
    found: dict[str, FileEntry] = {}
    for key in keys:
        state = known.get(key)
        entry = _entry_from_path(key, Path(state.uri), roots) if state else None
        if entry:
            found[key] = entry
    if len(found) < len(keys):
        scanned = scan_collection(cfg)
        found.update({k: scanned[k] for k in keys if k not in found and k in scanned})
    return found


def _entry_from_path(key: str, path: Path, roots) -> FileEntry | None:
    for index, root, label in roots:
        try:
            rel = path.relative_to(root).as_posix()
            st = path.stat()
        except (ValueError, OSError):
            continue
        if path_key(rel, label) == key and path.is_file():
            return FileEntry(key, path, rel, st.st_size, st.st_mtime_ns, index)
    return None


def index_keys(store: Store, embedder: Embedder, cfg: CollectionConfig, keys: Iterable[str], *,
               force: bool = False, on_item: ItemListener | None = None) -> IndexStats:
    """Index the items with these keys; keys whose file is gone are removed from the index."""
    keys = list(dict.fromkeys(keys))
    writes.ensure_collection(store, cfg.name, cfg.kind, cfg.description)
    store.bind_embedder(embedder.id, embedder.dimensions)
    entries = resolve_entries(store, cfg, keys)
    known = reads.item_states(store, cfg.name)
    stats = IndexStats(items=len(keys))
    spec = chunk_spec(embedder.max_input_tokens, cfg.chunking)
    gone = [k for k in keys if k not in entries]
    if gone:
        stats.deleted = writes.delete_items(store, cfg.name, gone)
        _note(stats, on_item, gone, "deleted")
    present = [entries[k] for k in keys if k in entries]
    for start in range(0, len(present), BATCH_ITEMS):
        batch = []
        t0 = time.perf_counter()
        for entry in present[start : start + BATCH_ITEMS]:
            item = _prepare(store, embedder, cfg, entry, known.get(entry.key), spec, force, stats, on_item)
            if item is not None:
                batch.append(item)
        stats.seconds_parsing += time.perf_counter() - t0
        if batch:
            ws = write_items(store, embedder, batch)
            stats.indexed += ws.items
            stats.chunks += ws.chunks
            stats.embedded += ws.embedded
            stats.seconds_embedding += ws.seconds_embedding
            stats.seconds_writing += ws.seconds_writing
            _note(stats, on_item, [b.ref.key for b in batch], "indexed")
    return stats


def _prepare(store, embedder, cfg, entry: FileEntry, state, spec, force, stats, on_item) -> ParsedItem | None:
    stype = parsers.source_type(entry.suffix)
    ref = ItemRef(cfg.name, entry.key, str(entry.path), stype)
    fingerprint = None
    try:
        data = entry.path.read_bytes()
        st = entry.path.stat()
        fingerprint = Fingerprint(st.st_size, st.st_mtime_ns, hashlib.sha256(data).hexdigest())
        if not force and state and state.status == "indexed" and state.sha256 == fingerprint.sha256:
            writes.touch_item(store, cfg.name, entry.key, fingerprint.size, fingerprint.mtime_ns)
            stats.unchanged += 1
            _note(stats, on_item, [entry.key], "unchanged")
            return None
        doc = parsers.parse(data, entry.relpath, fingerprint.mtime_ns)
        meta = captured_metadata(cfg.sources[entry.source_index], entry.relpath)
        chunks = chunk_document(doc, embedder.count_tokens, spec, plain=stype in PLAIN_TYPES, metadata=meta)
        stats.tokens += sum(embedder.count_tokens(c.text) for c in chunks)
        return ParsedItem(ref, fingerprint, doc.title, chunks, doc.links)
    except parsers.ParseError as exc:
        kind, message = exc.kind, str(exc)
    except OSError as exc:
        kind, message = "unreadable", f"cannot read the file ({exc.strerror or exc}); check it exists and is readable"
    except Exception as exc:  # a parser bug must not stop the run; the item records it
        kind, message = "error", f"{type(exc).__name__}: {exc}"
    writes.mark_failed(store, ref, kind, message, fingerprint)
    stats.failed += 1
    stats.failures.append((entry.key, kind, message))
    _note(stats, on_item, [entry.key], "failed")
    return None


def _note(stats: IndexStats, on_item: ItemListener | None, keys: list[str], outcome: str) -> None:
    for key in keys:
        stats.outcomes[key] = outcome
        if on_item:
            on_item(key, outcome)
