"""The Dagster code location: every configured collection as assets, jobs, checks, sensors, schedules."""

from __future__ import annotations

import dagster as dg

from rag_search.config import Paths

from rag_pipelines.config import CollectionConfig, load_collections
from rag_pipelines.wiring.assets import CollectionDefs, build_collection
from rag_pipelines.wiring.maintenance import embeddings
from rag_pipelines.wiring.resources import RagResource
from rag_pipelines.wiring.shards import Layout, layouts
from rag_pipelines.wiring.sensors import build_schedule, build_sensor


def build_definitions(collections: dict[str, CollectionConfig], home: str = "",
                      layouts: dict[str, Layout] | None = None) -> tuple[dg.Definitions, dict[str, CollectionDefs]]:
    """Every collection's assets (one per shard: `layouts`, by default one each) and jobs, sensors, schedules."""
    layouts = layouts or {}
    built = {name: build_collection(cfg, layouts.get(name)) for name, cfg in sorted(collections.items())}
    defs = dg.Definitions(
        assets=[s.asset for c in built.values() for s in c.shards] + [embeddings],
        jobs=[j for c in built.values() for j in [*(s.index_job for s in c.shards), c.sync_job]],
        sensors=[build_sensor(c) for c in built.values()],
        schedules=[build_schedule(c) for c in built.values()],
        resources={"rag": RagResource(home=home)},
        executor=dg.in_process_executor,
    )
    return defs, built


def load_definitions(paths: Paths | None = None) -> dg.Definitions:
    """The code location: each collection with the shards its Dagster instance records."""
    collections = load_collections(paths)
    return build_definitions(collections, layouts=instance_layouts(collections))[0]


def instance_layouts(collections) -> dict[str, Layout]:
    """The shard layouts recorded in the instance at DAGSTER_HOME (none set: every collection is one asset)."""
    import os

    if not os.environ.get("DAGSTER_HOME"):
        return layouts(None, collections)
    instance = dg.DagsterInstance.get()
    try:
        return layouts(instance, collections)
    finally:
        instance.dispose()
