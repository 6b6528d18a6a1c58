"""Scanning roots and mapping paths to partition keys: awkward names, long paths, excludes, captures."""

from __future__ import annotations

import dagster as dg
import pytest

from pathlib import Path

from rag_pipelines.config import CollectionConfig, compile_capture, load_collections
from rag_pipelines.indexing.scan import scan_collection as scan_sources
from rag_pipelines.sources.files import captured_metadata


def scan_collection(c: CollectionConfig) -> dict:
    return scan_sources(c).items
from rag_search.keys import MAX_KEY_BYTES, path_key
from rag_search.errors import ConfigError

AWKWARD = ["with space.md", "comma, here.md", "[brackets] (1).md", "ünïcödé ✓.md", "100% done.md", "dots...md",
           "tab\tname.md"]


def cfg(root, **source) -> CollectionConfig:
    return CollectionConfig.model_validate({"name": "c", "sources": [{"type": "project", "paths": [str(root)], **source}]})


def test_awkward_names_map_to_distinct_printable_keys(tmp_path):
    for name in AWKWARD:
        (tmp_path / name).write_text("x")
    long_dir = tmp_path / ("very long folder name " * 8).strip()
    long_dir.mkdir()
    (long_dir / (("long file name " * 10).strip() + ".md")).write_text("x")
    entries = scan_collection(cfg(tmp_path))
    assert len(entries) == len(AWKWARD) + 1
    for key, entry in entries.items():
        assert key and len(key.encode()) <= MAX_KEY_BYTES and "\t" not in key
        assert Path(entry.uri).exists()  # the real path is kept beside the key, never rebuilt from it
    assert "100%25 done.md" in entries and "dots%2E%2E%2Emd" in entries and "tab%09name.md" in entries


def test_keys_are_nfc_and_long_keys_get_a_hash_suffix():
    assert path_key("cafe\u0301.md") == path_key("café.md")
    long = "a/" * 400 + "x.md"
    key = path_key(long)
    assert len(key.encode()) <= MAX_KEY_BYTES and key != path_key(long[:-4] + "y.md")


def test_awkward_keys_work_as_dagster_partitions(tmp_path):
    keys = [path_key(n) for n in AWKWARD] + [path_key("a/" * 400 + "x.md")]
    parts = dg.DynamicPartitionsDefinition(name="t_items")

    @dg.asset(partitions_def=parts)
    def items(context) -> None:
        context.log.info(context.partition_key)

    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("t_items", keys)
        for key in keys:
            assert dg.materialize([items], instance=instance, partition_key=key).success
        assert instance.get_materialized_partitions(items.key) == set(keys)


def test_default_and_configured_excludes(tmp_path):
    for rel in [".obsidian/a.md", ".trash/b.md", ".git/c.md", "node_modules/p/d.md", ".hidden.md", "sub/.h/e.md",
                "Templates/t.md", "keep/f.md", "g.MD", "h.png", "i.exe"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    keys = set(scan_collection(cfg(tmp_path, exclude_folders=["Templates"])))
    assert keys == {"keep/f.md", "g.MD", "h.png"}  # images are read by OCR (on by default)


def test_symlink_cycles_are_cut(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "n.md").write_text("x")
    (tmp_path / "a" / "loop").symlink_to(tmp_path / "a")
    assert set(scan_collection(cfg(tmp_path))) == {"a/n.md"}


def test_several_roots_get_labelled_keys(tmp_path):
    for d in ("one/docs", "two/docs"):
        (tmp_path / d).mkdir(parents=True)
        (tmp_path / d / "x.md").write_text("x")
    c = CollectionConfig.model_validate({"name": "c", "sources": [
        {"type": "project", "paths": [str(tmp_path / "one/docs"), str(tmp_path / "two/docs")]}]})
    assert set(scan_collection(c)) == {"docs/x.md", "docs-2/x.md"}


def test_named_captures_become_metadata():
    pattern = compile_capture("notes/(?<area>[^/]+)/**/*.md")
    assert pattern.match("notes/work/x.md").group("area") == "work"
    assert pattern.match("notes/work/deep/er/x.md").group("area") == "work"
    assert pattern.match("other/work/x.md") is None
    src = cfg("/tmp", captures=[{"pattern": "notes/(?<area>[^/]+)/**/*.md"}], metadata={"owner": "me"}).sources[0]
    assert captured_metadata(src, "notes/home/a.md") == {"owner": "me", "area": "home"}


def test_validation_errors_name_file_collection_and_field(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(
        "collections:\n  my/notes:\n    sources:\n      - type: obsidian\n        paths: []\n"
        "        captures: [{pattern: 'no/captures/*.md'}]\n")
    monkeypatch.setenv("LOCAL_RAG_HOME", str(home))
    with pytest.raises(ConfigError) as err:
        load_collections()
    msg = str(err.value)
    assert str(home / "config.yaml") in msg and "collection 'my/notes'" in msg
    assert "name" in msg and "sources.0.paths" in msg and "sources.0.captures.0.pattern" in msg


def test_items_the_config_excludes_since_they_were_indexed_leave_the_index(tmp_path, monkeypatch):
    """A sync loads items at their known paths without a scan: it loaded a file the config now excludes (or a
    .ragignore now ignores) and kept it indexed as unchanged. Real runs, a real edit of config.yaml."""
    import yaml
    from pipeline_env import make_home

    from rag_pipelines.indexing import runs
    from rag_pipelines.wiring import resources
    from rag_search.store import reads

    paths, vault = make_home(tmp_path, monkeypatch)
    try:
        runs.index_collections(paths, ["notes"])
        before = set(reads.item_states(resources.RagResource().store(), "notes"))
        config = yaml.safe_load(paths.config.read_text())
        config["collections"]["notes"]["sources"][0]["exclude"] = ["Daily/**", "**/*.canvas"]
        paths.config.write_text(yaml.safe_dump(config))
        [summary] = runs.index_collections(paths, ["notes"])
        assert set(reads.item_states(resources.RagResource().store(), "notes")) == before - {
            "Daily/2024-03-15.md", "Board.canvas"}
        assert summary.outcomes == {"deleted": 2}
    finally:
        resources.close_all()
