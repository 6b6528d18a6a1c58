"""The Dagster pipelines for real: in-process runs in a temp DAGSTER_HOME, sensor ticks with a real cursor."""

from __future__ import annotations

import json

import dagster as dg
import pytest
from pipeline_env import make_home

from rag_pipelines.indexing import runs
from rag_pipelines.config import load_collections
from rag_pipelines.indexing.items import index_keys
from rag_pipelines.wiring import resources
from rag_pipelines.wiring.definitions import build_definitions
from rag_pipelines.wiring.sensors import RANGE_END, RANGE_START
from rag_search.retrieval import Filters, SearchEngine, SearchRequest
from rag_search.store import reads

EXPECTED_KEYS = {
    "Archive/Runbook/Runbook.md", "Archive/bad yaml.md", "Archive/bom crlf.md", "Archive/json frontmatter.md",
    "Board.canvas", "Daily/2024-03-15.md", "Help/Formatting help.md", "Projects/Runbook (conflicted copy).md", "Projects/Runbook.md",
    "Projects/Work/Kube Upgrade.md", "Ünïcode folder/Café, [draft] 100%25 done.md",
}


@pytest.fixture
def home(tmp_path, monkeypatch):
    paths, vault = make_home(tmp_path, monkeypatch)
    yield paths, vault
    resources.close_all()


def store():
    return resources.RagResource().store()


def test_cli_index_runs_through_dagster_and_lands_in_the_instance(home):
    paths, vault = home
    [summary] = runs.index_collections(paths, ["notes"])
    assert summary.outcomes == {"indexed": len(EXPECTED_KEYS)} and len(summary.run_ids) == 1
    assert set(reads.item_states(store(), "notes")) == EXPECTED_KEYS  # .obsidian, .trash, .git, Templates, png, site-options.json excluded

    instance = dg.DagsterInstance.get()
    run = instance.get_run_by_id(summary.run_ids[0])
    assert run.job_name == "notes_index" and run.tags["local_rag/trigger"] == "cli"
    assert set(instance.get_dynamic_partitions("notes_items")) == EXPECTED_KEYS
    materialized = instance.get_materialized_partitions(dg.AssetKey(["notes", "items"]))
    assert materialized == EXPECTED_KEYS
    evaluations = [e.dagster_event.event_specific_data for e in instance.all_logs(run.run_id)
                   if e.dagster_event and e.dagster_event.event_type_value == "ASSET_CHECK_EVALUATION"]
    passed = {ev.check_name: ev.passed for ev in evaluations}
    assert passed == {"fts_rows_match_chunks": True, "vectors_match_chunks": True, "dimensions_match_embedder": True,
                      "partitions_match_files": True, "no_failed_items": True}


def test_metadata_from_paths_and_config_is_searchable(home):
    paths, _ = home
    runs.index_collections(paths, ["notes"])
    engine = SearchEngine(store(), resources.RagResource().embedder())
    hits = engine.search(SearchRequest("iptables", filters=Filters(metadata={"area": "Work"}))).hits
    assert hits and hits[0].key == "Projects/Work/Kube Upgrade.md"
    assert hits[0].metadata["owner"] == "me" and hits[0].metadata["status"] == "in-progress"
    tagged = engine.search(SearchRequest("upgrade", filters=Filters(tags=("infra",)))).hits
    assert [h.key for h in tagged] == ["Projects/Work/Kube Upgrade.md"]


def test_second_run_is_a_no_op_and_force_embeds_nothing(home):
    paths, _ = home
    runs.index_collections(paths, ["notes"])
    [again] = runs.index_collections(paths, ["notes"])
    assert again.outcomes == {} and again.run_ids == [] and again.unchanged == len(EXPECTED_KEYS)
    cfg = load_collections(paths)["notes"]
    stats = index_keys(store(), resources.RagResource().embedder(), cfg, sorted(EXPECTED_KEYS), force=True)
    assert stats.indexed == len(EXPECTED_KEYS) and stats.embedded == 0  # every vector came from the cache


def test_a_corrupt_file_fails_alone_and_is_reported(home):
    paths, vault = home
    (vault / "broken.pdf").write_bytes(b"%PDF-1.7 this is not a pdf")
    [summary] = runs.index_collections(paths, ["notes"])
    assert summary.outcomes == {"indexed": len(EXPECTED_KEYS), "failed": 1}
    [failure] = summary.failures
    assert failure["key"] == "broken.pdf" and failure["error_kind"] == "corrupt"
    assert reads.status(store())["totals"]["failed"] == 1
    instance = dg.DagsterInstance.get()  # shown in the UI: a failed run naming the item, its partition not green
    assert instance.get_run_by_id(summary.run_ids[0]).status == dg.DagsterRunStatus.FAILURE
    assert "broken.pdf" not in instance.get_materialized_partitions(dg.AssetKey(["notes", "items"]))
    [seen] = instance.fetch_observations(dg.AssetRecordsFilter(asset_key=dg.AssetKey(["notes", "items"]),
                                                               asset_partitions=["broken.pdf"]), limit=1).records
    assert seen.asset_observation.metadata["error_kind"].value == "corrupt"
    # Dagster's "failed to materialise" event of the partition, kept (its own SQL storages drop it), as the UI's
    # partition page and Events tab ask for it: red, with the reason and metadata.
    [failed] = instance.fetch_failed_materializations(dg.AssetRecordsFilter(
        asset_key=dg.AssetKey(["notes", "items"]), asset_partitions=["broken.pdf"]), limit=5).records
    failure = failed.event_log_entry.dagster_event.asset_failed_to_materialize_data.asset_materialization_failure
    assert failure.metadata["error_kind"].value == "corrupt" and "not a readable PDF" in failure.description


def tick(defs, instance, cursor=None):
    ctx = dg.build_sensor_context(instance=instance, definitions=defs, cursor=cursor,
                                  resources={"rag": resources.RagResource()})
    return defs.resolve_sensor_def("notes_sensor")(ctx)


def execute(defs, instance, request: dg.RunRequest):
    job = defs.resolve_job_def(request.job_name)
    return job.execute_in_process(instance=instance, tags=request.tags, run_config=request.run_config or None)


def test_sensor_requests_exactly_the_changed_partitions(home):
    paths, vault = home
    defs, _ = build_definitions(load_collections(paths))
    with dg.instance_for_test() as instance:
        first = tick(defs, instance)
        [request] = first.run_requests
        ordered = instance.get_dynamic_partitions("notes_items")
        assert set(ordered) == EXPECTED_KEYS
        assert (request.tags[RANGE_START], request.tags[RANGE_END]) == (ordered[0], ordered[-1])
        result = execute(defs, instance, request)
        assert result.success  # each item's materialisation is in the event log (what the UI reads)
        assert instance.get_materialized_partitions(dg.AssetKey(["notes", "items"])) == EXPECTED_KEYS
        cursor = json.loads(first.cursor)
        assert cursor["items"] == len(EXPECTED_KEYS)

        quiet = tick(defs, instance, first.cursor)
        assert quiet.run_requests == [] and "no changes" in quiet.skip_reason.skip_message

        (vault / "Daily/2024-03-15.md").write_text("Met with Carol about the orchard.\n")  # modified
        (vault / "Projects/Runbook.md").touch()  # touched, same content
        (vault / "Archive/json frontmatter.md").unlink()  # deleted
        (vault / "Board.canvas").rename(vault / "Archive/Board moved.canvas")  # renamed
        (vault / "New note.md").write_text("# New note\nfresh thoughts on compost\n")  # added
        second = tick(defs, instance, quiet.cursor)
        by_job = {r.job_name: r for r in second.run_requests}
        assert set(by_job) == {"notes_index", "notes_sync"}
        rng = by_job["notes_index"].tags
        assert {rng[RANGE_START], rng[RANGE_END]} == {"Archive/Board moved.canvas", "New note.md"}
        sync_conf = by_job["notes_sync"].run_config["ops"]["notes_sync"]["config"]
        assert sync_conf == {"reindex": ["Daily/2024-03-15.md"], "delete": ["Archive/json frontmatter.md", "Board.canvas"]}

        for request in second.run_requests:
            execute(defs, instance, request)
        keys = set(reads.item_states(store(), "notes"))
        assert keys == (EXPECTED_KEYS - {"Archive/json frontmatter.md", "Board.canvas"}) | {
            "Archive/Board moved.canvas", "New note.md"}
        assert set(instance.get_dynamic_partitions("notes_items")) == keys
        engine = SearchEngine(store(), resources.RagResource().embedder())
        assert engine.search(SearchRequest("orchard Carol", mode="keyword")).hits[0].key == "Daily/2024-03-15.md"
        assert engine.search(SearchRequest("tomatoes", mode="keyword")).hits == []
        assert tick(defs, instance, second.cursor).run_requests == []


def test_sensor_waits_while_a_run_is_in_flight(home):
    paths, _ = home
    defs, _ = build_definitions(load_collections(paths))
    with dg.instance_for_test() as instance:
        instance.add_run(dg.DagsterRun(job_name="notes_sync", run_id="r1", status=dg.DagsterRunStatus.STARTED))
        result = tick(defs, instance)
        assert isinstance(result, dg.SkipReason) and "in progress" in result.skip_message


def test_many_new_files_become_few_runs(home):
    paths, vault = home
    for i in range(2_500):
        (vault / "bulk").mkdir(exist_ok=True)
        (vault / "bulk" / f"n{i:04}.md").write_text(f"note {i}")
    defs, built = build_definitions(load_collections(paths))
    with dg.instance_for_test() as instance:
        result = tick(defs, instance)
        assert [r.job_name for r in result.run_requests] == ["notes_index"] * 3  # ranges of at most 1,000 keys


def test_a_source_whose_load_raises_fails_only_that_item(home, monkeypatch):
    """A source's load() that raised (a Gmail message whose headers broke the parser inside load) stopped the run:
    0 indexed, 0 recorded. Now the other items index and the one that raises is a failed item with the error."""
    from rag_pipelines.sources.files import FileSource

    paths, _ = home
    real = FileSource._load_one

    def load_one(self, entry):
        if entry.key == "Projects/Runbook.md":
            raise RuntimeError("boom in the source")
        return real(self, entry)

    monkeypatch.setattr(FileSource, "_load_one", load_one)  # fault injection: a source bug on one item
    [summary] = runs.index_collections(paths, ["notes"])
    assert summary.outcomes == {"indexed": len(EXPECTED_KEYS) - 1, "failed": 1}
    [failure] = summary.failures
    assert failure["key"] == "Projects/Runbook.md" and "boom in the source" in failure["message"]
