"""local-rag's pipelines: sources, parsers, chunking (plain functions) and the Dagster code location.

`rag_pipelines.defs` (what workspace.yaml loads) is built on first access, so importing a parser or
the chunker never imports Dagster.
"""

from __future__ import annotations

import rag_search  # noqa: F401  (first: switches telemetry off before any library loads)


def __getattr__(name: str):
    if name == "defs":
        from rag_pipelines.wiring.definitions import load_definitions

        return load_definitions()
    raise AttributeError(name)
