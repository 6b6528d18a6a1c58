"""The Dagster code location: every configured collection as assets, jobs, checks, sensors, schedules."""

from __future__ import annotations

import dagster as dg

from rag_search.config import Paths

from rag_pipelines.config import CollectionConfig, load_collections
from rag_pipelines.wiring.assets import CollectionDefs, build_collection
from rag_pipelines.wiring.maintenance import embeddings
from rag_pipelines.wiring.resources import RagResource
from rag_pipelines.wiring.sensors import build_schedule, build_sensor


def build_definitions(collections: dict[str, CollectionConfig], home: str = "") -> tuple[dg.Definitions, dict[str, CollectionDefs]]:
    built = {name: build_collection(cfg) for name, cfg in sorted(collections.items())}
    defs = dg.Definitions(
        assets=[c.asset for c in built.values()] + [embeddings],
        jobs=[j for c in built.values() for j in (c.index_job, c.sync_job)],
        sensors=[build_sensor(c) for c in built.values()],
        schedules=[build_schedule(c) for c in built.values()],
        resources={"rag": RagResource(home=home)},
        executor=dg.in_process_executor,
    )
    return defs, built


def load_definitions(paths: Paths | None = None) -> dg.Definitions:
    return build_definitions(load_collections(paths))[0]
