"""What changed in a collection since it was indexed: new, changed, deleted items (no Dagster).

Stamps first (size+mtime for files, a row version for records); a source may confirm a changed stamp
cheaply (files hash the bytes) so a touched file just gets its new stamp recorded. Failed items are
retried when they change (or by a forced or full run), so a corrupt file is not re-parsed every minute.
Items of a source that cannot be read now are never planned for deletion. An unchanged item found at
another place (its collection re-pointed with `--replace`, a vault moved) is moved: its URI is updated in
place, nothing is re-read (except with `ingest: file-path`, whose stored text is the path itself).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rag_search.store import Store, reads, writes

from rag_pipelines.config import CollectionConfig
from rag_pipelines.indexing.scan import CollectionScan, open_sources, owner_of, scan_collection
from rag_pipelines.sources.base import Source, Stamp


@dataclass
class SyncPlan:
    entries: dict[str, Stamp]
    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    touched: int = 0
    moved: int = 0  # unchanged items now found at another place: their URI was updated
    unavailable: dict[str, str] = field(default_factory=dict)  # source name → why it was skipped

    @property
    def empty(self) -> bool:
        return not (self.new or self.changed or self.deleted)


def plan_sync(store: Store, cfg: CollectionConfig, *, force: bool = False, retry_failed: bool = False,
              sources: list[Source] | None = None) -> SyncPlan:
    sources = sources if sources is not None else open_sources(cfg)
    scan = scan_collection(cfg, sources, store)
    known = reads.item_states(store, cfg.name)
    plan = SyncPlan(scan.items, unavailable={sources[i].label or sources[i].type: m for i, m in scan.unavailable.items()})
    for key in sorted(scan.items):
        stamp, state = scan.items[key], known.get(key)
        if state is None:
            plan.new.append(key)
        elif force or (retry_failed and state.status != "indexed"):
            plan.changed.append(key)
        elif state.stamp != stamp.value:
            if state.status == "indexed" and sources[scan.owner[key]].same_content(key, state.sha256):
                writes.touch_item(store, cfg.name, key, stamp.value, uri=stamp.uri)
                plan.touched += 1
                plan.moved += state.uri != stamp.uri
            else:
                plan.changed.append(key)
        elif state.uri != stamp.uri and state.status == "indexed":
            if stores_path(sources[scan.owner[key]]):
                plan.changed.append(key)
            else:
                writes.touch_item(store, cfg.name, key, stamp.value, uri=stamp.uri)
                plan.moved += 1
    plan.deleted = sorted(k for k in known if k not in scan.items and not _protected(k, sources, scan))
    return plan


def stores_path(source: Source) -> bool:
    """`ingest: file-path`: the item's stored text is its path, so a moved item is re-chunked, not only re-pointed."""
    return getattr(getattr(source, "options", None), "ingest", "chunked") == "file-path"


def _protected(key: str, sources: list[Source], scan: CollectionScan) -> bool:
    """An item of a source that could not be scanned stays: a locked mail store must not empty the index."""
    owner = owner_of(key, sources)
    return owner is not None and owner in scan.unavailable
