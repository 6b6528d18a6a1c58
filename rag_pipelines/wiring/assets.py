"""Per-collection Dagster objects: the item-partitioned asset (with its checks), its index (range) and sync jobs."""


import warnings
from dataclasses import dataclass

import dagster as dg
from pydantic import Field

from rag_search.config import load_settings

from rag_pipelines.indexing import progress
from rag_pipelines.config import CollectionConfig, current_collection, safe_name
from rag_pipelines.indexing.health import record_where
from rag_pipelines.indexing.items import IndexStats, index_keys
from rag_pipelines.indexing.lock import collection_lock
from rag_pipelines.indexing.workers import index_in_workers, worker_count, worker_jobs
from rag_pipelines.indexing.plan import plan_sync
from rag_pipelines.wiring import checks, outcomes
from rag_pipelines.wiring.pool import collection_pool, pooled, uses_pool
from rag_pipelines.wiring.resources import RagResource
from rag_pipelines.wiring.shards import Layout, stale

warnings.filterwarnings("ignore", category=dg.BetaWarning)
warnings.filterwarnings("ignore", category=dg.PreviewWarning)

ADD_CHUNK = 10_000  # dynamic partitions are added in chunks (SQLite variable limits on some builds)


@dataclass(frozen=True)
class Shard:
    """One asset of a collection: its items' partitions, the asset and its range (index) job."""
    index: int
    partitions: dg.DynamicPartitionsDefinition
    asset: dg.AssetsDefinition
    index_job: object  # an unresolved asset job (define_asset_job)

    @property
    def key(self) -> dg.AssetKey:
        return self.asset.key


@dataclass(frozen=True)
class CollectionDefs:
    cfg: CollectionConfig
    layout: Layout
    shards: list[Shard]
    sync_job: dg.JobDefinition

    def shard_of(self, item_key: str) -> Shard:
        return self.shards[self.layout.index(item_key)]

    @property
    def only(self) -> Shard:
        """The one shard of a collection below the bound (benches, tests)."""
        if len(self.shards) != 1:
            raise ValueError(f"'{self.cfg.name}' has {len(self.shards)} shards; pick one with shard_of(key)")
        return self.shards[0]

    @property
    def partitions(self) -> dg.DynamicPartitionsDefinition:
        return self.only.partitions

    @property
    def index_job(self):
        return self.only.index_job

    @property
    def key(self) -> dg.AssetKey:
        return self.only.key


def items_key(name: str) -> dg.AssetKey:
    return dg.AssetKey([safe_name(name), "items"])


def partitions_name(name: str) -> str:
    return f"{safe_name(name)}_items"


def items_op_name(name: str, suffix: str = "") -> str:
    return f"{safe_name(name)}__items{suffix}"


def sync_op_name(name: str) -> str:
    return f"{safe_name(name)}_sync"


def add_partitions(instance: dg.DagsterInstance, name: str, keys: list[str]) -> list[str]:
    """Add keys not yet present, in order, in chunks; returns the keys added."""
    existing = set(instance.get_dynamic_partitions(name))
    todo = [k for k in keys if k not in existing]
    for i in range(0, len(todo), ADD_CHUNK):
        instance.add_dynamic_partitions(name, todo[i : i + ADD_CHUNK])
    return todo


def add_item_partitions(instance: dg.DagsterInstance, layout: Layout, keys: list[str]) -> list[str]:
    """Add each key to its shard's partitions (when not there yet); returns the keys added."""
    return [k for i, group in layout.split(keys).items()
            for k in add_partitions(instance, layout.partitions_name(i), group)]


class ItemsConfig(dg.Config):
    force: bool = Field(
        default=True,
        description="Re-read, re-parse and re-chunk the selected items even when they are unchanged (their vectors "
        "still come from the embedding cache). True for runs started from the UI; the CLI, watcher and sensor "
        "set false. False skips items whose content is unchanged.",
    )


def build_collection(cfg: CollectionConfig, layout: Layout | None = None) -> CollectionDefs:
    layout = layout or Layout(cfg.name)
    shards = [_build_shard(cfg, layout, i) for i in range(layout.count)]
    return CollectionDefs(cfg, layout, shards, _build_sync(cfg, layout))


def _build_shard(cfg: CollectionConfig, layout: Layout, i: int) -> Shard:
    partitions = dg.DynamicPartitionsDefinition(name=layout.partitions_name(i))
    key, safe, suffix = layout.asset_key(i), cfg.safe_name, layout.suffix(i)
    part = f" This is shard {i + 1} of {layout.count}: the items whose key hashes here." if layout.count > 1 else ""

    @dg.multi_asset(
        name=items_op_name(cfg.name, suffix),
        specs=[dg.AssetSpec(
            key, group_name=safe, partitions_def=partitions, kinds={"sqlite"},
            description=f"Items of the '{cfg.name}' collection, one partition per item: read, parsed, chunked, "
            f"embedded and written to rag.db. A failed item is a failed partition.{part} {cfg.description}".strip(),
        )],
        check_specs=checks.check_specs(key),
        can_subset=True,  # the checks can run alone from the UI
        partitions_def=partitions,
        backfill_policy=dg.BackfillPolicy.single_run(),
        pool=collection_pool(cfg.name),  # one writer of the collection at a time, whichever job runs it
    )
    def items(context: dg.AssetExecutionContext, config: ItemsConfig, rag: RagResource):
        failure, now = None, current_collection(rag.paths(), cfg) or cfg  # config.yaml as it is now
        if key in context.selected_asset_keys:
            failure = _index_partitions(context, now, layout, rag, config.force)
        names = {k.name for k in context.selected_asset_check_keys}
        yield from checks.as_results(checks.evaluate(now, layout, i, rag, context.instance, names), key)
        if failure:
            raise failure

    index_job = dg.define_asset_job(
        f"{safe}_index{suffix}", selection=dg.AssetSelection.assets(key),
        tags={"local_rag/collection": cfg.name},
        description=f"Index a contiguous range of new items of '{cfg.name}'"
        + (f" (shard {i + 1} of {layout.count})." if layout.count > 1 else "."),
    )
    return Shard(i, partitions, items, index_job)


def _build_sync(cfg: CollectionConfig, layout: Layout) -> dg.JobDefinition:
    safe = cfg.safe_name

    @dg.op(
        name=sync_op_name(cfg.name),
        config_schema={
            "reindex": dg.Field([str], default_value=[], description="Keys of new or changed items."),
            "delete": dg.Field([str], default_value=[], description="Keys of items gone from disk."),
            "force": dg.Field(bool, default_value=False, description="Re-chunk and re-embed unchanged items."),
            "rescan": dg.Field(bool, default_value=False, description="Scan the sources and sync all changes."),
        },
        out={},
        description=f"Sync changed and deleted items of '{cfg.name}' in one run; logs a materialisation per item, "
        "fails the items that fail, and evaluates the checks.",
        pool=collection_pool(cfg.name),
    )
    def sync(context: dg.OpExecutionContext, rag: RagResource):
        conf, now = context.op_config, current_collection(rag.paths(), cfg) or cfg  # config.yaml as it is now
        store = rag.store()
        reindex, delete = list(conf["reindex"]), list(conf["delete"])
        if conf["rescan"]:
            plan = plan_sync(store, now, force=conf["force"], retry_failed=True)
            add_item_partitions(context.instance, layout, plan.new)
            reindex, delete = plan.new + plan.changed, plan.deleted
            context.log.info(f"rescan: {len(plan.new)} new, {len(plan.changed)} changed, {len(plan.deleted)} deleted")
        if context.run.is_resume_retry:
            reindex = outcomes.retry_keys(store, now, reindex)
            context.log.info(f"re-execution from failure: retrying the {len(reindex)} items not indexed")
        failure = _index(context, now, layout, rag, reindex + delete, conf["force"])
        touched = sorted(layout.split(reindex + delete)) or [0]  # the checks of the shards this run touched
        for i, found in checks.evaluate_shards(now, layout, touched, rag, context.instance).items():
            for evaluation in checks.as_evaluations(found, layout.asset_key(i)):
                context.log_event(evaluation)
        if failure:
            raise failure

    return dg.GraphDefinition(name=f"{safe}_sync_graph", node_defs=[sync]).to_job(
        name=f"{safe}_sync",
        description=f"Re-index changed items and drop deleted ones of '{cfg.name}' (one run for any number).",
        tags={"local_rag/collection": cfg.name},
    )


def _index_partitions(context: dg.AssetExecutionContext, cfg: CollectionConfig, layout: Layout,
                      rag: RagResource, force: bool) -> dg.Failure | None:
    """The run's partitions; a re-execution from failure retries only the items not indexed."""
    keys = list(context.partition_keys)
    if context.run.is_resume_retry:
        keys = outcomes.retry_keys(rag.store(), cfg, keys)
        context.log.info(f"re-execution from failure: retrying the {len(keys)} of {len(context.partition_keys)} "
                         "items that are not indexed; the others are left as they are")
    return _index(context, cfg, layout, rag, keys, force)


def _index(context, cfg: CollectionConfig, layout: Layout, rag: RagResource,
           keys: list[str], force: bool) -> dg.Failure | None:
    """Index keys, logging each item's outcome on its partition; the Failure to raise if items failed."""
    why = stale(context.instance, layout)
    if why:  # a code location loaded before `local-rag index` resharded the collection
        raise dg.Failure(description=why, allow_retries=False)
    record_where(context.instance, context.run, cfg.name)  # where the run lives, which collection it writes
    store = rag.store()
    step = str(getattr(context, "op_execution_context", context).op_handle)
    embedder = pooled(rag.embedder(), context.instance, context.run.run_id, step,
                      _slots(rag))  # one model at a time across runs
    stats = IndexStats()
    events = outcomes.ItemEvents(context, layout, cfg, store, embedder.id, stats)

    def on_item(item_key: str, outcome: str) -> None:
        events(item_key, outcome)
        progress.notify(item_key, outcome)

    trigger, workers = context.run.tags.get("local_rag/trigger", "dagster"), worker_count(rag.paths(), len(keys))
    try:
        with collection_lock(rag.paths().db, cfg.name, trigger, on_wait=context.log.info):  # one run at a time
            if workers > 1:
                context.log.info(f"indexing {len(keys)} items in {workers} worker processes (dagster.workers)")
                jobs = worker_jobs(rag.paths(), cfg, keys, workers, force, _pool(context, rag, step))
                index_in_workers(store, jobs, on_item=on_item, on_work=progress.notify_work, stats=stats,
                                 log=context.log.info)
            else:
                index_keys(store, embedder, cfg, keys, force=force, on_item=on_item, on_work=progress.notify_work,
                           stats=stats)
    finally:
        events.flush()  # items written before an error keep their materialisations
    events.finish()
    context.log.info(f"{cfg.name}: {stats.as_metadata()}")
    if events.failed:
        context.log.warning(f"{len(events.failed)} item(s) failed: " + "; ".join(
            f"{k}: {m}" for k, _, m in stats.failures[:10]))
        return outcomes.items_failed(stats, events.failed)
    return None


def _slots(rag: RagResource) -> int:
    return load_settings(rag.paths().config).dagster.embedder_slots


def _pool(context, rag: RagResource, step: str) -> tuple | None:
    """What a worker process needs to take turns at the embedder with every other run (PostgreSQL instance)."""
    if not uses_pool(context.instance):
        return None
    return context.instance.get_ref(), context.run.run_id, step, _slots(rag)
