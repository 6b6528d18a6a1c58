"""What changed in a collection since it was indexed: new, changed, deleted items (no Dagster).

A size+mtime fast path; sha256 only for files whose size or mtime differ. A file touched without a
content change just gets its new size/mtime recorded. Failed items are retried when they change
(or by a forced or full run), so a corrupt file is not re-parsed every minute.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rag_search.store import Store, reads, writes

from rag_pipelines.config import CollectionConfig
from rag_pipelines.sources.files import FileEntry, scan_collection, sha256_file


@dataclass
class SyncPlan:
    entries: dict[str, FileEntry]
    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    touched: int = 0

    @property
    def empty(self) -> bool:
        return not (self.new or self.changed or self.deleted)


def plan_sync(store: Store, cfg: CollectionConfig, *, force: bool = False, retry_failed: bool = False) -> SyncPlan:
    entries = scan_collection(cfg)
    known = reads.item_states(store, cfg.name)
    plan = SyncPlan(entries)
    for key in sorted(entries):
        entry, state = entries[key], known.get(key)
        if state is None:
            plan.new.append(key)
        elif force or (retry_failed and state.status != "indexed"):
            plan.changed.append(key)
        elif (state.size, state.mtime_ns) != (entry.size, entry.mtime_ns):
            try:
                same = state.sha256 is not None and sha256_file(entry.path) == state.sha256
            except OSError:
                same = False  # unreadable now: let the indexer record why
            if same:
                writes.touch_item(store, cfg.name, key, entry.size, entry.mtime_ns)
                plan.touched += 1
            else:
                plan.changed.append(key)
    plan.deleted = sorted(k for k in known if k not in entries)
    return plan
