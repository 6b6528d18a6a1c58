"""Collections and their sources, validated: each source's options by its own model, plus the seed's collections.

What the files declare (config.yaml's `collections:`, registry.yaml, names) is shared knowledge in
rag_search.collection_config, which the search side reads without importing this package. No Dagster here: the
CLI reads this cheaply. Validation errors name the file, the collection/source and the field.
"""

from __future__ import annotations

import logging
import re
from dataclasses import fields
from pathlib import Path
from typing import Annotated, Literal, Union

from pydantic import Field, ValidationError, field_validator, model_validator

from rag_search.collection_config import (MAX_NAME, Declared, check_name, declared, register, registry_path,  # noqa: F401
                                         safe_name)  # (re-exported)
from rag_search.config import FileWatch, Paths, Settings, describe_validation_error, load_settings
from rag_search.errors import ConfigError

from rag_pipelines.parsers.limits import Limits
from rag_pipelines.sources.options import Capture, Model, SourceOptions, compile_capture  # noqa: F401 (re-exported)
from rag_pipelines.sources.registry import options_models, source_types

log = logging.getLogger("local_rag")


class Chunking(Model):
    max_tokens: int | None = Field(None, ge=32, description="Chunk size in the embedder's tokens (capped at its window).")
    overlap_tokens: int = Field(32, ge=0, description="Tokens repeated between consecutive windows of plain text.")


class LimitsConfig(Model):
    max_file_mb: int = Field(Limits.max_file_mb, ge=1, description="Largest file read at all (MB).")
    max_text_mb: int = Field(Limits.max_text_mb, ge=1, description="Largest text-format file (Markdown, TXT, CSV, ...) in MB.")
    max_unzipped_mb: int = Field(Limits.max_unzipped_mb, ge=1, description="Largest uncompressed content of a zipped "
                                 "document: DOCX, EPUB, PPTX, XLSX, ODT/ODS/ODP (MB).")
    max_cells: int = Field(Limits.max_cells, ge=1, description="Non-empty cells read from one workbook (XLSX, ODS).")
    max_slides: int = Field(Limits.max_slides, ge=1, description="Slides read from one deck (PPTX, ODP).")
    max_ocr_pages: int = Field(Limits.max_ocr_pages, ge=0, description="Images OCR'd for one item (scanned PDF pages, "
                                                                       "a note's embedded images).")
    max_ocr_seconds: float = Field(Limits.max_ocr_seconds, gt=0, description="Seconds OCR may take for one item.")
    max_image_mpixels: float = Field(Limits.max_image_mpixels, gt=0, description="Largest image decoded for OCR "
                                                                                 "(megapixels).")
    max_chunks: int = Field(Limits.max_chunks, ge=1, description="Most chunks one item may produce.")
    max_metadata_keys: int = Field(Limits.max_metadata_keys, ge=1, description="Metadata keys kept per item.")
    max_tags: int = Field(Limits.max_tags, ge=1, description="Tags kept per item.")

    def limits(self) -> Limits:
        names = {f.name for f in fields(Limits)}
        return Limits(**{k: v for k, v in self.model_dump().items() if k in names})


SourceConfig = Annotated[Union[options_models()], Field(discriminator="type")]  # type: ignore[valid-type]


class CollectionConfig(Model):
    name: str = Field(description="Collection name as you type it, e.g. notes or \"Project Alpha\".")
    kind: Literal["system", "project"] = Field(None, description="system (your notes, mail) or project; "  # type: ignore[assignment]
                                               "default: what its first source is (mail, books, vaults: system).")
    description: str = Field("", description="What the collection holds; shown to AI assistants.")
    sources: tuple[SourceConfig, ...] = Field(min_length=1, description="Where the items come from.")  # type: ignore[valid-type]
    chunking: Chunking = Field(default_factory=Chunking, description="Chunking overrides.")
    limits: LimitsConfig = Field(default_factory=LimitsConfig, description="Per-item limits.")
    schedule: str = Field("0 3 * * *", description="Cron schedule of the full rescan (default nightly at 03:00).")
    sensor_interval_seconds: int = Field(60, ge=5, description="How often the sensor looks for changed items.")

    @field_validator("name")
    @classmethod
    def _valid_name(cls, v: str) -> str:
        return check_name(v)

    @model_validator(mode="after")
    def _default_kind(self) -> "CollectionConfig":
        if self.kind is None:
            spec = source_types().get(self.sources[0].type)
            object.__setattr__(self, "kind", spec.kind if spec else "project")
        return self

    @property
    def safe_name(self) -> str:
        return safe_name(self.name)


def source_labels(cfg: CollectionConfig) -> list[str | None]:
    """Key prefixes per source: none for a single source; the label, first root's name or type otherwise."""
    if len(cfg.sources) == 1:
        return [cfg.sources[0].label]
    used: set[str] = set()
    out = []
    for src in cfg.sources:
        paths = getattr(src, "paths", None)
        base = src.label or (Path(paths[0]).name if paths else None) or src.type
        label, n = base, 2
        while label in used:
            label, n = f"{base}-{n}", n + 1
        used.add(label)
        out.append(label)
    return out


def load_collections(paths: Paths | None = None, settings: Settings | None = None) -> dict[str, CollectionConfig]:
    """All configured collections: the config file's, the seed keys', then the CLI registry's, validated.

    The config file wins on a name clash; `disabled_collections` are left out.
    """
    paths = paths or Paths.from_env()
    settings = settings or load_settings(paths.config)
    entries = declared(paths, settings, with_disabled=True)
    out = {cfg.name: cfg for cfg in (_validate(d) for d in entries.values() if d.file == paths.config)}
    for name, cfg in _parse(paths.config, _seed_collections(settings)).items():
        out.setdefault(name, cfg)
    for entry in entries.values():
        if entry.file != paths.config and entry.name not in out:
            cfg = _validate(entry)
            out.setdefault(cfg.name, cfg)
    disabled = set(settings.disabled_collections)
    return {n: c for n, c in out.items() if n not in disabled}


def _validate(entry: Declared) -> CollectionConfig:
    return validate_collection({**entry.body, "name": entry.name}, entry.file)


_followed: dict[str, tuple[FileWatch, dict[str, CollectionConfig]]] = {}  # config file → its watch, last good load


def current_collection(paths: Paths, cfg: CollectionConfig) -> CollectionConfig | None:
    """The collection as config.yaml and registry.yaml say now, for a long-running process that built its Dagster
    definitions from an earlier version: the edited one; `cfg` while an edit has an error (logged); None once the
    collection was removed. Two stats a call while the files are unchanged."""
    key = str(paths.config)
    watch, loaded = _followed.get(key, (None, None))
    if watch is None or watch.changed():
        watch = watch or FileWatch([paths.config, registry_path(paths)])
        try:
            loaded = load_collections(paths)
        except ConfigError as exc:
            log.warning("%s (the collections loaded before stay in use until the file is fixed)", exc)
            loaded = loaded if loaded is not None else {cfg.name: cfg}
        _followed[key] = (watch, loaded)
    return loaded.get(cfg.name)


def _seed_collections(settings: Settings) -> dict[str, dict]:
    """Collections implied by the seed's top-level keys (emclient_db_path, calibre_libraries, code_groups, ...)."""
    out: dict[str, dict] = {}
    for spec in source_types().values():
        for key, option in spec.seed_keys.items():
            value = getattr(settings, key, None)
            if value and spec.collection:
                out[spec.collection] = {"kind": spec.kind, "sources": [{"type": spec.type, option: value}]}
    for spec in source_types().values():
        if spec.seed:
            out.update(spec.seed(settings, set(out) | set(settings.collections)))
    return out


def _parse(file: Path, raw: dict) -> dict[str, CollectionConfig]:
    if not isinstance(raw, dict):
        raise ConfigError(f"{file}: `collections` must be a mapping of name → collection.")
    out = {}
    for name, body in raw.items():
        cfg = validate_collection({"name": name, **(body or {})}, file)
        out[cfg.name] = cfg
    return out


def validate_collection(body: dict, file: Path | str = "the command line") -> CollectionConfig:
    """A collection from a dict; errors name the file, the collection and the field."""
    try:
        return CollectionConfig.model_validate(body)
    except ValidationError as exc:
        name = body.get("name")
        types = set(source_types())
        text = describe_validation_error(Path(str(file)), exc)
        for t in types:  # `sources.0.obsidian.paths` (the union's tag) reads better as `sources.0.paths`
            text = re.sub(rf"(sources\.\d+)\.{re.escape(t)}\.", r"\1.", text)
        raise ConfigError(text.replace("invalid configuration", f"invalid configuration of collection '{name}'")) from exc


def register_collection(paths: Paths, cfg: CollectionConfig) -> None:
    """Add or replace a CLI-registered collection in registry.yaml (under its lock, written atomically)."""
    body = cfg.model_dump(mode="json", exclude={"name"}, exclude_defaults=True)
    body["sources"] = [_source_body(s) for s in cfg.sources]
    register(paths, cfg.name, body)


def _source_body(src: SourceOptions) -> dict:
    body = src.model_dump(mode="json", exclude_defaults=True) | {"type": src.type}
    for name in ("paths", "libraries"):
        if hasattr(src, name):
            body[name] = [str(p) for p in getattr(src, name)]
    return body


def source_paths(cfg: CollectionConfig) -> list[str]:
    """Every path a collection reads from (folders, databases, libraries), for messages and comparisons."""
    out: list[str] = []
    for src in cfg.sources:
        for name in ("paths", "libraries"):
            out += [str(p) for p in getattr(src, name, ()) or ()]
        if getattr(src, "path", None):
            out.append(str(src.path))
    return out
