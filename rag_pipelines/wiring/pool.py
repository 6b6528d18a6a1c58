"""Dagster's concurrency pools for local-rag: one writer per collection, and the embedder shared by all runs.

A collection's pool (`collection_pool`): the op of every job that writes the collection's items (its index and sync
jobs, and Dagster's own asset job the UI's Materialize and backfills run) is in it, so Dagster holds them to one at
a time, whatever started the run: the queue does not start a run whose pool is taken, and a run that starts anyway
(in-process from the CLI, MCP or the page, a launch that bypassed the queue) waits at the step for the pool's slot.
The limit is the instance's default pool limit, 1, which local-rag writes into a PostgreSQL instance's dagster.yaml
(instance.py; the Helm values set the same). A SQLite instance runs one run at a time and has no limit.

The embedder pool: at most `dagster.embedder_slots` embedding calls at once across every run of a PostgreSQL
Dagster instance (one Ollama request or one CPU model at a time by default), through Dagster's concurrency pool
`local_rag_embedder` (its slots show under Deployment > Concurrency in the UI).

Only the embedding call holds a slot: runs of different collections read, parse, chunk and write side by side and
take turns at the model. A SQLite instance runs one run at a time, so its embedder is used as it is.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator, Sequence

from rag_search.collection_config import safe_name

POOL = "local_rag_embedder"
COLLECTION_POOL = "local_rag_collection_"  # + the collection's safe name
FIRST_POLL, MAX_POLL = 0.02, 0.5  # seconds between claims while another run embeds
REAP_EVERY = 30.0  # seconds of waiting between looks for dead runs that still hold a slot


class PooledEmbedder:
    """An embedder whose `embed_documents` waits for a slot of the pool; everything else is the embedder's."""

    def __init__(self, inner, instance, run_id: str, step_key: str):
        self._inner, self._instance, self._run_id, self._step_key = inner, instance, run_id, step_key

    def __getattr__(self, name: str):
        return getattr(self._inner, name)

    def embed_documents(self, texts: Sequence[str], progress=None):
        with embedder_slot(self._instance, self._run_id, self._step_key):
            return self._inner.embed_documents(texts, progress=progress)


def pooled(embedder, instance, run_id: str, step_key: str, slots: int):
    """The embedder behind the pool (with `slots` slots) on an instance that runs runs in parallel; else itself."""
    if not uses_pool(instance):
        return embedder
    storage = instance.event_log_storage
    if storage.get_concurrency_info(POOL).slot_count != slots:
        try:
            storage.set_concurrency_slots(POOL, slots)  # config.yaml is the source of the limit
        except Exception:  # noqa: BLE001 - two runs starting at once both create the pool: one wins
            if storage.get_concurrency_info(POOL).slot_count != slots:
                raise
    return PooledEmbedder(embedder, instance, run_id, step_key)


def collection_pool(name: str) -> str:
    """The pool of the collection's writers (one slot: one run writes the collection at a time)."""
    return COLLECTION_POOL + safe_name(name)


def writers_pooled(instance, name: str) -> bool:
    """Whether Dagster holds this collection's writing steps to one at a time on this instance (a limit for its pool,
    claimed by each step: op granularity)."""
    from dagster._core.instance.config import PoolGranularity

    if not uses_pool(instance):
        return False
    if instance.get_concurrency_config().pool_config.pool_granularity == PoolGranularity.RUN:
        return False
    return bool(instance.global_op_concurrency_default_limit) or \
        collection_pool(name) in instance.event_log_storage.get_concurrency_keys()


def uses_pool(instance) -> bool:
    from dagster._core.storage.event_log.sqlite import ConsolidatedSqliteEventLogStorage, SqliteEventLogStorage

    storage = instance.event_log_storage
    sqlite = isinstance(storage, (SqliteEventLogStorage, ConsolidatedSqliteEventLogStorage))
    return not sqlite and storage.supports_global_concurrency_limits


@contextmanager
def embedder_slot(instance, run_id: str, step_key: str) -> Iterator[None]:
    """Hold one slot of the pool (waiting for it, oldest claim first) while the block runs. The claim is the step's
    under a key of its own: Dagster frees a step's claims all at once, and the step also holds its collection's."""
    storage, step_key = instance.event_log_storage, f"{step_key}:embedder"
    poll, reaped = FIRST_POLL, time.monotonic()
    while not storage.claim_concurrency_slot(POOL, run_id, step_key).is_claimed:
        time.sleep(poll)
        poll = min(poll * 1.5, MAX_POLL)
        if time.monotonic() - reaped > REAP_EVERY:  # a killed run keeps its slot until it is marked failed
            from rag_pipelines.indexing.health import reap_dead_runs

            reap_dead_runs(instance)
            reaped = time.monotonic()
    try:
        yield
    finally:
        storage.free_concurrency_slot_for_step(run_id, step_key)
