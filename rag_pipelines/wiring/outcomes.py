"""Each item's outcome as Dagster shows it: its own partition, its own figures, failed when it failed.

- indexed / unchanged: an `AssetMaterialization` of that partition with the item's figures (chunks,
  tokens, where it is); an unchanged item keeps its stored chunk count, never zeros.
- failed: an `AssetObservation` of the partition carrying the reason, and a per-partition "planned"
  event; when the run then fails (`items_failed`), Dagster counts exactly those partitions as Failed
  (its partition status = planned in a failed run and not materialised since). The other items of
  the run are materialised; the run's failure names the failed items.
- deleted: the partition is removed.

Events are logged as items finish, in small batches (one write of the event log per batch instead of one
per item): a batch is logged when it holds `BATCH_ITEMS` items, when an item finishes and the oldest
pending one is `BATCH_SECONDS` old, before a failure, and at the end of the run (also one that raises).
So the UI fills in during a long run; a SIGKILLed run leaves its last batch unlogged, and the next
`index` or sensor tick that finds the dead run logs those items from rag.db (`record_unlogged`).
"""

from __future__ import annotations

import time
import uuid

import dagster as dg

from rag_search.store import Store, reads

from rag_pipelines.config import CollectionConfig
from rag_pipelines.indexing.items import IndexStats
from rag_pipelines.indexing.health import COLLECTION_TAG
from rag_pipelines.wiring.shards import Layout

FAILED_ITEMS = "failed_items"  # metadata key of a run failure caused by items (not by a crash)
BATCH_ITEMS = 100  # materialisations written to the event log together (DAGSTER_EVENT_BATCH_SIZE must be larger)
BATCH_SECONDS = 0.5  # ... or fewer, when the oldest of them waited this long


class ItemEvents:
    """An `on_item` listener that logs each item's outcome to its partition, as it happens."""

    def __init__(self, context, layout: Layout, cfg: CollectionConfig, store: Store, embedder_id: str,
                 stats: IndexStats):
        self.context, self.layout = context, layout  # each item's events go to its shard's asset
        self.cfg, self.store, self.embedder_id, self.stats = cfg, store, embedder_id, stats
        self.deleted: list[str] = []
        self.failed: list[str] = []
        self._pending: list[dg.AssetMaterialization] = []
        self._since = 0.0

    def __call__(self, key: str, outcome: str) -> None:
        if outcome == "deleted":
            self.deleted.append(key)
        elif outcome == "failed":
            self.failed.append(key)
            self.flush()  # the log keeps the items' order
            self._failed(key)
        else:
            meta = self._figures(key, outcome)
            if not self._pending:
                self._since = time.monotonic()
            self._pending.append(dg.AssetMaterialization(asset_key=self.layout.key_of(key), partition=key,
                                                         metadata=meta))
            if len(self._pending) >= BATCH_ITEMS or time.monotonic() - self._since >= BATCH_SECONDS:
                self.flush()

    def flush(self) -> None:
        """Log the pending materialisations as one batch (Dagster writes a batch when its last event arrives)."""
        from dagster._core.events import DagsterEvent, DagsterEventBatchMetadata

        pending, self._pending = self._pending, []
        step, batch = self.context.get_step_execution_context(), str(uuid.uuid4())
        for i, materialization in enumerate(pending):
            DagsterEvent.asset_materialization(step, materialization,
                                               DagsterEventBatchMetadata(batch, i == len(pending) - 1))

    def _figures(self, key: str, outcome: str) -> dict:
        meta: dict = {"outcome": outcome}
        if outcome == "indexed":
            meta.update(chunks=self.stats.item_chunks.get(key, 0), tokens=self.stats.item_tokens.get(key, 0))
        else:  # unchanged: nothing was re-read; the stored figures stand
            meta.update(chunks=stored_chunks(self.store, self.cfg.name, key),
                        note="content unchanged since it was indexed; not re-read (force: false)")
        if key in self.stats.item_uris:
            meta["uri"] = self.stats.item_uris[key]
        meta["embedder"] = self.embedder_id
        return meta

    def _failed(self, key: str) -> None:
        kind, message = next(((k, m) for k_, k, m in reversed(self.stats.failures) if k_ == key), ("error", ""))
        meta = {"outcome": "failed", "error_kind": kind, "error": message}
        if key in self.stats.item_uris:
            meta["uri"] = self.stats.item_uris[key]
        asset_key = self.layout.key_of(key)
        self.context.log_event(dg.AssetObservation(asset_key=asset_key, partition=key,
                                                   description=f"failed [{kind}]: {message}", metadata=meta))
        _planned(self.context, asset_key, key)
        _failed_to_materialize(self.context, asset_key, key, f"failed [{kind}]: {message}", meta)

    def finish(self) -> None:
        """Log what is pending; remove the partitions of items gone from their source."""
        self.flush()
        instance = self.context.instance
        for shard, keys in self.layout.split(self.deleted).items():
            name = self.layout.partitions_name(shard)
            existing = set(instance.get_dynamic_partitions(name))
            for key in keys:
                if key in existing:
                    instance.delete_dynamic_partition(name, key)


def _planned(context, asset_key: dg.AssetKey, key: str) -> None:
    """A "materialisation planned" event for one partition of this run.

    Dagster (1.13) counts a partition as Failed when its latest planned event belongs to a failed run
    and no materialisation followed. Range runs plan one event for the whole range (local-rag sets
    DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS: half the bookkeeping) and op runs plan none, so
    the failed items get their own here.
    """
    from dagster._core.events import AssetMaterializationPlannedData, DagsterEvent

    step = context.get_step_execution_context()
    event = DagsterEvent.build_asset_materialization_planned_event(
        context.run.job_name, step.step.key, AssetMaterializationPlannedData(asset_key, partition=key))
    context.instance.report_dagster_event(event, run_id=context.run.run_id)


def _failed_to_materialize(context, asset_key: dg.AssetKey, key: str, description: str, meta: dict) -> None:
    """The partition's own "failed to materialize" event, carrying the reason: the partition's page in the UI
    shows it (with its metadata) at the top, where an observation alone left "No metadata entries"."""
    from dagster._core.definitions.events import (AssetMaterializationFailure, AssetMaterializationFailureReason,
                                                  AssetMaterializationFailureType)
    from dagster._core.events import DagsterEvent

    failure = AssetMaterializationFailure(
        asset_key=asset_key, partition=key, description=description, metadata=meta,
        failure_type=AssetMaterializationFailureType.FAILED, reason=AssetMaterializationFailureReason.FAILED_TO_MATERIALIZE)
    step = context.get_step_execution_context()
    event = DagsterEvent.build_asset_failed_to_materialize_event(context.run.job_name, step.step.key, failure)
    context.instance.report_dagster_event(event, run_id=context.run.run_id)


def items_failed(stats: IndexStats, failed: list[str]) -> dg.Failure:
    """The run's failure when items failed: names them; the run fails so their partitions do."""
    reasons = {k: (kind, msg) for k, kind, msg in stats.failures}
    shown = "; ".join(f"{k}: [{reasons[k][0]}] {reasons[k][1]}" for k in failed[:10] if k in reasons)
    more = f" (and {len(failed) - 10} more)" if len(failed) > 10 else ""
    rows = "\n".join(f"| `{k}` | {reasons[k][0]} | {reasons[k][1].replace('|', '/')} |" for k in failed[:50]
                     if k in reasons)
    return dg.Failure(
        description=f"{len(failed)} of {stats.items} items failed and are marked as failed partitions; "
        f"the other items were indexed. {shown}{more}. Fix the items (or exclude them) and materialise the failed "
        "partitions again; they are also retried by the next `local-rag index` and the nightly rescan.",
        metadata={FAILED_ITEMS: len(failed), "indexed": stats.indexed, "unchanged": stats.unchanged,
                  "failures": dg.MetadataValue.md("| item | kind | reason |\n|---|---|---|\n" + rows)},
        allow_retries=False,
    )


def is_items_failure(exc: BaseException) -> bool:
    return isinstance(exc, dg.Failure) and FAILED_ITEMS in (exc.metadata or {})


RECONCILED = "local_rag/reconciled"  # tag of a failed or canceled run whose written items were logged afterwards
UNFINISHED = (dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)


def record_unlogged(instance: dg.DagsterInstance, store: Store, cfg: CollectionConfig, layout: Layout,
                    runs: int = 5) -> int:
    """Log the items that a failed or canceled run of this collection wrote to rag.db but never logged (its last
    batch, when it was killed or stopped), so their partitions show what is true; each such run once (tagged),
    whoever marked it failed. Returns how many items were logged."""
    from dagster._core.events import DagsterEventType

    ended = [r for r in instance.get_runs(filters=dg.RunsFilter(tags={COLLECTION_TAG: cfg.name},
                                                                statuses=list(UNFINISHED)), limit=runs)
             if RECONCILED not in r.tags]
    if not ended:
        return 0
    states = reads.item_states(store, cfg.name)
    count = 0
    for run in ended:
        logged = {r.event_log_entry.dagster_event.partition for r in instance.get_records_for_run(
            run.run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION, limit=1_000_000).records}
        missing = [k for k in _run_keys(run, instance, layout) if k not in logged and k in states
                   and states[k].status == "indexed"]
        report_materializations(instance, [dg.AssetMaterialization(
            asset_key=layout.key_of(key), partition=key, metadata={
                "outcome": "indexed", "chunks": stored_chunks(store, cfg.name, key), "uri": states[key].uri,
                "note": f"indexed by run {run.run_id[:8]}, which ended before it logged this item"})
            for key in missing])
        instance.add_run_tags(run.run_id, {RECONCILED: str(len(missing))})
        count += len(missing)
    return count


def report_materializations(instance: dg.DagsterInstance, materializations: list[dg.AssetMaterialization]) -> None:
    """Materialisations that belong to no run (as the UI's "Report materialization" records them), written in
    batches of BATCH_ITEMS: one write of the event log per batch (DAGSTER_EVENT_BATCH_SIZE, set by ensure_instance),
    instead of one per item."""
    from dagster._core.events import DagsterEvent, DagsterEventBatchMetadata, DagsterEventType, StepMaterializationData
    from dagster._core.instance.utils import RUNLESS_JOB_NAME, RUNLESS_RUN_ID

    for start in range(0, len(materializations), BATCH_ITEMS):
        batch, batch_id = materializations[start: start + BATCH_ITEMS], str(uuid.uuid4())
        for i, materialization in enumerate(batch):
            event = DagsterEvent(DagsterEventType.ASSET_MATERIALIZATION.value, job_name=RUNLESS_JOB_NAME,
                                 event_specific_data=StepMaterializationData(materialization))
            instance.report_dagster_event(event, run_id=RUNLESS_RUN_ID,
                                          batch_metadata=DagsterEventBatchMetadata(batch_id, i == len(batch) - 1))


def _run_keys(run, instance: dg.DagsterInstance, layout: Layout) -> list[str]:
    """The items a run was asked to index: its partition range (within one shard) or partition, or a sync run's
    keys."""
    from dagster._core.storage.tags import (ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG,
                                            PARTITION_NAME_TAG)

    first, last = run.tags.get(ASSET_PARTITION_RANGE_START_TAG), run.tags.get(ASSET_PARTITION_RANGE_END_TAG)
    ordered = instance.get_dynamic_partitions(layout.partitions_of(first)) if first and last else []
    if first in ordered and last in ordered:
        return ordered[ordered.index(first): ordered.index(last) + 1]
    if run.tags.get(PARTITION_NAME_TAG):
        return [run.tags[PARTITION_NAME_TAG]]
    ops = (run.run_config or {}).get("ops", {})
    return [k for op in ops.values() for k in (op.get("config") or {}).get("reindex", [])]


def retry_keys(store: Store, cfg: CollectionConfig, keys: list[str]) -> list[str]:
    """For a re-execution from failure: the keys not indexed now (failed, or never finished)."""
    states = reads.item_states(store, cfg.name)
    return [k for k in keys if k not in states or states[k].status != "indexed"]


def stored_chunks(store: Store, collection: str, key: str) -> int:
    row = store.conn.execute(
        "SELECT count(c.id) FROM items i JOIN collections co ON co.id = i.collection_id "
        "LEFT JOIN chunks c ON c.item_id = i.id WHERE co.name = ? AND i.key = ?", (collection, key)).fetchone()
    return row[0] if row else 0
