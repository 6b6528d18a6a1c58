"""Collections as both sides read them: their names, where each is declared, its sources' types and folders.

Shared knowledge: the search side (CLI, MCP server, page) reads it here and never imports rag_pipelines for it;
rag_pipelines.config validates each source's options with that source's own model and adds the collections the
seed's top-level keys imply (`emclient_db_path`, `code_groups`, ...), which only the sources know.

A collection is declared in config.yaml's `collections:` (the user's file, never rewritten) or in
$LOCAL_RAG_HOME/registry.yaml (machine-written by `local-rag index` and the MCP `rag_index` tool, each change under a
lock: file_updates.py). The config file wins a name clash; `disabled_collections` are left out. Names are what users
type ("Project Alpha"); `safe_name` maps them to Dagster-safe identifiers.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rag_search import file_updates
from rag_search.config import Paths, Settings, load_settings
from rag_search.errors import ConfigError

MAX_NAME = 64
_IDENT = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
REGISTRY_HEADER = "# Written by `local-rag index`; edit config.yaml instead to customise.\n"
PATH_OPTIONS = ("paths", "libraries", "path")  # the options of a source that name where it reads


@dataclass(frozen=True)
class Declared:
    """One collection as a file declares it: its body is not validated here (rag_pipelines.config does that)."""

    name: str
    body: dict[str, Any]
    file: Path

    @property
    def sources(self) -> list[dict[str, Any]]:
        sources = self.body.get("sources") or []
        return [s for s in sources if isinstance(s, dict)] if isinstance(sources, list) else []


def check_name(name: str) -> str:
    """The name as stored (NFC, trimmed), or ValueError saying what a name may hold."""
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


def registry_path(paths: Paths) -> Path:
    return paths.home / "registry.yaml"


def declared(paths: Paths | None = None, settings: Settings | None = None,
             with_disabled: bool = False) -> dict[str, Declared]:
    """Every collection config.yaml and registry.yaml declare (config.yaml's first; it wins a clash)."""
    paths = paths or Paths.from_env()
    settings = settings or load_settings(paths.config)
    out = _entries(paths.config, settings.collections)
    for name, entry in _entries(registry_path(paths), read_registry(paths)).items():
        out.setdefault(name, entry)
    if with_disabled:
        return out
    disabled = set(settings.disabled_collections)
    return {n: d for n, d in out.items() if n not in disabled}


def read_registry(paths: Paths) -> dict[str, Any]:
    """registry.yaml's `collections:` as written (empty when there is none)."""
    reg = registry_path(paths)
    try:
        raw = yaml.safe_load(reg.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        return {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"Cannot read {reg} ({exc}). It lists the collections `local-rag index` added: fix it, or "
                          "delete it and add them again with `local-rag index`.") from exc
    return (raw.get("collections") or {}) if isinstance(raw, dict) else {}


def _entries(file: Path, raw: Any) -> dict[str, Declared]:
    if not isinstance(raw, dict):
        raise ConfigError(f"{file}: `collections` must be a mapping of name → collection.")
    out = {}
    for name, body in raw.items():
        try:
            key = check_name(name)
        except ValueError:
            key = str(name)  # rag_pipelines.config's validation names the file and the field
        out[key] = Declared(key, dict(body or {}) if isinstance(body, dict) else {}, file)
    return out


def source_paths(entry: Declared) -> list[str]:
    """Every path a collection reads from (folders, databases, libraries), resolved as its sources resolve them."""
    out: list[str] = []
    for src in entry.sources:
        for option in PATH_OPTIONS:
            value = src.get(option)
            for p in ([value] if isinstance(value, str) else value if isinstance(value, list) else []):
                out.append(str(Path(str(p)).expanduser().resolve()))
    return out


def register(paths: Paths, name: str, body: dict[str, Any]) -> None:
    """Add or replace one collection of registry.yaml (under its lock: others added at the same time stay)."""
    _change_registry(paths, lambda entries: entries | {name: body})


def unregister(paths: Paths, name: str) -> bool:
    """Remove one collection from registry.yaml; False when it was not there."""
    found = []

    def drop(entries: dict[str, Any]) -> dict[str, Any]:
        found.append(name in entries)
        return {n: b for n, b in entries.items() if n != name}

    _change_registry(paths, drop)
    return found[0]


def _change_registry(paths: Paths, change) -> None:
    def rewrite(text: str | None) -> str:
        raw = (yaml.safe_load(text) or {}) if text else {}
        raw = raw if isinstance(raw, dict) else {}
        raw["collections"] = change(dict(raw.get("collections") or {}))
        return REGISTRY_HEADER + yaml.safe_dump(raw, sort_keys=True, allow_unicode=True)

    file_updates.update(registry_path(paths), rewrite)
