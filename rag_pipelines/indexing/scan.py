"""A collection's sources, opened and scanned together: every item key, its stamp and which source owns it.

A source that cannot be read (SourceUnavailable) is reported and skipped: its items stay in the index,
untouched, until it can be read again. So is every source of a collection an AI assistant added whose folder
now leads where the root policy refuses (a symlink swapped in; rag_search.mcp.guard), whoever starts the run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from rag_search.mcp import guard as mcp_guard
from rag_search.config import Paths
from rag_search.store import Store, writes

from rag_pipelines.config import CollectionConfig, source_labels
from rag_pipelines.sources.base import Source, SourceUnavailable, Stamp
from rag_pipelines.sources.registry import build_source


_opened: dict[str, list[Source]] = {}


def open_sources(cfg: CollectionConfig) -> list[Source]:
    """The collection's sources, shared within a process so a run reuses the scan its plan made."""
    ident = cfg.model_dump_json()
    if ident not in _opened:
        limits = cfg.limits.limits()
        _opened[ident] = [build_source(src, label, limits) for src, label in zip(cfg.sources, source_labels(cfg))]
    return _opened[ident]


def source_name(source: Source) -> str:
    """How status and the items table name a source: its label, else its type."""
    return source.label or source.type


@dataclass
class CollectionScan:
    items: dict[str, Stamp] = field(default_factory=dict)  # key → stamp, problems included (as failed items)
    owner: dict[str, int] = field(default_factory=dict)  # key → index of its source
    problems: dict[str, tuple[str, str]] = field(default_factory=dict)
    unavailable: dict[int, str] = field(default_factory=dict)  # source index → why it could not be read


def scan_collection(cfg: CollectionConfig, sources: list[Source] | None = None,
                    store: Store | None = None) -> CollectionScan:
    """Scan every source; with a store, each source's outcome is recorded for `status`."""
    sources = sources if sources is not None else open_sources(cfg)
    out = CollectionScan()
    refused = mcp_guard.refusals(Paths.from_env()).get(cfg.name)
    if refused:  # an assistant's folder now leads where the root policy refuses: no run reads it, whoever starts it
        for i, src in enumerate(sources):
            out.unavailable[i] = f"{refused} Nothing was read from it."
            _record(store, cfg, src, 0, 0, 0.0, out.unavailable[i])
        return out
    for i, src in enumerate(sources):
        t0 = time.perf_counter()
        try:
            result = src.scan()
        except SourceUnavailable as exc:
            out.unavailable[i] = str(exc)
            _record(store, cfg, src, 0, 0, time.perf_counter() - t0, str(exc))
            continue
        for key, stamp in result.items.items():
            out.items.setdefault(key, stamp)
            out.owner.setdefault(key, i)
        for key, problem in result.problems.items():
            out.items.setdefault(key, Stamp(f"problem:{problem[0]}", key))
            out.owner.setdefault(key, i)
            out.problems[key] = problem
        _record(store, cfg, src, len(result.items), len(result.problems), time.perf_counter() - t0, None)
    return out


def owner_of(key: str, sources: list[Source]) -> int | None:
    return next((i for i, s in enumerate(sources) if s.owns(key)), None)


def _record(store, cfg, src, matched, problems, seconds, error) -> None:
    if store is None:
        return
    writes.ensure_collection(store, cfg.name, cfg.kind, cfg.description)
    writes.record_scan(store, cfg.name, source_name(src), src.type, matched, problems, seconds, error)
