"""Collections and their sources, from the config file's `collections:` plus CLI-registered ones.

No Dagster here: the CLI reads this cheaply. Validation errors name the file, the collection/source
and the field. Collections added by `local-rag index project|obsidian` live in
$LOCAL_RAG_HOME/registry.yaml (machine-written), so the user's own config file is never rewritten.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from rag_search.config import Paths, Settings, describe_validation_error, load_settings
from rag_search.errors import ConfigError

from rag_pipelines.sources.globs import translate

DEFAULT_EXCLUDES = (".obsidian/**", ".trash/**", ".git/**", "**/.*", "**/.*/**", "node_modules/**",
                    "**/node_modules/**", "__pycache__/**", "**/__pycache__/**", ".venv/**", "**/.venv/**")
TEXT_SUFFIXES = ("md", "markdown", "canvas", "txt", "pdf", "docx", "html", "htm", "epub", "csv", "json", "yaml", "yml", "rst")
DEFAULT_INCLUDES = tuple(f"**/*.{s}" for s in TEXT_SUFFIXES)
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,62}$")
_CAPTURE_GROUP = re.compile(r"\(\?<([A-Za-z_]\w*)>")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Chunking(_Model):
    max_tokens: int | None = Field(None, ge=32, description="Chunk size in the embedder's tokens (capped at its window).")
    overlap_tokens: int = Field(32, ge=0, description="Tokens repeated between consecutive windows of plain text.")


class Capture(_Model):
    pattern: str = Field(description="Glob-like path pattern with named captures, e.g. notes/(?<area>[^/]+)/**/*.md")

    @field_validator("pattern")
    @classmethod
    def _has_captures(cls, v: str) -> str:
        if not _CAPTURE_GROUP.search(v):
            raise ValueError("needs at least one named capture like (?<area>[^/]+)")
        compile_capture(v)
        return v


class SourceConfig(_Model):
    type: Literal["obsidian", "project"] = Field(description="obsidian (a vault) or project (any folder of documents).")
    paths: tuple[Path, ...] = Field(min_length=1, description="Root folders of the source.")
    include: tuple[str, ...] = Field(DEFAULT_INCLUDES, description="Globs of files to index (relative to a root).")
    exclude: tuple[str, ...] = Field((), description="Globs to skip, added to the defaults (.obsidian, .trash, .git, hidden, node_modules).")
    exclude_folders: tuple[str, ...] = Field((), description="Folders (relative to a root) to skip entirely.")
    captures: tuple[Capture, ...] = Field((), description="Path patterns whose named captures become chunk metadata.")
    metadata: dict[str, str | int | float | bool] = Field(default_factory=dict, description="Static metadata on every chunk.")

    @field_validator("paths")
    @classmethod
    def _expand(cls, v: tuple[Path, ...]) -> tuple[Path, ...]:
        return tuple(p.expanduser().resolve() for p in v)

    @property
    def excludes(self) -> tuple[str, ...]:
        return DEFAULT_EXCLUDES + self.exclude + tuple(f"{f.strip('/')}/**" for f in self.exclude_folders)


class CollectionConfig(_Model):
    name: str = Field(description="Collection name: letters, digits and _; starts with a letter.")
    kind: Literal["system", "project"] = Field("project", description="system (your notes, mail) or project.")
    description: str = Field("", description="What the collection holds; shown to AI assistants.")
    sources: tuple[SourceConfig, ...] = Field(min_length=1, description="Where the items come from.")
    chunking: Chunking = Field(default_factory=Chunking, description="Chunking overrides.")
    schedule: str = Field("0 3 * * *", description="Cron schedule of the full rescan (default nightly at 03:00).")
    sensor_interval_seconds: int = Field(60, ge=5, description="How often the sensor looks for changed files.")

    @field_validator("name")
    @classmethod
    def _valid_name(cls, v: str) -> str:
        if not NAME.match(v):
            raise ValueError("use letters, digits and _ only, starting with a letter (it names Dagster assets)")
        return v


@lru_cache(maxsize=256)
def compile_capture(pattern: str) -> re.Pattern:
    """notes/(?<area>[^/]+)/**/*.md → a regex over the relative POSIX path (** any depth, * one segment)."""
    try:
        return re.compile("^" + translate(pattern) + "$")
    except re.error as exc:
        raise ValueError(f"not a valid pattern: {exc}") from exc


def registry_path(paths: Paths) -> Path:
    return paths.home / "registry.yaml"


def load_collections(paths: Paths | None = None, settings: Settings | None = None) -> dict[str, CollectionConfig]:
    """All configured collections: the config file's, then the CLI registry's (config wins on a name clash)."""
    paths = paths or Paths.from_env()
    settings = settings or load_settings(paths.config)
    out = _parse(paths.config, settings.collections)
    reg = registry_path(paths)
    if reg.exists():
        raw = yaml.safe_load(reg.read_text(encoding="utf-8")) or {}
        for name, cfg in _parse(reg, raw.get("collections", {})).items():
            out.setdefault(name, cfg)
    return out


def _parse(file: Path, raw: dict) -> dict[str, CollectionConfig]:
    if not isinstance(raw, dict):
        raise ConfigError(f"{file}: `collections` must be a mapping of name → collection.")
    out = {}
    for name, body in raw.items():
        try:
            out[name] = CollectionConfig.model_validate({"name": name, **(body or {})})
        except ValidationError as exc:
            raise ConfigError(describe_validation_error(file, exc).replace(
                "invalid configuration", f"invalid configuration of collection '{name}'")) from exc
    return out


def register_collection(paths: Paths, cfg: CollectionConfig) -> None:
    """Add or replace a CLI-registered collection in registry.yaml."""
    reg = registry_path(paths)
    raw = (yaml.safe_load(reg.read_text(encoding="utf-8")) or {}) if reg.exists() else {}
    body = cfg.model_dump(mode="json", exclude={"name"}, exclude_defaults=True)
    body["sources"] = [s.model_dump(mode="json", exclude_defaults=True) | {"type": s.type, "paths": [str(p) for p in s.paths]}
                       for s in cfg.sources]
    raw.setdefault("collections", {})[cfg.name] = body
    reg.parent.mkdir(parents=True, exist_ok=True)
    reg.write_text("# Written by `local-rag index`; edit config.yaml instead to customise.\n"
                   + yaml.safe_dump(raw, sort_keys=True, allow_unicode=True), encoding="utf-8")
