"""Which Dagster asset holds an item's partition: a collection's items spread over shards by a stable key hash.

One partition per item, but no asset above SHARD_BOUND partitions (Dagster advises at most 100k per asset; the
partitions page and the per-item bookkeeping slow down well before: bench/partition_scale.py). A collection of
up to SHARD_BOUND items is one asset (`<collection>/items`, as always); a larger one is 2^k assets
`<collection>/items_s00` ... in the collection's UI group, each with its own dynamic partitions.

An item's shard is a hash of its key modulo the shard count, so it never depends on the item's content, date or
folder (a mail moved between folders or re-dated keeps its shard and its history), and hashing spreads any
collection evenly (by year or folder, one busy year or an Inbox alone could pass the bound). The shard count is
kept in the Dagster instance (its key-value store, so it travels with the instance, SQLite or Postgres) and only
changes when the collection outgrows it: `reshard` then moves the partitions (Dagster's bookkeeping only; rag.db
keeps every item, nothing is re-embedded) and the next run logs the moved items in their new shards.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import dagster as dg

from rag_pipelines.config import safe_name

SHARD_BOUND = 50_000  # partitions per asset at most (chosen by measurement: bench/partition_scale.py)
FILL = 0.5  # a new layout fills its shards to half the bound: the collection can double before the next reshard
KV_PREFIX = "local_rag/shards/"


def shard_of(key: str, count: int) -> int:
    """The item's shard among `count`: stable for a key, whatever else changes about the item."""
    if count == 1:
        return 0
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "big") % count


def shards_for(items: int, bound: int | None = None) -> int:
    """The shard count for a collection of `items`: 1 up to the bound, else a power of two filled to FILL."""
    bound = bound or SHARD_BOUND
    if items <= bound:
        return 1
    return 2 ** math.ceil(math.log2(items / (bound * FILL)))


@dataclass(frozen=True)
class Layout:
    """A collection's shards: asset keys and partitions definitions by shard index."""

    collection: str
    count: int = 1

    def index(self, key: str) -> int:
        return shard_of(key, self.count)

    def suffix(self, i: int) -> str:
        return "" if self.count == 1 else f"_s{i:02d}"

    def asset_key(self, i: int) -> dg.AssetKey:
        return dg.AssetKey([safe_name(self.collection), f"items{self.suffix(i)}"])

    def partitions_name(self, i: int) -> str:
        return f"{safe_name(self.collection)}_items{self.suffix(i)}"

    def key_of(self, item_key: str) -> dg.AssetKey:
        return self.asset_key(self.index(item_key))

    def partitions_of(self, item_key: str) -> str:
        return self.partitions_name(self.index(item_key))

    def split(self, keys) -> dict[int, list[str]]:
        """Keys by shard, each list in the given order."""
        out: dict[int, list[str]] = {}
        for key in keys:
            out.setdefault(self.index(key), []).append(key)
        return out

    def outgrown(self, items: int, bound: int | None = None) -> int | None:
        """The shard count to move to when `items` no longer fit under the bound, else None."""
        bound = bound or SHARD_BOUND
        return shards_for(items, bound) if items > self.count * bound else None


def stored_count(instance: dg.DagsterInstance, collection: str) -> int:
    value = instance.run_storage.get_cursor_values({KV_PREFIX + collection}).get(KV_PREFIX + collection)
    return int(value) if value else 1


def layouts(instance: dg.DagsterInstance | None, names) -> dict[str, Layout]:
    """Each collection's layout as the instance records it (one shard when it records none)."""
    return {n: Layout(n, stored_count(instance, n) if instance is not None else 1) for n in names}


def stale(instance: dg.DagsterInstance, layout: Layout) -> str | None:
    """Why definitions built on `layout` must not run any more (the collection was resharded since), else None."""
    count = stored_count(instance, layout.collection)
    if count == layout.count:
        return None
    return (f"'{layout.collection}' is now spread over {count} Dagster assets (by `local-rag index`), but this code "
            f"location was loaded when it had {layout.count}: reload it (Deployment -> Reload in the UI, or restart "
            "`local-rag ui`). Nothing is lost: its changes are picked up after the reload.")


def reshard(instance: dg.DagsterInstance, old: Layout, count: int) -> dict[int, list[str]]:
    """Move the collection's partitions to `count` shards; returns the moved keys by new shard.

    Only Dagster's partition bookkeeping moves: an item that changes shard loses its partition in the old one
    (its earlier events stay in the event log and its runs in the Runs list) and gets one in the new one, where
    the next run logs it (unchanged items are not re-embedded). An asset that no longer exists afterwards
    (`items` of an unsharded collection) is wiped from the asset catalog; its runs stay.
    """
    new = Layout(old.collection, count)
    moved: dict[int, list[str]] = {}
    for i in range(old.count):
        name = old.partitions_name(i)
        keys = instance.get_dynamic_partitions(name)
        going = [k for k in keys if new.partitions_of(k) != name]
        for j, group in new.split(going).items():
            moved.setdefault(j, []).extend(group)
        _delete_partitions(instance, name, going, everything=len(going) == len(keys))
    for j, keys in moved.items():
        _add(instance, new.partitions_name(j), keys)
    kept = {new.asset_key(j) for j in range(count)}
    gone = [old.asset_key(i) for i in range(old.count) if old.asset_key(i) not in kept]
    if gone:
        instance.wipe_assets(gone)
    instance.run_storage.set_cursor_values({KV_PREFIX + old.collection: str(count)})
    return moved


def _add(instance: dg.DagsterInstance, name: str, keys: list[str], chunk: int = 10_000) -> None:
    for i in range(0, len(keys), chunk):
        instance.add_dynamic_partitions(name, keys[i: i + chunk])


def _delete_partitions(instance: dg.DagsterInstance, name: str, keys: list[str], everything: bool) -> None:
    """Delete many partitions at once (Dagster's API deletes one key per statement)."""
    if not keys:
        return
    from dagster._core.storage.event_log.schema import DynamicPartitionsTable

    storage = instance.event_log_storage
    table = DynamicPartitionsTable
    with storage.index_connection() as conn:
        if everything:
            conn.execute(table.delete().where(table.c.partitions_def_name == name))
            return
        for i in range(0, len(keys), 500):
            conn.execute(table.delete().where((table.c.partitions_def_name == name)
                                              & table.c.partition.in_(keys[i: i + 500])))
