"""Per-collection sensor (new → range runs, changed/deleted → one sync run) and nightly rescan schedule."""


import json
import time

import dagster as dg

from rag_pipelines.config import current_collection
from rag_pipelines.indexing.health import reap_dead_runs
from rag_pipelines.indexing.plan import plan_sync
from rag_pipelines.wiring.assets import CollectionDefs, add_item_partitions, items_op_name, sync_op_name
from rag_pipelines.wiring.outcomes import record_unlogged
from rag_pipelines.wiring import shards
from rag_pipelines.wiring.resources import RagResource

RANGE_RUN_MAX = 1_000  # keys per range run for new items
RANGE_START, RANGE_END = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"
ACTIVE = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
          dg.DagsterRunStatus.STARTED]


def range_tags(first: str, last: str) -> dict[str, str]:
    return {RANGE_START: first, RANGE_END: last}


def contiguous_ranges(ordered: list[str], wanted: set[str], max_len: int = RANGE_RUN_MAX) -> list[tuple[str, str]]:
    """(first, last) key ranges covering `wanted` in partition order, each at most `max_len` keys."""
    out, start, prev, length = [], None, None, 0
    for key in ordered:
        if key in wanted and start is not None and length < max_len:
            prev, length = key, length + 1
            continue
        if start is not None:
            out.append((start, prev))
            start = None
        if key in wanted:
            start, prev, length = key, key, 1
    if start is not None:
        out.append((start, prev))
    return out


def run_requests(instance: dg.DagsterInstance, c: CollectionDefs, new: list[str], changed: list[str],
                 deleted: list[str], tags: dict[str, str] | None = None) -> list[dg.RunRequest]:
    """Few runs for any number of changes: new keys as contiguous ranges of their shards, the rest as one sync run."""
    add_item_partitions(instance, c.layout, new)
    requests = []
    for i, keys in sorted(c.layout.split(new).items()):
        ordered = instance.get_dynamic_partitions(c.layout.partitions_name(i))  # only this shard's keys
        new_only = {"ops": {items_op_name(c.cfg.name, c.layout.suffix(i)): {"config": {"force": False}}}}
        requests += [dg.RunRequest(job_name=c.shards[i].index_job.name, tags={**range_tags(a, b), **(tags or {})},
                                   run_config=new_only) for a, b in contiguous_ranges(ordered, set(keys))]
    if changed or deleted:
        config = {"ops": {sync_op_name(c.cfg.name): {"config": {"reindex": changed, "delete": deleted}}}}
        requests.append(dg.RunRequest(job_name=c.sync_job.name, run_config=config, tags=tags or {}))
    return requests


def outgrown_message(c: CollectionDefs, items: int) -> str:
    return (f"'{c.cfg.name}' has {items:,} items, more than its {c.layout.count} asset(s) hold at "
            f"{shards.SHARD_BOUND:,} partitions each; its partitions go on growing past that until you run "
            f"`local-rag index {c.cfg.name}` once, which spreads them over more assets (nothing is re-embedded).")


def build_sensor(c: CollectionDefs) -> dg.SensorDefinition:
    @dg.sensor(
        name=f"{c.cfg.safe_name}_sensor",
        jobs=[s.index_job for s in c.shards] + [c.sync_job],
        minimum_interval_seconds=c.cfg.sensor_interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Scans the sources of '{c.cfg.name}' and requests runs for new, changed and deleted items.",
    )
    def sensor(context: dg.SensorEvaluationContext, rag: RagResource):
        for info in reap_dead_runs(context.instance):  # any collection's dead run blocks the one-run queue
            context.log.warning(f"marked run {info.run_id} ({info.job_name}) failed: {info.reason}")
        why = shards.stale(context.instance, c.layout)
        if why:
            return dg.SkipReason(why)
        record_unlogged(context.instance, rag.store(), c.cfg, c.layout)  # after a killed run
        if any(context.instance.get_runs(filters=dg.RunsFilter(job_name=job, statuses=ACTIVE), limit=1)
               for job in [*(s.index_job.name for s in c.shards), c.sync_job.name]):  # any shard's or the sync
            return dg.SkipReason("a run of this collection is in progress; its changes are picked up after it")
        cfg = current_collection(rag.paths(), c.cfg)  # config.yaml as it is now: edits apply without a reload
        if cfg is None:
            return dg.SkipReason(f"'{c.cfg.name}' is no longer configured; reload the code location (Deployment → "
                                 "Reload in the UI) to drop this sensor")
        t0 = time.perf_counter()
        plan = plan_sync(rag.store(), cfg)
        cursor = json.dumps({"last_scan": time.time(), "items": len(plan.entries),
                             "scan_seconds": round(time.perf_counter() - t0, 2), "unavailable": plan.unavailable})
        for source, why in plan.unavailable.items():
            context.log.warning(f"source {source} of '{cfg.name}' skipped: {why}")
        if c.layout.outgrown(len(plan.entries)):
            context.log.warning(outgrown_message(c, len(plan.entries)))
        if plan.empty:
            skipped = f"; skipped unreadable sources: {', '.join(plan.unavailable)}" if plan.unavailable else ""
            return dg.SensorResult(skip_reason=f"no changes in {len(plan.entries)} items{skipped}", cursor=cursor)
        requests = run_requests(context.instance, c, plan.new, plan.changed, plan.deleted,
                                tags={"local_rag/trigger": "sensor"})
        return dg.SensorResult(run_requests=requests, cursor=cursor)

    return sensor


def build_schedule(c: CollectionDefs) -> dg.ScheduleDefinition:
    return dg.ScheduleDefinition(
        name=f"{c.cfg.safe_name}_rescan",
        cron_schedule=c.cfg.schedule,
        job=c.sync_job,
        run_config={"ops": {sync_op_name(c.cfg.name): {"config": {"rescan": True}}}},
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description=f"Full rescan of '{c.cfg.name}': syncs every change and retries failed items.",
    )
