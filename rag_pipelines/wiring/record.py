"""Record what the index holds in a Dagster instance that has not seen it (after moving the instance to PostgreSQL,
or to a new DAGSTER_HOME): one materialisation per indexed item, read from the store, nothing re-indexed.

A new instance knows none of the runs that indexed the items, so the UI shows every item "Missing" and a backfill of
the missing ones would re-read them all. `local-rag record-index` gives each collection its item partitions (in the
shards its size needs) and each indexed item a materialisation saying where its state came from; failed items are
left without one (the next `local-rag index` retries them). Items the instance already shows materialised are left
alone, so recording twice records nothing new.
"""

from __future__ import annotations

from dataclasses import dataclass

import dagster as dg

from rag_search.store import Store, reads

from rag_pipelines.wiring.assets import add_item_partitions
from rag_pipelines.wiring.outcomes import report_materializations
from rag_pipelines.wiring.shards import Layout, reshard, stored_count

NOTE = "recorded from the index by `local-rag record-index` (not re-indexed): indexed before this Dagster instance"


@dataclass
class Recorded:
    collection: str
    items: int = 0  # items the index holds
    recorded: int = 0  # materialisations written now
    already: int = 0  # indexed items the instance showed materialised before
    failed: int = 0  # failed items: left without a materialisation (the next index retries them)

    def line(self) -> str:
        return (f"{self.collection}: {self.recorded} item(s) recorded as materialised, {self.already} already were, "
                f"{self.failed} failed item(s) left for the next `local-rag index` ({self.items} in the index)")


def record_index(instance: dg.DagsterInstance, store: Store, names: list[str]) -> list[Recorded]:
    """Each named collection's items (as the store holds them) recorded in the instance; a summary per collection."""
    return [_record_one(instance, store, name) for name in names]


def _record_one(instance: dg.DagsterInstance, store: Store, name: str) -> Recorded:
    states = reads.item_states(store, name)
    done = Recorded(name, items=len(states))
    if not states:
        return done
    layout = Layout(name, stored_count(instance, name))
    grow = layout.outgrown(len(states))
    if grow:  # as `local-rag index` would: no asset above the shard bound
        reshard(instance, layout, grow)
        layout = Layout(name, grow)
    add_item_partitions(instance, layout, sorted(states))
    indexed = [k for k, state in states.items() if state.status == "indexed"]
    done.failed = sum(state.status == "failed" for state in states.values())
    shown = {k for i in range(layout.count) for k in instance.get_materialized_partitions(layout.asset_key(i))}
    todo = [k for k in sorted(indexed) if k not in shown]
    done.already = len(indexed) - len(todo)
    chunks = chunk_counts(store, name)
    report_materializations(instance, [dg.AssetMaterialization(
        asset_key=layout.key_of(k), partition=k,
        metadata={"outcome": "recorded", "chunks": chunks.get(k, 0), "uri": states[k].uri, "note": NOTE})
        for k in todo])
    done.recorded = len(todo)
    return done


def chunk_counts(store: Store, collection: str) -> dict[str, int]:
    """Chunks per item key of a collection, in one statement."""
    rows = store.conn.execute(
        "SELECT i.key, count(c.id) FROM items i JOIN collections co ON co.id = i.collection_id "
        "LEFT JOIN chunks c ON c.item_id = i.id WHERE co.name = ? GROUP BY i.key", (collection,)).fetchall()
    return {key: n for key, n in rows}
