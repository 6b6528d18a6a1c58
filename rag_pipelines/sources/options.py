"""Config models every source shares: the base of each source's options, captures, and limits.

Each source module declares its own options model (a subclass of SourceOptions with a `type` literal);
the collection config is the union of all of them, discriminated by `type`.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rag_pipelines.sources.globs import translate

_CAPTURE_GROUP = re.compile(r"\(\?<([A-Za-z_]\w*)>")


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


@lru_cache(maxsize=256)
def compile_capture(pattern: str) -> re.Pattern:
    """notes/(?<area>[^/]+)/**/*.md → a regex over the relative POSIX path (** any depth, * one segment)."""
    try:
        return re.compile("^" + translate(pattern) + "$")
    except re.error as exc:
        raise ValueError(f"not a valid pattern: {exc}") from exc


class Capture(Model):
    pattern: str = Field(description="Glob-like path pattern with named captures, e.g. notes/(?<area>[^/]+)/**/*.md")

    @field_validator("pattern")
    @classmethod
    def _has_captures(cls, v: str) -> str:
        if not _CAPTURE_GROUP.search(v):
            raise ValueError("needs at least one named capture like (?<area>[^/]+)")
        compile_capture(v)
        return v


class SourceOptions(Model):
    """Options every source has."""

    type: str = Field(description="The kind of source (obsidian, project, email, calibre, rss, ...).")
    label: str | None = Field(None, description="Prefix of this source's item keys when a collection has several sources.")
    ingest: Literal["chunked", "whole-document", "file-path"] = Field(
        "chunked", description="chunked (default), whole-document (one chunk per item where it fits), "
        "file-path (embed the content; store and return only the item's path).")
    metadata: dict[str, str | int | float | bool] = Field(default_factory=dict, description="Static metadata on every chunk.")


def expand_paths(v: tuple[Path, ...]) -> tuple[Path, ...]:
    return tuple(Path(p).expanduser().resolve() for p in v)
