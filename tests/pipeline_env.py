"""A local-rag home in a temp dir with a copied fixture vault, for pipeline tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from rag_search.config import Paths
from rag_search.file_updates import private_folder

VAULT = Path(__file__).parent / "fixtures" / "vault"


def make_home(tmp_path: Path, monkeypatch, extra_collections: dict | None = None) -> tuple[Paths, Path]:
    vault = tmp_path / "vault"
    shutil.copytree(VAULT, vault)
    (vault / ".git").mkdir()
    (vault / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    home = private_folder(tmp_path / "home")  # as local-rag makes it: 0700
    config = {
        "collections": {
            "notes": {
                "kind": "system",
                "description": "fixture vault",
                "sources": [{
                    "type": "obsidian",
                    "paths": [str(vault)],
                    "exclude_folders": ["Templates"],
                    "captures": [{"pattern": "Projects/(?<area>[^/]+)/**/*.md"}],
                    "metadata": {"owner": "me"},
                    "ocr": False,  # OCR has its own tests (test_ocr*.py): these stay fast and image-free
                }],
            },
            **(extra_collections or {}),
        }
    }
    return use_home(home, config, monkeypatch), vault


def use_home(home: Path, config: dict, monkeypatch) -> Paths:
    """`config` written as the home's config.yaml, and the environment pointed at that home (and its Dagster)."""
    home.mkdir(exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump(config))
    monkeypatch.setenv("LOCAL_RAG_HOME", str(home))
    monkeypatch.delenv("LOCAL_RAG_DB", raising=False)
    monkeypatch.delenv("LOCAL_RAG_CONFIG", raising=False)
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))
    return Paths.from_env()


def hash_embedded_home(tmp_path: Path, monkeypatch):
    """make_home with the fast HashEmbedder in place of the bundled model; (paths, vault, embedder)."""
    from fakes import HashEmbedder

    from rag_pipelines.wiring import resources

    paths, vault = make_home(tmp_path, monkeypatch)
    embedder = HashEmbedder()
    monkeypatch.setattr(resources, "load_embedder", lambda settings, paths=None: embedder)
    return paths, vault, embedder


def point_at_home(home: Path, monkeypatch) -> Path:
    """Every process the test starts (the CLI, Dagster) uses `home`: LOCAL_RAG_HOME and DAGSTER_HOME set, the
    database and config overrides unset."""
    for name, value in {"LOCAL_RAG_HOME": home, "DAGSTER_HOME": home / "dagster"}.items():
        monkeypatch.setenv(name, str(value))
    for name in ("LOCAL_RAG_DB", "LOCAL_RAG_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    return home
