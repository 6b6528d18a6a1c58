"""Indexing items of a collection by key: load (any source) → parse → chunk → embed → write.

Plain functions used by the Dagster asset, the sync op and the CLI alike. One bad item never stops
the others: it is recorded as failed with its reason and the run goes on. Items are written one by
one as soon as their vectors exist, so a killed run redoes seconds of work, not minutes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

from rag_search.embedders.base import Embedder
from rag_search.store.item_writer import ItemWriter, ParsedItem
from rag_search.records import Document, Fingerprint, ItemRef
from rag_search.store import Store, reads, writes

from rag_pipelines import parsers
from rag_pipelines.chunking.prose import ChunkSpec, chunk_document, chunk_spec, document_text, whole_document
from rag_pipelines.config import CollectionConfig
from rag_pipelines.indexing.plan import stores_path
from rag_pipelines.indexing.scan import open_sources, owner_of, source_name
from rag_pipelines.sources.base import Loaded, Source, SourceUnavailable

ItemListener = Callable[[str, str], None]  # (key, outcome) with outcome indexed|unchanged|failed|deleted
WorkListener = Callable[[str, int], None]  # ("queued", chunks of a parsed item) | ("embedded", chunks just embedded)


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
    seconds_embedding: float = 0.0  # waiting for vectors: the model embeds while the next items are parsed
    seconds_writing: float = 0.0
    failures: list[tuple[str, str, str]] = field(default_factory=list)  # (key, kind, message)
    outcomes: dict[str, str] = field(default_factory=dict)
    item_chunks: dict[str, int] = field(default_factory=dict)  # key → chunks written
    item_tokens: dict[str, int] = field(default_factory=dict)  # key → tokens of the chunks written
    item_uris: dict[str, str] = field(default_factory=dict)  # key → where the item is (path, URL)

    def as_metadata(self) -> dict:
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in self.__dict__.items()
                if not isinstance(v, (list, dict))}


@dataclass
class _Run:
    store: Store
    embedder: Embedder
    cfg: CollectionConfig
    spec: ChunkSpec
    force: bool
    stats: IndexStats
    on_item: ItemListener | None
    on_work: WorkListener | None
    known: dict


def index_keys(store: Store, embedder: Embedder, cfg: CollectionConfig, keys: Iterable[str], *,
               force: bool = False, on_item: ItemListener | None = None, on_work: WorkListener | None = None,
               sources: list[Source] | None = None, stats: IndexStats | None = None) -> IndexStats:
    """Index the items with these keys; keys whose item is gone from its source leave the index.

    `on_item` hears each item's outcome (its figures are in `stats` by then: pass one to read them);
    `on_work` hears chunks as they are queued and embedded (progress).
    """
    keys = list(dict.fromkeys(keys))
    writes.ensure_collection(store, cfg.name, cfg.kind, cfg.description)
    store.bind_embedder(embedder.id, embedder.dimensions)
    sources = sources if sources is not None else open_sources(cfg)
    run = _Run(store, embedder, cfg, chunk_spec(embedder.max_input_tokens, cfg.chunking), force,
               stats if stats is not None else IndexStats(), on_item, on_work, reads.item_states(store, cfg.name))
    run.stats.items = len(keys)
    embedded = (lambda n: on_work("embedded", n)) if on_work else None
    writer = ItemWriter(store, embedder, on_written=lambda item: _written(run, item), progress=embedded)
    by_source: dict[int, list[str]] = {}
    for key in keys:
        owner = owner_of(key, sources)
        if owner is None:
            _delete(run, [key])  # no configured source holds such keys any more
        else:
            by_source.setdefault(owner, []).append(key)
    try:
        for index, owned in by_source.items():
            src = sources[index]
            for loaded in _loaded(run, src, owned):
                t0 = time.perf_counter()
                item = _prepare(run, src, loaded)
                run.stats.seconds_parsing += time.perf_counter() - t0
                if item is not None:
                    writer.add(item)
        writer.flush()
    finally:
        writer.close()  # after an error: the embedding thread stops, nothing half-written
    for name in ("embedded", "seconds_embedding", "seconds_writing"):
        setattr(run.stats, name, getattr(writer.stats, name))
    return run.stats


def _loaded(run: _Run, src: Source, keys: list[str]) -> Iterable[Loaded]:
    """The source's Loaded items; when its load() raises (a source bug, one item it cannot read), the keys it had
    not yielded yet are loaded one by one, so only the item that raises fails (recorded with the error)."""
    uris = {k: run.known[k].uri for k in keys if k in run.known}
    done: set[str] = set()
    try:
        for loaded in src.load(keys, known_uris=uris):
            done.add(loaded.key)
            yield loaded
        return
    except SourceUnavailable:
        raise  # the whole source went away mid-run: nothing of it is marked failed
    except Exception:  # noqa: BLE001 - isolated below, key by key
        pass
    for key in (k for k in keys if k not in done):
        try:
            yield from src.load([key], known_uris={key: uris[key]} if key in uris else {})
        except Exception as exc:  # noqa: BLE001 - this item's own failure, recorded
            uri = uris.get(key, key)
            yield Loaded(key, uri, "unknown", error=("error", f"the source could not read it ({type(exc).__name__}: "
                                                              f"{exc}); the other items are indexed"))


def _prepare(run: _Run, src: Source, loaded: Loaded) -> ParsedItem | None:
    """A Loaded item → a ParsedItem to write, or None when it was unchanged, gone or failed."""
    key, state = loaded.key, run.known.get(loaded.key)
    if loaded.gone:
        _delete(run, [key])
        return None
    ref = ItemRef(run.cfg.name, key, loaded.uri, loaded.source_type, source_name(src))
    run.stats.item_uris[key] = loaded.uri
    fp = Fingerprint(loaded.size, loaded.mtime_ns, loaded.content_hash, loaded.stamp or None)
    if loaded.error:
        return _fail(run, ref, fp, *loaded.error)
    if (not run.force and state and state.status == "indexed" and loaded.content_hash is not None
            and state.sha256 == loaded.content_hash and not (stores_path(src) and state.uri != loaded.uri)):
        writes.touch_item(run.store, run.cfg.name, key, loaded.stamp, loaded.size, loaded.mtime_ns, uri=loaded.uri)
        run.stats.unchanged += 1
        _note(run, [key], "unchanged")
        return None
    try:
        doc = loaded.parse() if loaded.parse else None
        if doc is None:
            raise parsers.ParseError("error", "the source gave no content for this item")
        chunks = _chunks(run, src, doc, loaded)
    except parsers.ParseError as exc:
        return _fail(run, ref, fp, exc.kind, str(exc))
    except OSError as exc:
        return _fail(run, ref, fp, "unreadable", f"cannot read it ({exc.strerror or exc}); check it exists and is readable")
    except Exception as exc:  # a parser bug must not stop the run; the item records it
        return _fail(run, ref, fp, "error", f"{type(exc).__name__}: {exc}")
    tokens = sum(run.embedder.count_tokens(c.vector_text) if c.tokens is None else c.tokens for c in chunks)
    run.stats.tokens += tokens
    run.stats.item_tokens[key] = tokens
    if run.on_work:
        run.on_work("queued", len(chunks))
    stored = None if stores_path(src) else document_text(doc)  # file-path: only the path is kept
    return ParsedItem(ref, fp, doc.title, chunks, doc.links, stored)


def _chunks(run: _Run, src: Source, doc: Document, loaded: Loaded) -> list:
    strategy = getattr(getattr(src, "options", None), "ingest", "chunked")
    count, spec = run.embedder.count_tokens, run.spec
    chunks = whole_document(doc, count, spec) if strategy == "whole-document" else None
    if chunks is None and loaded.chunker is not None:  # a source's own chunker (code: by syntax tree)
        chunks = loaded.chunker(doc, count, spec)
    if chunks is None:
        chunks = chunk_document(doc, count, spec, plain=loaded.plain)
    limit = run.cfg.limits.max_chunks
    if len(chunks) > limit:
        raise parsers.ParseError("too_large", f"it makes {len(chunks)} chunks, over the limit of {limit} per item; "
                                 "raise limits.max_chunks in config.yaml or exclude it")
    if strategy == "file-path":
        from dataclasses import replace

        chunks = [replace(c, text=loaded.uri, embed_text=c.text) for c in chunks]
    return chunks


def _fail(run: _Run, ref: ItemRef, fp: Fingerprint, kind: str, message: str) -> None:
    writes.mark_failed(run.store, ref, kind, message, fp)
    run.stats.failed += 1
    run.stats.failures.append((ref.key, kind, message))
    _note(run, [ref.key], "failed")
    return None


def _delete(run: _Run, keys: list[str]) -> None:
    run.stats.deleted += writes.delete_items(run.store, run.cfg.name, keys)
    _note(run, keys, "deleted")


def _written(run: _Run, item: ParsedItem) -> None:
    run.stats.indexed += 1
    run.stats.chunks += len(item.chunks)
    run.stats.item_chunks[item.ref.key] = len(item.chunks)
    _note(run, [item.ref.key], "indexed")


def _note(run: _Run, keys: list[str], outcome: str) -> None:
    for key in keys:
        run.stats.outcomes[key] = outcome
        if run.on_item:
            run.on_item(key, outcome)
