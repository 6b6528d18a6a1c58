"""Files as a Source under faults: links out of the roots, unreadable folders, files that vanish mid-run,
a missing root, collection names people type, re-pointing, and the ingest strategies."""

from __future__ import annotations

import os

import pytest
import yaml
from click.testing import CliRunner

from rag_pipelines.indexing import runs
from rag_pipelines.config import CollectionConfig, safe_name
from rag_pipelines.indexing.items import index_keys
from rag_pipelines.indexing.scan import open_sources, scan_collection
from rag_pipelines.indexing.plan import plan_sync
from rag_pipelines.wiring import resources
from rag_search.cli.main import cli
from rag_search.config import Paths
from rag_search.store import reads


def cfg(root, name="c", **source) -> CollectionConfig:
    return CollectionConfig.model_validate({"name": name, "sources": [{"type": "project", "paths": [str(root)], **source}]})


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("LOCAL_RAG_HOME", str(h))
    monkeypatch.setenv("DAGSTER_HOME", str(h / "dagster"))
    monkeypatch.delenv("LOCAL_RAG_CONFIG", raising=False)
    monkeypatch.delenv("LOCAL_RAG_DB", raising=False)
    yield Paths.from_env()
    resources.close_all()


def test_links_out_of_the_root_are_not_followed(tmp_path):
    root, outside = tmp_path / "notes", tmp_path / "secret"
    root.mkdir()
    outside.mkdir()
    (outside / "passwd.txt").write_text("root:x:0:0")
    (root / "ok.md").write_text("fine")
    (root / "leak.txt").symlink_to(outside / "passwd.txt")
    (root / "leakdir").symlink_to(outside, target_is_directory=True)
    (root / "inside.md").symlink_to(root / "ok.md")  # a link that stays inside is fine
    assert set(scan_collection(cfg(root)).items) == {"ok.md", "inside.md"}
    allowed = scan_collection(cfg(root, follow_symlinks_outside=True)).items
    assert {"leak.txt", "leakdir/passwd.txt"} <= set(allowed)


def test_a_link_swapped_in_after_the_scan_is_not_read(tmp_path, store, fake_embedder):
    root, outside = tmp_path / "notes", tmp_path / "secret"
    root.mkdir()
    outside.mkdir()
    (outside / "passwd.txt").write_text("root:x:0:0 secret")
    (root / "a.txt").write_text("harmless")
    c = cfg(root)
    sources = open_sources(c)
    plan = plan_sync(store, c, sources=sources)
    (root / "a.txt").unlink()
    (root / "a.txt").symlink_to(outside / "passwd.txt")
    index_keys(store, fake_embedder, c, plan.new, sources=sources)
    assert store.conn.execute("SELECT count(*) FROM chunks WHERE text LIKE '%secret%'").fetchone()[0] == 0


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads folders whatever their permissions")
def test_unreadable_folder_is_a_recorded_failure(tmp_path, store, fake_embedder):
    root = tmp_path / "notes"
    (root / "locked").mkdir(parents=True)
    (root / "locked" / "x.md").write_text("x")
    (root / "ok.md").write_text("fine")
    os.chmod(root / "locked", 0)
    try:
        c = cfg(root)
        plan = plan_sync(store, c)
        stats = index_keys(store, fake_embedder, c, plan.new)
        assert stats.outcomes == {"locked/": "failed", "ok.md": "indexed"}
        [failure] = reads.failures(store, "c")
        assert failure.key == "locked/" and "permissions" in failure.message
    finally:
        os.chmod(root / "locked", 0o755)


def test_unlistable_entries_are_recorded_not_skipped(tmp_path, store, fake_embedder, monkeypatch):
    """Stat failures (over-long paths, races) become failed items with the reason (works as root too)."""
    root = tmp_path / "notes"
    root.mkdir()
    (root / "ok.md").write_text("fine")
    (root / "bad.md").write_text("x")
    import rag_pipelines.sources.files as files

    def walk(root_, globs, allowed, _orig=files._walk):
        for rel, st, problem in _orig(root_, globs, allowed):
            if rel == "bad.md":
                yield rel, None, ("unreadable", "cannot read bad.md (File name too long); shorten the path")
            else:
                yield rel, st, problem

    monkeypatch.setattr(files, "_walk", walk)
    c = cfg(root)
    plan = plan_sync(store, c)
    stats = index_keys(store, fake_embedder, c, plan.new)
    assert stats.outcomes == {"bad.md": "failed", "ok.md": "indexed"}
    assert "too long" in reads.failures(store, "c")[0].message


def test_a_file_deleted_mid_run_just_leaves(tmp_path, store, fake_embedder):
    root = tmp_path / "notes"
    root.mkdir()
    (root / "a.md").write_text("alpha")
    (root / "b.md").write_text("beta")
    c = cfg(root)
    sources = open_sources(c)
    plan = plan_sync(store, c, sources=sources)
    (root / "b.md").unlink()
    stats = index_keys(store, fake_embedder, c, plan.new, sources=sources)
    assert stats.outcomes == {"a.md": "indexed", "b.md": "deleted"}
    assert reads.failures(store, "c") == [] and set(reads.item_states(store, "c")) == {"a.md"}


def test_a_missing_root_never_empties_the_collection(tmp_path, store, fake_embedder):
    root = tmp_path / "drive" / "notes"
    root.mkdir(parents=True)
    (root / "a.md").write_text("alpha")
    c = cfg(root)
    index_keys(store, fake_embedder, c, plan_sync(store, c).new)
    (tmp_path / "drive").rename(tmp_path / "unmounted")
    plan = plan_sync(store, c, sources=open_sources(cfg(root, name="c")))
    assert plan.deleted == [] and "missing" in plan.unavailable["project"]
    scan = reads.source_scans(store, "c")
    assert scan[0]["error"] and scan[0]["matched"] == 1  # last good count kept beside the error
    assert set(reads.item_states(store, "c")) == {"a.md"}


def test_names_people_type_work_end_to_end(home, tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "plan.md").write_text("# Plan\nThe alpha launch is in May.")
    r = CliRunner().invoke(cli, ["index", "project", "Project Alpha", str(folder)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "Project Alpha: 1 indexed" in r.output
    r = CliRunner().invoke(cli, ["search", "launch", "--collection", "Project Alpha"], catch_exceptions=False)
    assert r.exit_code == 0 and "plan.md" in r.output, r.output
    import dagster as dg

    key = dg.AssetKey([safe_name("Project Alpha"), "items"])
    assert dg.DagsterInstance.get().get_materialized_partitions(key) == {"plan.md"}
    r = CliRunner().invoke(cli, ["index", "project", "bad/name", str(folder)])
    assert r.exit_code != 0 and "cannot hold '/'" in r.output and "Traceback" not in r.output


def test_repointing_a_collection_needs_replace(home, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    for d in (one, two):
        d.mkdir()
        (d / f"{d.name}.md").write_text(f"note {d.name}")
    assert CliRunner().invoke(cli, ["index", "project", "docs", str(one)]).exit_code == 0
    r = CliRunner().invoke(cli, ["index", "project", "docs", str(two)])
    assert r.exit_code != 0 and str(one) in r.output and "--replace" in r.output
    store = resources.RagResource().store()
    assert set(reads.item_states(store, "docs")) == {"one.md"}  # nothing was deleted
    r = CliRunner().invoke(cli, ["index", "project", "docs", str(two), "--replace"])
    assert r.exit_code == 0 and set(reads.item_states(store, "docs")) == {"two.md"}
    reg = yaml.safe_load((home.home / "registry.yaml").read_text())
    assert reg["collections"]["docs"]["sources"][0]["paths"] == [str(two)]


def test_ingest_strategies(home, tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "short.md").write_text("# Short\nOne paragraph about otters.\n\n## More\nAnd beavers.")
    long_text = "\n\n".join(f"Paragraph {i} about the river and its {i} animals." * 6 for i in range(30))
    (folder / "long.md").write_text("# Long\n" + long_text)
    config = {"collections": {
        "whole": {"sources": [{"type": "project", "paths": [str(folder)], "ingest": "whole-document"}]},
        "paths": {"sources": [{"type": "project", "paths": [str(folder)], "ingest": "file-path"}]},
    }}
    (home.home / "config.yaml").write_text(yaml.safe_dump(config))
    runs.index_collections(home, ["whole", "paths"])
    store = resources.RagResource().store()
    per_item = dict(store.conn.execute(
        "SELECT i.key, count(*) FROM chunks c JOIN items i ON i.id = c.item_id JOIN collections co "
        "ON co.id = i.collection_id WHERE co.name = 'whole' GROUP BY i.key").fetchall())
    assert per_item["short.md"] == 1 and per_item["long.md"] > 1  # one chunk where it fits
    texts = {t for (t,) in store.conn.execute(
        "SELECT c.text FROM chunks c JOIN collections co ON co.id = c.collection_id WHERE co.name = 'paths'")}
    assert texts == {str(folder / "short.md"), str(folder / "long.md")}  # only the path is stored
    from rag_search.retrieval import Filters, SearchEngine, SearchRequest

    engine = SearchEngine(store, resources.RagResource().embedder())
    hits = engine.search(SearchRequest("otters and beavers", mode="semantic",
                                       filters=Filters(collections=("paths",)))).hits
    assert hits[0].uri == str(folder / "short.md") and hits[0].text == str(folder / "short.md")


def test_a_root_unmounted_mid_run_keeps_its_items(tmp_path, store, fake_embedder):
    root = tmp_path / "drive" / "notes"
    root.mkdir(parents=True)
    (root / "a.md").write_text("alpha")
    c = cfg(root)
    index_keys(store, fake_embedder, c, plan_sync(store, c).new)
    (root / "b.md").write_text("beta")
    sources = open_sources(cfg(root, name="c"))
    plan = plan_sync(store, c, sources=sources)
    (tmp_path / "drive").rename(tmp_path / "gone")  # between the plan and the run
    stats = index_keys(store, fake_embedder, c, plan.new + ["a.md"], sources=open_sources(cfg(root, name="c", exclude=["x"])))
    assert stats.deleted == 0 and set(reads.item_states(store, "c")) >= {"a.md"}
    assert store.conn.execute("SELECT count(*) FROM chunks").fetchone()[0] >= 1  # a.md still searchable


def test_collection_kind_defaults_to_its_source():
    assert cfg("/tmp").kind == "project"
    vault = CollectionConfig.model_validate({"name": "n", "sources": [{"type": "obsidian", "paths": ["/tmp"]}]})
    assert vault.kind == "system"
