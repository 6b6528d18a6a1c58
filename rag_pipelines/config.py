"""Collections and their sources, from the config file's `collections:` plus CLI-registered ones.

No Dagster here: the CLI reads this cheaply. Validation errors name the file, the collection/source
and the field. Collections added by `local-rag index <type>` live in $LOCAL_RAG_HOME/registry.yaml
(machine-written), so the user's own config file is never rewritten. Collection names are what users
type ("Project Alpha"); `safe_name` maps them to Dagster-safe identifiers.
"""

from __future__ import annotations

import hashlib
import logging
import re
import unicodedata
from dataclasses import fields
from pathlib import Path
from typing import Annotated, Literal, Union

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from rag_search.config import FileWatch, Paths, Settings, describe_validation_error, load_settings
from rag_search.errors import ConfigError

from rag_pipelines.parsers.limits import Limits
from rag_pipelines.sources.options import Capture, Model, SourceOptions, compile_capture  # noqa: F401 (re-exported)
from rag_pipelines.sources.registry import options_models, source_types

MAX_NAME = 64
_IDENT = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
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


def check_name(name: str) -> str:
    v = unicodedata.normalize("NFC", str(name)).strip()
    if not v:
        raise ValueError("a collection name cannot be empty")
    if len(v) > MAX_NAME:
        raise ValueError(f"a collection name has at most {MAX_NAME} characters")
    if any(unicodedata.category(ch).startswith("C") for ch in v) or "/" in v:
        raise ValueError("a collection name cannot hold '/' or control characters (letters, digits, spaces and "
                         "punctuation are fine)")
    return v


def safe_name(name: str) -> str:
    """A Dagster-safe identifier for a display name: itself when it already is one, else a slug + hash."""
    if _IDENT.match(name):
        return name
    ascii_ = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^A-Za-z0-9]+", "_", ascii_).strip("_").lower() or "collection"
    if not slug[0].isalpha():
        slug = "c_" + slug
    return f"{slug[:40]}_{hashlib.sha1(name.encode()).hexdigest()[:6]}"


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


def registry_path(paths: Paths) -> Path:
    return paths.home / "registry.yaml"


def load_collections(paths: Paths | None = None, settings: Settings | None = None) -> dict[str, CollectionConfig]:
    """All configured collections: the config file's, the seed keys', then the CLI registry's.

    The config file wins on a name clash; `disabled_collections` are left out.
    """
    paths = paths or Paths.from_env()
    settings = settings or load_settings(paths.config)
    out = _parse(paths.config, settings.collections)
    for name, cfg in _parse(paths.config, _seed_collections(settings)).items():
        out.setdefault(name, cfg)
    reg = registry_path(paths)
    if reg.exists():
        raw = yaml.safe_load(reg.read_text(encoding="utf-8")) or {}
        for name, cfg in _parse(reg, raw.get("collections", {})).items():
            out.setdefault(name, cfg)
    disabled = set(settings.disabled_collections)
    return {n: c for n, c in out.items() if n not in disabled}


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
    """Add or replace a CLI-registered collection in registry.yaml."""
    reg = registry_path(paths)
    raw = (yaml.safe_load(reg.read_text(encoding="utf-8")) or {}) if reg.exists() else {}
    body = cfg.model_dump(mode="json", exclude={"name"}, exclude_defaults=True)
    body["sources"] = [_source_body(s) for s in cfg.sources]
    raw.setdefault("collections", {})[cfg.name] = body
    reg.parent.mkdir(parents=True, exist_ok=True)
    reg.write_text("# Written by `local-rag index`; edit config.yaml instead to customise.\n"
                   + yaml.safe_dump(raw, sort_keys=True, allow_unicode=True), encoding="utf-8")


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
