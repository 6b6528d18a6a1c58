"""Dagster's event log under local-rag keeps its SQLite connections open (wiring/event_log.py).

Real instances in a temp DAGSTER_HOME: the home's dagster.yaml names the storage (new homes, and old
ones written by local-rag; a hand-configured storage is left alone); what one process writes another
reads at once; a second process watching a run (as the UI does) hears every item event, also the last
ones of a burst; a real indexing run's partitions read back as materialised from a fresh instance.
"""

from __future__ import annotations

import threading
import time
import uuid

import dagster as dg
import pytest
from dagster._core.events import AssetObservationData, DagsterEvent, DagsterEventType, StepMaterializationData
from dagster._core.events.log import EventLogEntry
from fakes import HashEmbedder
from pipeline_env import make_home

from rag_pipelines.indexing import runs
from rag_pipelines.wiring import resources
from rag_pipelines.wiring.event_log import LIVE_SECONDS, LocalEventLogStorage
from rag_pipelines.wiring.instance import DAGSTER_YAML, ensure_instance
from rag_search.config import Paths

KEY = dg.AssetKey(["notes", "items"])


def item_event(run_id: str, partition: str, key: dg.AssetKey = KEY, observed: bool = False) -> EventLogEntry:
    if observed:
        event = DagsterEvent(DagsterEventType.ASSET_OBSERVATION.value, "notes_index", event_specific_data=
                             AssetObservationData(dg.AssetObservation(key, partition=partition)))
    else:
        event = DagsterEvent(DagsterEventType.ASSET_MATERIALIZATION.value, "notes_index",
                             event_specific_data=StepMaterializationData(
                                 dg.AssetMaterialization(key, partition=partition, metadata={"chunks": 1})))
    return EventLogEntry(error_info=None, level="INFO", user_message="", run_id=run_id, timestamp=time.time(),
                         dagster_event=event, job_name="notes_index")


def test_local_rag_homes_use_the_kept_open_event_log(tmp_path, monkeypatch):
    paths, _ = make_home(tmp_path, monkeypatch)
    ensure_instance(paths)
    assert isinstance(dg.DagsterInstance.get().event_log_storage, LocalEventLogStorage)

    old = paths.dagster_home / "dagster.yaml"  # a home made before: local-rag's yaml without the storage
    old.write_text(DAGSTER_YAML)
    ensure_instance(paths)
    ensure_instance(paths)  # added once
    assert old.read_text().count("LocalEventLogStorage") == 1
    assert isinstance(dg.DagsterInstance.get().event_log_storage, LocalEventLogStorage)

    custom = DAGSTER_YAML + "storage:\n  postgres:\n    postgres_url: {env: PG_URL}\n"
    old.write_text(custom)  # the user moved Dagster to Postgres: not ours to change
    ensure_instance(paths)
    assert old.read_text() == custom


def test_another_process_reads_and_watches_events_as_they_are_written(tmp_path):
    base = str(tmp_path / "runs")
    writer, ui = LocalEventLogStorage(base), LocalEventLogStorage(base)  # ui: as `dagster dev` opens it
    run_id = str(uuid.uuid4())
    writer.store_event(item_event(run_id, "first.md"))  # creates the run's shard
    heard, done = [], threading.Event()

    def on_event(entry, _cursor):
        heard.append(entry.dagster_event.partition)
        if len(heard) == 5:
            done.set()

    ui.watch(run_id, None, on_event)
    try:
        for name in ("a.md", "b.md", "c.md", "d.md"):  # within 0.5 s of the last checkpoint: a timer does it
            writer.store_event(item_event(run_id, name))
        assert [r.event_log_entry.dagster_event.partition for r in ui.get_records_for_run(run_id).records] == [
            "first.md", "a.md", "b.md", "c.md", "d.md"]  # readers see committed events at once
        assert done.wait(10 * LIVE_SECONDS + 5), f"the watcher heard only {heard}"
        assert heard == ["first.md", "a.md", "b.md", "c.md", "d.md"]
        latest = ui.get_latest_materialization_events([KEY])[KEY]
        assert latest.dagster_event.partition == "d.md"
    finally:
        ui.end_watch(run_id, on_event)
        ui.dispose()
        writer.dispose()
    fresh = LocalEventLogStorage(base)
    assert len(fresh.get_records_for_run(run_id).records) == 5
    fresh.dispose()


def test_an_indexing_run_reads_back_from_a_fresh_instance(tmp_path, monkeypatch):
    paths, _ = make_home(tmp_path, monkeypatch)
    monkeypatch.setattr(resources, "load_embedder", lambda settings, paths=None: HashEmbedder())
    try:
        [summary] = runs.index_collections(paths, ["notes"])
    finally:
        resources.close_all()
    indexed = summary.outcomes["indexed"]
    assert indexed > 3
    ensure_instance(Paths.from_env())
    instance = dg.DagsterInstance.get()
    assert isinstance(instance.event_log_storage, LocalEventLogStorage)
    materialised = instance.get_materialized_partitions(KEY)
    assert len(materialised) == indexed
    [run] = instance.get_runs()
    assert run.status == dg.DagsterRunStatus.SUCCESS
    assert len([r for r in instance.get_records_for_run(run.run_id).records
                if r.event_log_entry.dagster_event_type == DagsterEventType.ASSET_MATERIALIZATION]) == indexed


def test_a_batch_of_item_events_reads_back_as_if_written_one_by_one(tmp_path):
    base = str(tmp_path / "runs")
    storage, other = LocalEventLogStorage(base), dg.AssetKey(["mail", "items"])
    run_id = str(uuid.uuid4())
    batch = [item_event(run_id, f"n{i:03}.md") for i in range(120)]
    batch += [item_event(run_id, "m1", other), item_event(run_id, "n000.md", observed=True),
              item_event(run_id, "m2", other)]
    storage.store_event_batch(batch)
    [record] = storage.get_asset_records([KEY])  # the observation after n119.md is no materialisation
    assert record.asset_entry.last_materialization.dagster_event.partition == "n119.md"
    storage.store_event_batch([item_event(run_id, "late.md"), item_event("", "runless.md")])  # mixed: one by one
    fresh = LocalEventLogStorage(base)
    try:
        assert len(fresh.get_records_for_run(run_id).records) == 124
        assert fresh.get_materialized_partitions(KEY) == {f"n{i:03}.md" for i in range(120)} | {"late.md", "runless.md"}
        assert fresh.get_materialized_partitions(other) == {"m1", "m2"}
        latest = fresh.get_latest_materialization_events([KEY, other])
        assert latest[KEY].dagster_event.partition == "runless.md"
        assert latest[other].dagster_event.partition == "m2"
        [record] = fresh.get_asset_records([KEY])
        assert record.asset_entry.last_materialization.dagster_event.partition == "runless.md"
    finally:
        fresh.dispose()
        storage.dispose()


class DiesAfter(HashEmbedder):
    """The embedding server going away mid-run: the fifth call raises."""

    def embed_documents(self, texts, progress=None):
        if len(self.calls) == 4:
            raise RuntimeError("the embedding server went away")
        return super().embed_documents(texts, progress)


def test_a_run_that_dies_keeps_the_materialisations_of_the_items_it_wrote(tmp_path, monkeypatch):
    from rag_search.errors import RagError
    from rag_search.store.item_writer import ItemWriter
    from rag_search.store import reads

    paths, _ = make_home(tmp_path, monkeypatch)
    monkeypatch.setattr(resources, "load_embedder", lambda settings, paths=None: DiesAfter())
    add = ItemWriter.add
    monkeypatch.setattr(ItemWriter, "add", lambda self, item: (add(self, item), self.flush()))  # one item a group
    try:
        with pytest.raises(RagError, match="went away"):
            runs.index_collections(paths, ["notes"])
        written = {k for k, s in reads.item_states(resources.RagResource().store(), "notes").items()
                   if s.status == "indexed"}
    finally:
        resources.close_all()
    assert len(written) == 4  # fewer than a batch, and well within its 0.5 s
    ensure_instance(Paths.from_env())
    assert dg.DagsterInstance.get().get_materialized_partitions(KEY) == written


def test_disposing_with_a_checkpoint_pending_closes_every_file(tmp_path):
    base = tmp_path / "runs"
    storage = LocalEventLogStorage(str(base))
    runs_ = [str(uuid.uuid4()) for _ in range(6)]  # more shards than it keeps open
    for run_id in runs_:
        storage.store_event(item_event(run_id, "a.md"))
        storage.store_event(item_event(run_id, "b.md"))  # within 0.5 s: a timer is pending
    assert storage._timers
    storage.dispose()
    time.sleep(LIVE_SECONDS + 0.5)  # the timers were cancelled (or do nothing): no file is reopened
    assert not list(base.glob("*.db-wal")) and not storage._engines
    fresh = LocalEventLogStorage(str(base))
    assert [len(fresh.get_records_for_run(r).records) for r in runs_] == [2] * 6
    fresh.dispose()
