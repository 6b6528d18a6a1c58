"""The Dagster UI tells the truth per item (real materialisations in a temp DAGSTER_HOME):

a failed item is a failed partition (and only it), with its reason on the partition; a re-execution from
failure retries exactly those; a run started from the UI re-processes its partitions and never writes zeros;
each partition's metadata is its item's; checks are evaluated after every run that changes a collection,
sync runs included; the UI starts without the newsletter dialog.
"""

from __future__ import annotations

import dagster as dg
import pytest
from dagster._core.storage.tags import RESUME_RETRY_TAG, TAGS_TO_MAYBE_OMIT_ON_RETRY
from pipeline_env import hash_embedded_home, make_home

from rag_pipelines.indexing import runs
from rag_pipelines.config import load_collections
from rag_pipelines.wiring import resources
from rag_pipelines.wiring.checks import CHECKS
from rag_pipelines.wiring.definitions import build_definitions
from rag_pipelines.wiring.instance import ensure_instance
from rag_pipelines.wiring.outcomes import stored_chunks
from rag_search.config import Paths
from rag_search.store import reads

ITEMS = dg.AssetKey(["notes", "items"])
DAILY = "Daily/2024-03-15.md"


@pytest.fixture
def home(tmp_path, monkeypatch):
    paths, vault, embedder = hash_embedded_home(tmp_path, monkeypatch)
    yield paths, vault, embedder
    resources.close_all()


def store():
    return resources.RagResource().store()


def pdf(text: str) -> bytes:
    import pymupdf

    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), text)
    return doc.tobytes()


def partition_status(instance: dg.DagsterInstance) -> tuple[set[str], set[str]]:
    """(materialised, failed) partitions as the UI counts them (GraphQL `assetPartitionStatuses` and the
    partitions filter: materialised minus failed; failed from Dagster's asset status cache)."""
    from dagster._core.storage.partition_status_cache import get_and_update_asset_status_cache_value

    pdef = dg.DynamicPartitionsDefinition(name="notes_items")
    value = get_and_update_asset_status_cache_value(instance, ITEMS, pdef)
    materialized = set(value.deserialize_materialized_partition_subsets(pdef).get_partition_keys())
    failed = set(value.deserialize_failed_partition_subsets(pdef).get_partition_keys())
    live = set(instance.get_dynamic_partitions("notes_items"))
    return (materialized - failed) & live, failed & live


def indexed_keys() -> set[str]:
    return {k for k, s in reads.item_states(store(), "notes").items() if s.status == "indexed"}


def run_events(instance, run_id: str, kind: dg.DagsterEventType) -> list:
    return [e.dagster_event.event_specific_data for e in instance.all_logs(run_id, of_type=kind)]


def materialized_in(instance, run_id: str) -> dict[str, dict]:
    return {m.materialization.partition: {k: v.value for k, v in m.materialization.metadata.items()}
            for m in run_events(instance, run_id, dg.DagsterEventType.ASSET_MATERIALIZATION)}


def checks_in(instance, run_id: str) -> dict[str, bool]:
    return {e.check_name: e.passed for e in run_events(instance, run_id, dg.DagsterEventType.ASSET_CHECK_EVALUATION)}


def latest_meta(instance, key: str) -> dict:
    [record] = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=ITEMS, asset_partitions=[key]), limit=1).records
    return {k: v.value for k, v in record.asset_materialization.metadata.items()}


def test_a_failed_item_is_a_failed_partition_with_its_reason(home):
    paths, vault, _ = home
    (vault / "broken.pdf").write_bytes(b"%PDF-1.7 this is not a pdf")
    [summary] = runs.index_collections(paths, ["notes"])  # the CLI does not raise: it reports the item
    assert summary.outcomes["failed"] == 1 and summary.failures[0]["key"] == "broken.pdf"

    instance = dg.DagsterInstance.get()
    [run_id] = summary.run_ids
    assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.FAILURE
    [failure] = run_events(instance, run_id, dg.DagsterEventType.STEP_FAILURE)
    assert "broken.pdf" in failure.user_failure_data.description  # the run says which item and why
    materialized, failed = partition_status(instance)
    assert failed == {"broken.pdf"}  # red, counted under Failed
    assert materialized == indexed_keys() and "broken.pdf" not in materialized and len(materialized) >= 10
    [observation] = instance.fetch_observations(
        dg.AssetRecordsFilter(asset_key=ITEMS, asset_partitions=["broken.pdf"]), limit=5).records
    seen = observation.asset_observation
    assert seen.metadata["error_kind"].value == "corrupt" and "corrupt" in seen.description  # shown on the partition
    assert checks_in(instance, run_id) == {**{name: True for name in CHECKS}, "no_failed_items": False}


def test_each_partition_describes_its_own_item(home):
    paths, _, _ = home
    [summary] = runs.index_collections(paths, ["notes"])
    instance = dg.DagsterInstance.get()
    metas = materialized_in(instance, summary.run_ids[0])
    assert set(metas) == indexed_keys()
    for key, meta in metas.items():
        assert meta["outcome"] == "indexed" and meta["chunks"] == stored_chunks(store(), "notes", key) > 0
        assert meta["tokens"] > 0 and meta["uri"].endswith(key.split("/")[-1].replace("%25", "%"))
        assert "failures" not in meta and "indexed" not in meta  # no run totals copied onto every partition
    assert len({m["chunks"] for m in metas.values()} | {m["tokens"] for m in metas.values()}) > 2


def test_materialising_from_the_ui_reprocesses_and_keeps_the_figures(home):
    paths, _, embedder = home
    runs.index_collections(paths, ["notes"])
    instance = dg.DagsterInstance.get()
    defs, _ = build_definitions(load_collections(paths))
    job = defs.resolve_job_def("notes_index")
    chunks = stored_chunks(store(), "notes", DAILY)
    calls = len(embedder.calls)

    ui = job.execute_in_process(instance=instance, partition_key=DAILY)  # what "Materialize" sends: no config
    assert materialized_in(instance, ui.run_id)[DAILY] | {"uri": None} == {
        "outcome": "indexed", "chunks": chunks, "tokens": latest_meta(instance, DAILY)["tokens"], "uri": None,
        "embedder": embedder.id}
    assert len(embedder.calls) == calls  # re-read, re-parsed, re-chunked; every vector from the cache

    keep = job.execute_in_process(instance=instance, partition_key=DAILY,
                                  run_config={"ops": {"notes__items": {"config": {"force": False}}}})
    meta = materialized_in(instance, keep.run_id)[DAILY]
    assert meta["outcome"] == "unchanged" and meta["chunks"] == chunks > 0  # never zeros

    ordered = instance.get_dynamic_partitions("notes_items")
    backfill = job.execute_in_process(instance=instance, tags={"dagster/asset_partition_range_start": ordered[0],
                                                               "dagster/asset_partition_range_end": ordered[2]})
    assert {m["outcome"] for m in materialized_in(instance, backfill.run_id).values()} == {"indexed"}
    assert len(materialized_in(instance, backfill.run_id)) == 3


def notes_index_job():
    """The notes_index job, reconstructable (as the UI re-executes it)."""
    defs, _ = build_definitions(load_collections(Paths.from_env()))
    return defs.resolve_job_def("notes_index")


def test_reexecution_from_failure_retries_exactly_the_failed_items(home):
    paths, vault, _ = home
    (vault / "broken.pdf").write_bytes(b"%PDF-1.7 this is not a pdf")
    (vault / "also broken.pdf").write_bytes(b"%PDF-1.4 truncated")
    [summary] = runs.index_collections(paths, ["notes"])
    instance = dg.DagsterInstance.get()
    assert partition_status(instance)[1] == {"broken.pdf", "also broken.pdf"}

    (vault / "broken.pdf").write_bytes(pdf("The repaired report about herons."))
    parent = instance.get_run_by_id(summary.run_ids[0])
    ui_tags = {**{k: v for k, v in parent.tags.items() if k not in TAGS_TO_MAYBE_OMIT_ON_RETRY},
               RESUME_RETRY_TAG: "true"}  # what the UI's "Re-execute from failure" launches with
    options = dg.ReexecutionOptions.from_failure(parent.run_id, instance)
    retry = dg.execute_job(dg.reconstructable(notes_index_job), instance, reexecution_options=options,
                           tags=ui_tags, raise_on_error=False)
    assert set(materialized_in(instance, retry.run_id)) == {"broken.pdf"}  # the only one tried and indexed
    [observation] = run_events(instance, retry.run_id, dg.DagsterEventType.ASSET_OBSERVATION)
    assert observation.asset_observation.partition == "also broken.pdf"  # tried again, failed again
    materialized, failed = partition_status(instance)
    assert failed == {"also broken.pdf"} and "broken.pdf" in materialized


def tick(defs, instance):
    ctx = dg.build_sensor_context(instance=instance, definitions=defs, resources={"rag": resources.RagResource()})
    return defs.resolve_sensor_def("notes_sensor")(ctx)


def test_sensor_sync_runs_evaluate_checks_and_fail_only_their_failed_items(home):
    paths, vault, _ = home
    (vault / "report.pdf").write_bytes(pdf("Quarterly report on the orchard."))
    runs.index_collections(paths, ["notes"])
    instance = dg.DagsterInstance.get()
    assert partition_status(instance)[1] == set()

    (vault / "report.pdf").write_bytes(b"%PDF-1.7 overwritten by a broken export")
    (vault / DAILY).write_text("Met with Carol about the orchard.\n")
    defs, _ = build_definitions(load_collections(paths))
    [request] = tick(defs, instance).run_requests
    assert request.job_name == "notes_sync"
    result = defs.resolve_job_def("notes_sync").execute_in_process(
        instance=instance, run_config=request.run_config, tags=request.tags, raise_on_error=False)
    assert instance.get_run_by_id(result.run_id).status == dg.DagsterRunStatus.FAILURE
    assert set(materialized_in(instance, result.run_id)) == {DAILY}
    assert materialized_in(instance, result.run_id)[DAILY]["chunks"] == stored_chunks(store(), "notes", DAILY)
    materialized, failed = partition_status(instance)
    assert failed == {"report.pdf"} and DAILY in materialized
    assert checks_in(instance, result.run_id) == {**{n: True for n in CHECKS}, "no_failed_items": False}

    (vault / "report.pdf").unlink()  # a clean sync run evaluates them too
    [request] = tick(defs, instance).run_requests
    clean = defs.resolve_job_def("notes_sync").execute_in_process(instance=instance, run_config=request.run_config)
    assert checks_in(instance, clean.run_id) == {n: True for n in CHECKS}
    assert partition_status(instance)[1] == set()


def test_checks_run_alone_from_the_ui(home):
    paths, _, _ = home
    runs.index_collections(paths, ["notes"])
    defs, built = build_definitions(load_collections(paths))
    checks_only = dg.define_asset_job("notes_checks", selection=dg.AssetSelection.checks_for_assets(ITEMS))
    defs = dg.Definitions.merge(defs, dg.Definitions(jobs=[checks_only]))
    result = defs.resolve_job_def("notes_checks").execute_in_process(instance=dg.DagsterInstance.get())
    assert checks_in(dg.DagsterInstance.get(), result.run_id) == {n: True for n in CHECKS}
    assert result.get_asset_materialization_events() == []


def test_the_ui_starts_without_the_newsletter_dialog(tmp_path, monkeypatch):
    from dagster._core.nux import get_has_seen_nux

    paths, _ = make_home(tmp_path, monkeypatch)
    ensure_instance(paths)
    instance = dg.DagsterInstance.get()
    assert instance.nux_enabled is False and get_has_seen_nux()  # GraphQL shouldShowNux is false

    old = tmp_path / "old"  # a home whose dagster.yaml was written before the setting
    (old / "dagster").mkdir(parents=True)
    (old / "dagster" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("LOCAL_RAG_HOME", str(old))
    monkeypatch.setenv("DAGSTER_HOME", str(old / "dagster"))
    ensure_instance(Paths.from_env())
    assert get_has_seen_nux()


def test_materialising_an_item_gone_from_its_source_removes_its_partition(home):
    paths, vault, _ = home
    runs.index_collections(paths, ["notes"])
    (vault / DAILY).unlink()
    defs, _ = build_definitions(load_collections(paths))
    instance = dg.DagsterInstance.get()
    result = defs.resolve_job_def("notes_index").execute_in_process(instance=instance, partition_key=DAILY)
    assert materialized_in(instance, result.run_id) == {}
    assert DAILY not in instance.get_dynamic_partitions("notes_items") and DAILY not in indexed_keys()
    assert checks_in(instance, result.run_id)["partitions_match_files"] is True
