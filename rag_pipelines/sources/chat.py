"""Options every chat source shares: how conversations are cut into windows, and the zone their times show in."""

from __future__ import annotations

from datetime import tzinfo

from pydantic import Field, field_validator

from rag_pipelines.parsers.conversation import WindowSpec, local_zone
from rag_pipelines.sources.options import SourceOptions


class ChatOptions(SourceOptions):
    gap_hours: float = Field(4.0, gt=0, le=24 * 30, description="A silence longer than this (hours) starts a new "
                             "conversation window.")
    window_chars: int = Field(1500, ge=200, le=100_000, description="Characters of message text per window at "
                              "most (a window is then a few chunks of the embedder at most).")
    window_messages: int = Field(50, ge=1, le=10_000, description="Messages per window at most.")
    timezone: str | None = Field(None, description="IANA time zone for the times in window titles and lines "
                                 "(Europe/Berlin); default: this machine's.")

    @field_validator("timezone")
    @classmethod
    def _zone(cls, v: str | None) -> str | None:
        if v:
            from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

            try:
                ZoneInfo(v)
            except (ZoneInfoNotFoundError, ValueError) as exc:
                raise ValueError(f"unknown time zone {v!r}; use an IANA name such as Europe/Berlin") from exc
        return v

    def window_spec(self) -> WindowSpec:
        return WindowSpec(self.gap_hours * 3600, self.window_chars, self.window_messages)

    def zone(self) -> tzinfo:
        return local_zone(self.timezone)
