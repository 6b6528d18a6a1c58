"""A large collection's per-item partitions are spread over shard assets (real Dagster runs, a temp DAGSTER_HOME).

The bound is lowered to 5 partitions per asset so the fixture vault's 11 items needs 8 shards: every item lands in
the shard its key hashes to (and is materialised there), a re-index of one item touches its shard only, a
deleted item leaves its shard, a failed item fails in its shard, the sensor asks each shard's own job, and an
index made before sharding migrates without re-embedding anything.
"""

from __future__ import annotations

import dagster as dg
import pytest
from pipeline_env import hash_embedded_home

from rag_pipelines.config import load_collections
from rag_pipelines.indexing import runs
from rag_pipelines.wiring import resources, shards
from rag_pipelines.wiring.definitions import build_definitions, load_definitions
from rag_pipelines.wiring.shards import Layout, shard_of
from rag_search.store import reads

BOUND = 5
DAILY = "Daily/2024-03-15.md"


@pytest.fixture
def home(tmp_path, monkeypatch):
    paths, vault, embedder = hash_embedded_home(tmp_path, monkeypatch)
    yield paths, vault, embedder, monkeypatch
    resources.close_all()


def sharded(monkeypatch) -> None:
    monkeypatch.setattr(shards, "SHARD_BOUND", BOUND)


def states() -> dict:
    return reads.item_states(resources.RagResource().store(), "notes")


def status(instance: dg.DagsterInstance, layout: Layout, i: int) -> tuple[set[str], set[str]]:
    """(materialised, failed) partitions of shard i, as the UI's partitions page counts them."""
    from dagster._core.storage.partition_status_cache import get_and_update_asset_status_cache_value

    pdef = dg.DynamicPartitionsDefinition(name=layout.partitions_name(i))
    value = get_and_update_asset_status_cache_value(instance, layout.asset_key(i), pdef)
    if value is None:  # a shard that never had an event
        return set(), set()
    failed = set(value.deserialize_failed_partition_subsets(pdef).get_partition_keys())
    materialized = set(value.deserialize_materialized_partition_subsets(pdef).get_partition_keys()) - failed
    live = set(instance.get_dynamic_partitions(layout.partitions_name(i)))
    return materialized & live, failed & live


def assets_in_run(instance, run_id: str) -> dict[str, set[dg.AssetKey]]:
    """Item key → the asset keys its events in this run were logged to."""
    out: dict[str, set[dg.AssetKey]] = {}
    for kind in (dg.DagsterEventType.ASSET_MATERIALIZATION, dg.DagsterEventType.ASSET_OBSERVATION):
        for entry in instance.all_logs(run_id, of_type=kind):
            event = entry.dagster_event
            out.setdefault(event.partition, set()).add(event.asset_key)
    return out


def test_items_land_in_the_shard_their_key_hashes_to(home):
    paths, _, _, monkeypatch = home
    sharded(monkeypatch)
    [summary] = runs.index_collections(paths, ["notes"])
    assert summary.resharded == (1, 8) and summary.outcomes == {"indexed": len(states())} and len(states()) > BOUND
    instance = dg.DagsterInstance.get()
    layout = Layout("notes", shards.stored_count(instance, "notes"))
    assert layout.count == 8
    keys = set(states())
    seen: set[str] = set()
    for i in range(layout.count):
        own = {k for k in keys if shard_of(k, 8) == i}
        assert set(instance.get_dynamic_partitions(layout.partitions_name(i))) == own
        assert len(own) <= BOUND
        assert status(instance, layout, i) == (own, set())  # each item materialised in its own shard
        seen |= own
    assert seen == keys
    assert not instance.get_dynamic_partitions("notes_items")  # nothing in the unsharded definition
    defs = load_definitions(paths)  # the code location the UI loads reads the layout from the instance
    graph = defs.resolve_asset_graph()
    mine = [k for k in graph.get_all_asset_keys() if k.path[0] == "notes"]
    assert sorted(mine) == [layout.asset_key(i) for i in range(8)]
    assert {graph.get(k).group_name for k in mine} == {"notes"}  # one group in the UI


def test_reindexing_one_item_touches_its_shard_only(home):
    paths, vault, _, monkeypatch = home
    sharded(monkeypatch)
    runs.index_collections(paths, ["notes"])
    (vault / DAILY).write_text("Met with Carol about the orchard.\n")
    [summary] = runs.index_collections(paths, ["notes"])
    assert summary.outcomes == {"indexed": 1}
    instance = dg.DagsterInstance.get()
    layout = Layout("notes", 8)
    [run_id] = summary.run_ids
    assert assets_in_run(instance, run_id) == {DAILY: {layout.key_of(DAILY)}}
    checked = {e.dagster_event.event_specific_data.asset_key for e in instance.all_logs(
        run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)}
    assert checked == {layout.key_of(DAILY)}  # the checks of the shard it touched


def test_a_deleted_item_leaves_its_shard(home):
    paths, vault, _, monkeypatch = home
    sharded(monkeypatch)
    runs.index_collections(paths, ["notes"])
    instance = dg.DagsterInstance.get()
    layout = Layout("notes", 8)
    before = {i: set(instance.get_dynamic_partitions(layout.partitions_name(i))) for i in range(8)}
    (vault / DAILY).unlink()
    [summary] = runs.index_collections(paths, ["notes"])
    assert summary.outcomes == {"deleted": 1} and DAILY not in states()
    for i in range(8):
        after = set(instance.get_dynamic_partitions(layout.partitions_name(i)))
        assert after == before[i] - {DAILY}


def test_a_failed_item_fails_in_its_shard(home):
    paths, vault, _, monkeypatch = home
    sharded(monkeypatch)
    (vault / "broken.pdf").write_bytes(b"%PDF-1.7 this is not a pdf")
    [summary] = runs.index_collections(paths, ["notes"])
    assert summary.outcomes["failed"] == 1
    instance = dg.DagsterInstance.get()
    layout = Layout("notes", shards.stored_count(instance, "notes"))
    home_shard = layout.index("broken.pdf")
    for i in range(layout.count):
        materialized, failed = status(instance, layout, i)
        assert failed == ({"broken.pdf"} if i == home_shard else set())
        assert materialized == {k for k, s in states().items() if s.status == "indexed" and layout.index(k) == i}
    [observation] = instance.fetch_observations(dg.AssetRecordsFilter(
        asset_key=layout.asset_key(home_shard), asset_partitions=["broken.pdf"]), limit=5).records
    assert observation.asset_observation.metadata["error_kind"].value == "corrupt"


def test_the_sensor_requests_a_range_run_of_the_new_items_shard(home):
    paths, vault, _, monkeypatch = home
    sharded(monkeypatch)
    runs.index_collections(paths, ["notes"])
    instance = dg.DagsterInstance.get()
    layout = Layout("notes", shards.stored_count(instance, "notes"))
    defs, _ = build_definitions(load_collections(paths), layouts={"notes": layout})
    context = dg.build_sensor_context(instance=instance, definitions=defs, resources={"rag": resources.RagResource()})
    assert defs.resolve_sensor_def("notes_sensor")(context).run_requests == []  # no change
    (vault / "New note.md").write_text("# New note\nfresh thoughts on compost\n")
    [request] = defs.resolve_sensor_def("notes_sensor")(context).run_requests
    shard = layout.index("New note.md")
    assert request.job_name == f"notes_index_s{shard:02d}"
    assert request.tags["dagster/asset_partition_range_start"] == "New note.md"
    assert "New note.md" in instance.get_dynamic_partitions(layout.partitions_name(shard))
    result = defs.resolve_job_def(request.job_name).execute_in_process(
        instance=instance, tags=request.tags, run_config=request.run_config)
    assert assets_in_run(instance, result.run_id) == {"New note.md": {layout.asset_key(shard)}}


def test_an_unsharded_index_migrates_without_re_embedding(home):
    paths, _, embedder, monkeypatch = home
    runs.index_collections(paths, ["notes"])  # made before sharding: one asset, notes/items
    instance = dg.DagsterInstance.get()
    old = dg.AssetKey(["notes", "items"])
    assert len(instance.get_dynamic_partitions("notes_items")) == len(states()) and instance.has_asset_key(old)
    embedded, chunks = len(embedder.calls), {k: s.sha256 for k, s in states().items()}

    sharded(monkeypatch)  # the collection is now over the bound: the next index spreads it
    [summary] = runs.index_collections(paths, ["notes"])
    assert summary.resharded == (1, 8) and summary.outcomes == {"unchanged": len(chunks)}
    assert len(embedder.calls) == embedded  # nothing re-embedded; the store kept its items
    assert {k: s.sha256 for k, s in states().items()} == chunks
    layout = Layout("notes", 8)
    for i in range(8):
        own = {k for k in chunks if layout.index(k) == i}
        assert status(instance, layout, i) == (own, set())  # each item logged in its new shard
    assert instance.get_dynamic_partitions("notes_items") == [] and not instance.has_asset_key(old)
    [again] = runs.index_collections(paths, ["notes"])  # stable: nothing moves or runs again
    assert again.resharded is None and again.run_ids == []



def test_a_code_location_loaded_before_a_reshard_asks_for_a_reload(home):
    paths, _, _, monkeypatch = home
    runs.index_collections(paths, ["notes"])
    old_defs = load_definitions(paths)  # what a running `local-rag ui` holds: one asset
    sharded(monkeypatch)
    runs.index_collections(paths, ["notes"])
    instance = dg.DagsterInstance.get()
    context = dg.build_sensor_context(instance=instance, definitions=old_defs,
                                      resources={"rag": resources.RagResource()})
    result = old_defs.resolve_sensor_def("notes_sensor")(context)
    assert isinstance(result, dg.SkipReason) and "reload" in result.skip_message
    assert instance.get_dynamic_partitions("notes_items") == []  # it added nothing to the retired asset
    job = old_defs.resolve_job_def("notes_sync")
    run = job.execute_in_process(instance=instance, raise_on_error=False, run_config={
        "ops": {"notes_sync": {"config": {"reindex": [DAILY]}}}})
    assert not run.success
    assert "reload" in run.get_step_failure_events()[0].event_specific_data.error.message
