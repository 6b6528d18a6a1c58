"""Running the pipelines in-process for the CLI and the watcher: the runs land in DAGSTER_HOME, visible in the UI."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Callable

from rag_search.config import Paths
from rag_search.errors import RagError
from rag_search.store import reads

from rag_pipelines.indexing import progress
from rag_pipelines.indexing.lock import collection_lock
from rag_pipelines.config import load_collections
from rag_pipelines.indexing.plan import SyncPlan, plan_sync

PlanListener = Callable[[str, SyncPlan], None]
CLI_RANGE_MAX = 5_000  # keys per in-process range run (sensor runs stay smaller for the daemon's queue)


@dataclass
class RunSummary:
    collection: str
    files: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    run_ids: list[str] = field(default_factory=list)
    failures: list[dict] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)  # source → why it was skipped
    reaped: list[str] = field(default_factory=list)  # dead earlier runs marked failed before this one
    moved: int = 0  # unchanged items found at a new place (a re-pointed collection): their URIs were updated
    resharded: tuple[int, int] | None = None  # (assets before, after) when the collection outgrew its assets

    @property
    def unchanged(self) -> int:
        touched = sum(self.outcomes.values()) - self.outcomes.get("deleted", 0)
        return self.files - touched + self.outcomes.get("unchanged", 0)

    def line(self) -> str:
        o = self.outcomes
        line = (f"{self.collection}: {o.get('indexed', 0)} indexed, {self.unchanged} unchanged, "
                f"{o.get('failed', 0)} failed, {o.get('deleted', 0)} deleted ({len(self.run_ids)} Dagster run{'' if len(self.run_ids) == 1 else 's'})")
        if self.moved:
            line += f"\n  {self.moved} unchanged item(s) now point to their new location"
        if self.resharded:
            line += (f"\n  its items' Dagster partitions were spread from {self.resharded[0]} over "
                     f"{self.resharded[1]} assets (bookkeeping only: nothing was re-embedded)")
        for source, why in self.unavailable.items():
            line += f"\n  skipped source {source}: {why}"
        if self.reaped:
            line += (f"\n  marked {len(self.reaped)} earlier run(s) failed: their process was gone "
                     "(killed?); what they had not written was indexed now")
        return line


def index_collections(paths: Paths, names: list[str] | None = None, *, force: bool = False,
                      keys: dict[str, list[str]] | None = None,
                      on_plan: PlanListener | None = None, trigger: str = "cli",
                      retry_failed: bool = True, wait: bool = True,
                      on_wait: Callable[[str], None] | None = None) -> list[RunSummary]:
    """Sync the named collections (all when None) through their Dagster jobs, executed in this process.

    With `keys`, only those items of each collection are synced (the watcher's path); else the
    sources are scanned. Failed items are retried, unless `retry_failed` is false: then only when
    their stamp changed (the watcher, so an unchanged broken file is not re-read at every event).
    One run per collection at a time: when another process is indexing one, this waits for it (telling
    `on_wait`), or raises CollectionBusy when `wait` is false.
    """
    import dagster as dg

    from rag_pipelines.indexing.health import reap_dead_runs
    from rag_pipelines.wiring.instance import ensure_instance
    from rag_pipelines.wiring.pool import writers_pooled
    from rag_pipelines.wiring.resources import RagResource

    collections = load_collections(paths)
    unknown = [n for n in names or [] if n not in collections]
    if unknown:
        known = ", ".join(sorted(collections)) or "none"
        raise RagError(f"No configured collection named {', '.join(unknown)} (configured: {known}). "
                       "Add it to config.yaml or use `local-rag index project NAME PATH`.")
    ensure_instance(paths)
    instance = dg.DagsterInstance.get()
    try:
        reaped = reap_dead_runs(instance)  # a killed earlier run must not block this one (or the queue)
        store = RagResource().store()
        summaries = []
        for name in names or sorted(collections):
            lock = partial(collection_lock, paths.db, name, trigger, wait=wait, on_wait=on_wait)
            summaries.append(_sync_one(instance, collections[name], store, lock, writers_pooled(instance, name),
                                       force=force, keys=keys, on_plan=on_plan, trigger=trigger,
                                       retry_failed=retry_failed,
                                       reaped=[r.run_id for r in reaped if r.collection in (None, name)]))
        return summaries
    finally:
        instance.dispose()  # closes the event log's files (their WAL is folded in) before the process ends


def _sync_one(instance, cfg, store, lock, pooled: bool, *, force: bool, keys, on_plan, trigger: str,
              retry_failed: bool, reaped: list[str]) -> RunSummary:
    """Plan one collection's sync under its lock and run it: range runs for its new items (and those that moved to
    another shard), one sync run for the rest.

    Where Dagster's pool holds the collection's writers to one (`pooled`: a PostgreSQL instance), the lock is held
    for the planning only: each run's step takes the pool's slot and then the lock, and a run waiting for the slot
    while this process held the lock would wait forever on a run that holds the slot and waits for the lock."""
    with lock():
        summary, work = _plan_one(instance, cfg, store, force=force, keys=keys, on_plan=on_plan,
                                  retry_failed=retry_failed, reaped=reaped)
        if not pooled:
            _run_planned(instance, summary, *work, force=force, tags={"local_rag/trigger": trigger})
    if pooled:
        _run_planned(instance, summary, *work, force=force, tags={"local_rag/trigger": trigger})
    summary.failures = [f.to_dict() for f in reads.failures(store, collection=cfg.name, limit=20)]
    return summary


def _plan_one(instance, cfg, store, *, force: bool, keys, on_plan, retry_failed: bool, reaped: list[str]):
    """The collection's plan, its definitions and partitions ready; (summary, (defs, collection defs, keys for
    range runs, plan))."""
    from rag_pipelines.wiring.assets import add_item_partitions
    from rag_pipelines.wiring.outcomes import record_unlogged

    name, summary = cfg.name, RunSummary(cfg.name, reaped=reaped)
    plan = plan_sync(store, cfg, force=force, retry_failed=retry_failed)
    if keys is not None and name in keys:
        wanted = set(keys.get(name, []))
        plan.new = [k for k in plan.new if k in wanted]
        plan.changed = [k for k in plan.changed if k in wanted]
        plan.deleted = [k for k in plan.deleted if k in wanted]
    summary.files, summary.unavailable, summary.moved = len(plan.entries), plan.unavailable, plan.moved
    if on_plan:
        on_plan(name, plan)
    defs, c, moved = _collection_defs(instance, cfg, len(plan.entries), summary)
    add_item_partitions(instance, c.layout, sorted(plan.entries))
    record_unlogged(instance, store, cfg, c.layout)  # after a killed or stopped run
    ranged = (set(plan.new) | moved) - set(plan.deleted)  # moved items: logged in their new shard, not re-embedded
    return summary, (defs, c, ranged, plan)


def _run_planned(instance, summary: RunSummary, defs, c, ranged: set[str], plan: SyncPlan, *, force: bool,
                 tags: dict) -> None:
    from rag_pipelines.wiring.assets import sync_op_name

    def count(key: str, outcome: str) -> None:
        summary.outcomes[outcome] = summary.outcomes.get(outcome, 0) + 1

    progress.listen(count)
    try:
        summary.run_ids += _range_runs(instance, defs, c, ranged, force, tags)
        changed = [k for k in plan.changed if k not in ranged]
        if changed or plan.deleted:
            conf = {"reindex": changed, "delete": plan.deleted, "force": force}
            job = defs.resolve_job_def(c.sync_job.name)
            summary.run_ids.append(_execute(job, instance, tags=tags,
                                            run_config={"ops": {sync_op_name(c.cfg.name): {"config": conf}}}))
    finally:
        progress.unlisten(count)


def _collection_defs(instance, cfg, items: int, summary: RunSummary):
    """The collection's Dagster definitions, on as many shards as its size needs (moving partitions when it
    outgrew its layout); returns (definitions, CollectionDefs, keys that moved to another shard)."""
    from rag_pipelines.wiring.definitions import build_definitions
    from rag_pipelines.wiring.shards import Layout, reshard, stored_count

    layout, moved = Layout(cfg.name, stored_count(instance, cfg.name)), set()
    grow = layout.outgrown(items)
    if grow:
        moved = {k for keys in reshard(instance, layout, grow).values() for k in keys}
        summary.resharded, layout = (layout.count, grow), Layout(cfg.name, grow)
    defs, built = build_definitions({cfg.name: cfg}, layouts={cfg.name: layout})
    return defs, built[cfg.name], moved


def _range_runs(instance, defs, c, wanted: set[str], force: bool, tags: dict) -> list[str]:
    """Range runs of each shard's index job over the wanted keys (contiguous in the shard's partition order)."""
    from rag_pipelines.wiring.assets import items_op_name
    from rag_pipelines.wiring.sensors import contiguous_ranges, range_tags

    run_ids = []
    for i, keys in sorted(c.layout.split(wanted).items()):
        ordered = instance.get_dynamic_partitions(c.layout.partitions_name(i))
        job = defs.resolve_job_def(c.shards[i].index_job.name)
        conf = {"ops": {items_op_name(c.cfg.name, c.layout.suffix(i)): {"config": {"force": force}}}}
        for first, last in contiguous_ranges(ordered, set(keys), CLI_RANGE_MAX):
            run_ids.append(_execute(job, instance, run_config=conf, tags={**tags, **range_tags(first, last)}))
    return run_ids


# Console quiet: progress and the summary come from the CLI; a run failed by its items is reported per item.
QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


def _execute(job, instance, run_config: dict | None = None, **kwargs) -> str:
    """Run a job in-process; errors surface as ours. A run whose items failed is marked failed in
    Dagster (so are those items' partitions), which is no error here: the summary lists the items."""
    import uuid

    import dagster as dg

    from rag_pipelines.indexing.health import owner_tags
    from rag_pipelines.wiring.origins import located
    from rag_pipelines.wiring.outcomes import is_items_failure

    run_id = str(uuid.uuid4())
    kwargs["tags"] = {**(kwargs.get("tags") or {}), **owner_tags(run_id)}
    try:
        with located(instance, job.name):  # the UI can re-execute it (wiring/origins.py)
            job.execute_in_process(instance=instance, run_config={**(run_config or {}), **QUIET}, run_id=run_id,
                                   **kwargs)
    except dg.DagsterExecutionInterruptedError:  # Ctrl-C or SIGTERM while the run was starting or between steps
        raise KeyboardInterrupt from None
    except Exception as exc:
        cause = getattr(exc, "user_exception", None) or exc.__cause__ or exc
        if is_items_failure(cause):
            return run_id
        if isinstance(cause, RagError):
            raise cause
        raise RagError(f"The Dagster run of '{job.name}' failed: {cause}. See it in the UI (`local-rag ui`).") from exc
    return run_id
