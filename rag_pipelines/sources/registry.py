"""The source types: every module under rag_pipelines/sources/ that exposes `SOURCE = SourceType(...)`.

Adding a source is adding one module (plus its parser): config validation, `local-rag index <type>`,
the Dagster assets, sensors, status and checks find it here.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable

from rag_pipelines.sources.base import Source
from rag_pipelines.sources.options import SourceOptions

CliConfig = Callable[..., "dict[str, Any] | None"]


@dataclass(frozen=True)
class SourceType:
    """What a source module declares about itself."""

    type: str
    options: type[SourceOptions]
    build: Callable[..., Source]  # (options, label, limits) → Source
    summary: str  # one line, shown in `local-rag index --help`
    collection: str | None = None  # default collection of `local-rag index <type>`
    kind: str = "system"
    cli_params: tuple = ()  # click Parameters of `local-rag index <type>`
    cli_source: CliConfig | None = None  # CLI values → a source dict to register, or None: configured ones
    seed_keys: dict[str, str] = field(default_factory=dict)  # top-level config key → option it fills
    # (settings, names taken) → collections implied by top-level config keys that make several (code_groups)
    seed: Callable[..., "dict[str, dict]"] | None = None


@lru_cache(maxsize=1)
def source_types() -> dict[str, SourceType]:
    import rag_pipelines.sources as package

    found: dict[str, SourceType] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for spec in _declared(module):
            found[spec.type] = spec
    return found


def _declared(module) -> list[SourceType]:
    value = getattr(module, "SOURCE", None) or getattr(module, "SOURCES", None)
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def build_source(options: SourceOptions, label: str | None, limits=None) -> Source:
    return source_types()[options.type].build(options, label, limits)


def options_models() -> tuple[type[SourceOptions], ...]:
    """Each source's options model once (several types may share one)."""
    return tuple(dict.fromkeys(t.options for t in source_types().values()))
