"""A running Dagster code location (UI, daemon) follows config.yaml edits: its sensors plan, and its runs index, with
the collection as configured now, without a reload."""

from __future__ import annotations

import dagster as dg
import pytest
import yaml
from pipeline_env import make_home
from test_pipelines import execute, tick

from rag_pipelines.config import load_collections
from rag_pipelines.wiring import resources
from rag_pipelines.wiring.definitions import build_definitions
from rag_search.store import reads


@pytest.fixture
def home(tmp_path, monkeypatch):
    paths, vault = make_home(tmp_path, monkeypatch)
    yield paths, vault
    resources.close_all()


def test_the_sensor_and_its_runs_follow_config_edits_without_a_reload(home):
    paths, _ = home
    defs, _ = build_definitions(load_collections(paths))  # what a running code location holds: built once
    indexed = lambda: set(reads.item_states(resources.RagResource().store(), "notes"))  # noqa: E731
    with dg.instance_for_test() as instance:
        first = tick(defs, instance)
        for request in first.run_requests:
            execute(defs, instance, request)
        assert "Templates/template.md" not in indexed()
        config = yaml.safe_load(paths.config.read_text())
        config["collections"]["notes"]["sources"][0]["exclude_folders"] = []  # Templates no longer excluded
        paths.config.write_text(yaml.safe_dump(config))
        second = tick(defs, instance, first.cursor)
        [request] = second.run_requests
        assert execute(defs, instance, request).success and "Templates/template.md" in indexed()

        paths.config.write_text(yaml.safe_dump(config) + "search: {top_k: many}\n")  # an edit with an error
        quiet = tick(defs, instance, second.cursor)  # the last good configuration stays in use
        assert quiet.run_requests == [] and "no changes" in quiet.skip_reason.skip_message
        config["collections"] = {"other": config["collections"]["notes"]}
        paths.config.write_text(yaml.safe_dump(config))
        removed = tick(defs, instance, quiet.cursor)
        assert isinstance(removed, dg.SkipReason) and "no longer configured" in removed.skip_message
