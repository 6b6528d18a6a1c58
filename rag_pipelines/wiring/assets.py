"""Per-collection Dagster objects: the item-partitioned asset, its index (range) and sync jobs, its checks."""


import warnings
from dataclasses import dataclass

import dagster as dg

from rag_pipelines import progress
from rag_pipelines.config import CollectionConfig, safe_name
from rag_pipelines.items import IndexStats, index_keys
from rag_pipelines.scan import scan_collection
from rag_pipelines.sync import plan_sync
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
    checks: list[dg.AssetChecksDefinition]

    @property
    def key(self) -> dg.AssetKey:
        return self.asset.key


def items_key(name: str) -> dg.AssetKey:
    return dg.AssetKey([safe_name(name), "items"])


def partitions_name(name: str) -> str:
    return f"{safe_name(name)}_items"


def sync_op_name(name: str) -> str:
    return f"{safe_name(name)}_sync"


def stats_metadata(stats: IndexStats, embedder_id: str) -> dict:
    meta: dict = {**stats.as_metadata(), "embedder": embedder_id}
    if stats.failures:
        rows = "\n".join(f"| `{k}` | {kind} | {msg.replace('|', '/')} |" for k, kind, msg in stats.failures[:50])
        meta["failures"] = dg.MetadataValue.md("| item | kind | reason |\n|---|---|---|\n" + rows)
    return meta


def add_partitions(instance: dg.DagsterInstance, name: str, keys: list[str]) -> list[str]:
    """Add keys not yet present, in order, in chunks; returns the keys added."""
    existing = set(instance.get_dynamic_partitions(name))
    todo = [k for k in keys if k not in existing]
    for i in range(0, len(todo), ADD_CHUNK):
        instance.add_dynamic_partitions(name, todo[i : i + ADD_CHUNK])
    return todo


def build_collection(cfg: CollectionConfig) -> CollectionDefs:
    partitions = dg.DynamicPartitionsDefinition(name=partitions_name(cfg.name))
    key = items_key(cfg.name)
    safe = cfg.safe_name

    @dg.asset(
        key=key,
        group_name=safe,
        partitions_def=partitions,
        backfill_policy=dg.BackfillPolicy.single_run(),
        description=f"Items of the '{cfg.name}' collection, one partition per item: read, parsed, chunked, embedded "
        f"and written to rag.db. {cfg.description}".strip(),
        kinds={"sqlite"},
    )
    def items(context: dg.AssetExecutionContext, rag: RagResource) -> dg.MaterializeResult:
        embedder = rag.embedder()
        stats = index_keys(rag.store(), embedder, cfg, context.partition_keys, on_item=progress.notify)
        if stats.failures:
            context.log.warning(f"{stats.failed} item(s) failed: " + "; ".join(f"{k}: {m}" for k, _, m in stats.failures[:10]))
        return dg.MaterializeResult(metadata=stats_metadata(stats, embedder.id))

    @dg.op(
        name=sync_op_name(cfg.name),
        config_schema={
            "reindex": dg.Field([str], default_value=[], description="Keys of new or changed items."),
            "delete": dg.Field([str], default_value=[], description="Keys of items gone from disk."),
            "force": dg.Field(bool, default_value=False, description="Re-chunk and re-embed unchanged items."),
            "rescan": dg.Field(bool, default_value=False, description="Scan the sources and sync all changes."),
        },
        out={},
        description=f"Sync changed and deleted items of '{cfg.name}' in one run; logs a materialisation per item.",
    )
    def sync(context: dg.OpExecutionContext, rag: RagResource):
        conf = context.op_config
        store, embedder = rag.store(), rag.embedder()
        reindex, delete = list(conf["reindex"]), list(conf["delete"])
        if conf["rescan"]:
            plan = plan_sync(store, cfg, force=conf["force"], retry_failed=True)
            add_partitions(context.instance, partitions.name, plan.new)
            reindex, delete = plan.new + plan.changed, plan.deleted
            context.log.info(f"rescan: {len(plan.new)} new, {len(plan.changed)} changed, {len(plan.deleted)} deleted")
        stats = index_keys(store, embedder, cfg, reindex + delete, force=conf["force"], on_item=progress.notify)
        failures = {k: (kind, msg) for k, kind, msg in stats.failures}
        existing = set(context.instance.get_dynamic_partitions(partitions.name))
        for item_key, outcome in stats.outcomes.items():
            if outcome == "deleted":
                if item_key in existing:
                    context.instance.delete_dynamic_partition(partitions.name, item_key)
                continue
            meta = {"outcome": outcome, "chunks": stats.item_chunks.get(item_key, 0), "embedder": embedder.id}
            if item_key in failures:
                meta.update(error_kind=failures[item_key][0], error=failures[item_key][1])
            context.log_event(dg.AssetMaterialization(asset_key=key, partition=item_key, metadata=meta))
        context.log.info(f"sync {cfg.name}: {stats.as_metadata()}")

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
    return CollectionDefs(cfg, partitions, items, index_job, sync_job, build_checks(cfg, key, partitions))


def build_checks(cfg: CollectionConfig, key: dg.AssetKey, partitions) -> list[dg.AssetChecksDefinition]:
    def counts(store) -> dict[str, int]:
        coll = store.collection_id(cfg.name)
        q = lambda sql: store.conn.execute(sql, (coll,)).fetchone()[0]  # noqa: E731
        return {
            "chunks": q("SELECT count(*) FROM chunks WHERE collection_id = ?"),
            "fts_rows": q("SELECT count(*) FROM chunks_fts_docsize WHERE id IN (SELECT id FROM chunks WHERE collection_id = ?)"),
            "vectors": q("SELECT count(*) FROM chunk_vec WHERE collection_id = ?"),
            "failed": q("SELECT count(*) FROM items WHERE collection_id = ? AND status = 'failed'"),
        }

    @dg.asset_check(asset=key, name="fts_rows_match_chunks", description="Every chunk is in the FTS index.")
    def fts_check(rag: RagResource) -> dg.AssetCheckResult:
        c = counts(rag.store())
        return dg.AssetCheckResult(passed=c["fts_rows"] == c["chunks"], metadata=c)

    @dg.asset_check(asset=key, name="vectors_match_chunks", description="Every chunk has a vector.")
    def vec_check(rag: RagResource) -> dg.AssetCheckResult:
        c = counts(rag.store())
        return dg.AssetCheckResult(passed=c["vectors"] == c["chunks"], metadata=c)

    @dg.asset_check(asset=key, name="dimensions_match_embedder", description="Stored vectors have the embedder's dims.")
    def dims_check(rag: RagResource) -> dg.AssetCheckResult:
        recorded, emb = rag.store().embedder, rag.embedder()
        ok = recorded is None or recorded == (emb.id, emb.dimensions)
        return dg.AssetCheckResult(passed=ok, metadata={"index": str(recorded), "configured": f"{emb.id} ({emb.dimensions})"})

    @dg.asset_check(asset=key, name="partitions_match_files", description="One partition per item in the sources.")
    def partitions_check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        scan = scan_collection(cfg)
        in_sources = set(scan.items)
        parts = set(context.instance.get_dynamic_partitions(partitions.name))
        return dg.AssetCheckResult(
            passed=in_sources == parts and not scan.unavailable,
            metadata={"items": len(in_sources), "partitions": len(parts), "missing_partitions": len(in_sources - parts),
                      "stale_partitions": len(parts - in_sources), "unavailable_sources": len(scan.unavailable)},
        )

    @dg.asset_check(asset=key, name="no_failed_items", description="Items that could not be indexed (warning).")
    def failures_check(rag: RagResource) -> dg.AssetCheckResult:
        from rag_search.store import reads

        failed = reads.failures(rag.store(), collection=cfg.name, limit=20)
        table = "\n".join(f"| `{f.key}` | {f.error_kind} | {f.message} |" for f in failed)
        return dg.AssetCheckResult(
            passed=not failed, severity=dg.AssetCheckSeverity.WARN,
            metadata={"failed": len(failed), "items": dg.MetadataValue.md("| item | kind | reason |\n|---|---|---|\n" + table)},
        )

    return [fts_check, vec_check, dims_check, partitions_check, failures_check]
