"""Per-collection Dagster objects: the item-partitioned asset (with its checks), its index (range) and sync jobs."""


import warnings
from dataclasses import dataclass

import dagster as dg
from pydantic import Field

from rag_search.config import load_settings

from rag_pipelines.indexing import progress
from rag_pipelines.config import CollectionConfig, current_collection, safe_name
from rag_pipelines.indexing.items import IndexStats, index_keys
from rag_pipelines.indexing.lock import collection_lock
from rag_pipelines.indexing.plan import plan_sync
from rag_pipelines.wiring import checks, outcomes
from rag_pipelines.wiring.pool import pooled
from rag_pipelines.wiring.resources import RagResource

warnings.filterwarnings("ignore", category=dg.BetaWarning)
warnings.filterwarnings("ignore", category=dg.PreviewWarning)

ADD_CHUNK = 10_000  # dynamic partitions are added in chunks (SQLite variable limits on some builds)


@dataclass(frozen=True)
class CollectionDefs:
    cfg: CollectionConfig
    partitions: dg.DynamicPartitionsDefinition
    asset: dg.AssetsDefinition
    index_job: object  # an unresolved asset job (define_asset_job)
    sync_job: dg.JobDefinition

    @property
    def key(self) -> dg.AssetKey:
        return self.asset.key


def items_key(name: str) -> dg.AssetKey:
    return dg.AssetKey([safe_name(name), "items"])


def partitions_name(name: str) -> str:
    return f"{safe_name(name)}_items"


def items_op_name(name: str) -> str:
    return f"{safe_name(name)}__items"


def sync_op_name(name: str) -> str:
    return f"{safe_name(name)}_sync"


def add_partitions(instance: dg.DagsterInstance, name: str, keys: list[str]) -> list[str]:
    """Add keys not yet present, in order, in chunks; returns the keys added."""
    existing = set(instance.get_dynamic_partitions(name))
    todo = [k for k in keys if k not in existing]
    for i in range(0, len(todo), ADD_CHUNK):
        instance.add_dynamic_partitions(name, todo[i : i + ADD_CHUNK])
    return todo


class ItemsConfig(dg.Config):
    force: bool = Field(
        default=True,
        description="Re-read, re-parse and re-chunk the selected items even when they are unchanged (their vectors "
        "still come from the embedding cache). True for runs started from the UI; the CLI, watcher and sensor "
        "set false. False skips items whose content is unchanged.",
    )


def build_collection(cfg: CollectionConfig) -> CollectionDefs:
    partitions = dg.DynamicPartitionsDefinition(name=partitions_name(cfg.name))
    key = items_key(cfg.name)
    safe = cfg.safe_name

    @dg.multi_asset(
        name=items_op_name(cfg.name),
        specs=[dg.AssetSpec(
            key, group_name=safe, partitions_def=partitions, kinds={"sqlite"},
            description=f"Items of the '{cfg.name}' collection, one partition per item: read, parsed, chunked, "
            f"embedded and written to rag.db. A failed item is a failed partition. {cfg.description}".strip(),
        )],
        check_specs=checks.check_specs(key),
        can_subset=True,  # the checks can run alone from the UI
        partitions_def=partitions,
        backfill_policy=dg.BackfillPolicy.single_run(),
    )
    def items(context: dg.AssetExecutionContext, config: ItemsConfig, rag: RagResource):
        failure, now = None, current_collection(rag.paths(), cfg) or cfg  # config.yaml as it is now
        if key in context.selected_asset_keys:
            failure = _index_partitions(context, now, key, partitions.name, rag, config.force)
        names = {k.name for k in context.selected_asset_check_keys}
        yield from checks.as_results(checks.evaluate(now, partitions.name, rag, context.instance, names), key)
        if failure:
            raise failure

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
    )
    def sync(context: dg.OpExecutionContext, rag: RagResource):
        conf, now = context.op_config, current_collection(rag.paths(), cfg) or cfg  # config.yaml as it is now
        store = rag.store()
        reindex, delete = list(conf["reindex"]), list(conf["delete"])
        if conf["rescan"]:
            plan = plan_sync(store, now, force=conf["force"], retry_failed=True)
            add_partitions(context.instance, partitions.name, plan.new)
            reindex, delete = plan.new + plan.changed, plan.deleted
            context.log.info(f"rescan: {len(plan.new)} new, {len(plan.changed)} changed, {len(plan.deleted)} deleted")
        if context.run.is_resume_retry:
            reindex = outcomes.retry_keys(store, now, reindex)
            context.log.info(f"re-execution from failure: retrying the {len(reindex)} items not indexed")
        failure = _index(context, now, key, partitions.name, rag, reindex + delete, conf["force"])
        for evaluation in checks.as_evaluations(checks.evaluate(now, partitions.name, rag, context.instance), key):
            context.log_event(evaluation)
        if failure:
            raise failure

    sync_job = dg.GraphDefinition(name=f"{safe}_sync_graph", node_defs=[sync]).to_job(
        name=f"{safe}_sync",
        description=f"Re-index changed items and drop deleted ones of '{cfg.name}' (one run for any number).",
        tags={"local_rag/collection": cfg.name},
    )
    index_job = dg.define_asset_job(
        f"{safe}_index", selection=dg.AssetSelection.assets(key),
        tags={"local_rag/collection": cfg.name},
        description=f"Index a contiguous range of new items of '{cfg.name}'.",
    )
    return CollectionDefs(cfg, partitions, items, index_job, sync_job)


def _index_partitions(context: dg.AssetExecutionContext, cfg: CollectionConfig, key: dg.AssetKey,
                      partitions_name: str, rag: RagResource, force: bool) -> dg.Failure | None:
    """The run's partitions; a re-execution from failure retries only the items not indexed."""
    keys = list(context.partition_keys)
    if context.run.is_resume_retry:
        keys = outcomes.retry_keys(rag.store(), cfg, keys)
        context.log.info(f"re-execution from failure: retrying the {len(keys)} of {len(context.partition_keys)} "
                         "items that are not indexed; the others are left as they are")
    return _index(context, cfg, key, partitions_name, rag, keys, force)


def _index(context, cfg: CollectionConfig, key: dg.AssetKey, partitions_name: str, rag: RagResource,
           keys: list[str], force: bool) -> dg.Failure | None:
    """Index keys, logging each item's outcome on its partition; the Failure to raise if items failed."""
    store = rag.store()
    step = str(getattr(context, "op_execution_context", context).op_handle)
    embedder = pooled(rag.embedder(), context.instance, context.run.run_id, step,
                      load_settings(rag.paths().config).dagster.embedder_slots)  # one model at a time across runs
    stats = IndexStats()
    events = outcomes.ItemEvents(context, key, partitions_name, cfg, store, embedder.id, stats)

    def on_item(item_key: str, outcome: str) -> None:
        events(item_key, outcome)
        progress.notify(item_key, outcome)

    trigger = context.run.tags.get("local_rag/trigger", "dagster")
    try:
        with collection_lock(rag.paths().db, cfg.name, trigger, on_wait=context.log.info):  # one run at a time
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
