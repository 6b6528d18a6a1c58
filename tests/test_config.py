"""Settings: defaults, validation errors that name file and field, and every setting documented."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from rag_search.config import Paths, Settings, load_settings
from rag_search.errors import ConfigError

EXAMPLE = Path(__file__).parents[1] / "config" / "local-rag.example.yaml"


def test_missing_file_means_defaults(tmp_path):
    s = load_settings(tmp_path / "none.yaml")
    assert (s.embedder.provider, s.search.rrf_k, s.search.vector_weight, s.search.keyword_weight) == (
        "builtin", 5, 0.4, 0.6)


def test_the_example_config_is_valid():
    assert load_settings(EXAMPLE) == Settings()


def test_validation_errors_name_the_file_and_field(tmp_path):
    bad = tmp_path / "config.yaml"
    bad.write_text("embedder:\n  provider: openai\nsearch:\n  top_k: 0\n  colour: red\n")
    with pytest.raises(ConfigError) as err:
        load_settings(bad)
    msg = str(err.value)
    assert str(bad) in msg and "embedder.provider" in msg and "search.top_k" in msg and "search.colour" in msg


def test_broken_yaml_is_a_clear_error(tmp_path):
    bad = tmp_path / "config.yaml"
    bad.write_text("embedder: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_settings(bad)


def _fields(model: type[BaseModel], prefix=""):
    for name, field in model.model_fields.items():
        yield prefix + name, field
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            yield from _fields(ann, prefix + name + ".")


def test_every_setting_has_help_and_is_in_the_example():
    example = EXAMPLE.read_text()
    for dotted, field in _fields(Settings):
        assert field.description, f"{dotted} has no description"
        assert f"{dotted.rsplit('.', 1)[-1]}:" in example, f"{dotted} is not documented in {EXAMPLE.name}"


def test_paths_come_from_the_environment(tmp_path):
    p = Paths.from_env({"LOCAL_RAG_HOME": str(tmp_path)})
    assert (p.db, p.config, p.dagster_home) == (tmp_path / "rag.db", tmp_path / "config.yaml", tmp_path / "dagster")
    p = Paths.from_env({"LOCAL_RAG_HOME": str(tmp_path), "LOCAL_RAG_DB": "/x/y.db", "OLLAMA_HOST": "http://h:1"})
    assert (str(p.db), p.ollama_host) == ("/x/y.db", "http://h:1")
