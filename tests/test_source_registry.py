"""Every source module is found by the registry and wired everywhere without edits: config, CLI, Dagster.

Also the seed configuration's names (emclient_db_path, calibre_libraries, netnewswire_db_path,
disabled_collections) and a JSON config file in the seed's shape.
"""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from rag_pipelines.config import load_collections, safe_name, validate_collection
from rag_pipelines.indexing.scan import open_sources
from rag_pipelines.sources.base import Source
from rag_pipelines.sources.registry import source_types
from rag_search.cli.main import cli
from rag_search.config import Paths
from rag_search.errors import ConfigError


def test_file_sources_and_app_sources_are_registered():
    types = source_types()
    assert {"obsidian", "project"} <= set(types)
    for spec in types.values():
        assert spec.summary and spec.options.model_fields["type"].description


@pytest.mark.parametrize("type_", sorted(source_types()))
def test_each_source_type_is_wired_everywhere(type_, tmp_path):
    spec = source_types()[type_]
    body = {"type": type_}
    for name, field in spec.options.model_fields.items():
        if field.is_required() and name != "type":
            body[name] = [str(tmp_path)] if "list" in str(field.annotation) or "tuple" in str(field.annotation) else str(tmp_path)
    cfg = validate_collection({"name": f"My {type_}", "sources": [body]})
    [source] = open_sources(cfg)
    assert isinstance(source, Source) and source.type == type_
    if spec.collection:  # `local-rag index <type>` exists with its own options
        out = CliRunner().invoke(cli, ["index", type_, "--help"])
        assert out.exit_code == 0 and "--name" in out.output, out.output
    from rag_pipelines.wiring.assets import build_collection

    built = build_collection(cfg)
    assert built.key.path == [safe_name(cfg.name), "items"]


def test_unknown_source_type_names_the_known_ones(tmp_path):
    with pytest.raises(ConfigError) as err:
        validate_collection({"name": "x", "sources": [{"type": "myspace", "paths": [str(tmp_path)]}]}, "config.yaml")
    assert "myspace" in str(err.value) and "obsidian" in str(err.value)


def test_seed_keys_and_disabled_collections(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    lib, vault = tmp_path / "Calibre Library", tmp_path / "vault"
    lib.mkdir()
    vault.mkdir()
    seed = {"calibre_libraries": [str(lib)], "disabled_collections": ["old"],
            "collections": {"notes": {"sources": [{"type": "obsidian", "paths": [str(vault)]}]},
                            "old": {"sources": [{"type": "project", "paths": [str(vault)]}]}}}
    if "calibre" not in source_types():
        seed.pop("calibre_libraries")
    (home / "config.json").write_text(json.dumps(seed))  # the seed's JSON shape is read as is
    paths = Paths.from_env({"LOCAL_RAG_HOME": str(home)})  # config.json is found when there is no config.yaml
    assert paths.config == home / "config.json"
    collections = load_collections(paths)
    assert "old" not in collections and "notes" in collections
    if "calibre" in source_types():
        assert collections["calibre"].sources[0].type == "calibre"


def test_registered_collections_keep_their_display_names(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    folder = tmp_path / "docs"
    folder.mkdir()
    reg = {"collections": {"Project Alpha": {"sources": [{"type": "project", "paths": [str(folder)]}]}}}
    (home / "registry.yaml").write_text(yaml.safe_dump(reg))
    collections = load_collections(Paths.from_env({"LOCAL_RAG_HOME": str(home)}))
    assert list(collections) == ["Project Alpha"]
    assert collections["Project Alpha"].safe_name != safe_name("Project Beta")
    assert safe_name("notes") == "notes" and safe_name("Zoë's notes").startswith("zoe_s_notes_")
