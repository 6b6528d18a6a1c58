"""One run's items indexed by several processes at once (`dagster.workers`): each worker process reads, parses,
chunks, embeds and writes its share of the keys into the store; the run's own process hands out the shares and
hears every item's outcome, so Dagster's per-item events, the live progress and the collection's lock stay where
they were (the workers run under the run's lock).

Why processes and not Dagster's multiprocess executor: a collection's items are one asset step (its partitions
are items, not steps), and the CLI runs jobs in-process (`execute_in_process`, live progress); so the step fans its
keys out itself. The keys are dealt in blocks of `BLOCK` neighbours (a mailbox's messages stay together) round-robin.

A worker that dies (killed, or a crash in native code) loses nothing written: its items not yet written are
marked failed with the reason and retried by the next `local-rag index`; the other workers go on.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
import traceback
from dataclasses import dataclass
from typing import Callable
from rag_search.config import Paths, load_settings
from rag_search.errors import RagError
from rag_search.records import ItemRef
from rag_search.store import Store, writes

from rag_pipelines.config import CollectionConfig
from rag_pipelines.indexing.items import IndexStats, ItemListener, WorkListener

MIN_KEYS = 50  # per worker: below it a run indexes in its own process (a worker costs seconds to start)
BLOCK = 8  # neighbouring keys dealt to one worker together
TIMINGS = ("embedded", "seconds_parsing", "seconds_embedding", "seconds_writing")


@dataclass(frozen=True)
class WorkerJob:
    """What a worker process needs (pickled to it): where the store is, the collection, its keys, the pool."""
    paths: Paths
    cfg: CollectionConfig
    keys: list[str]
    force: bool
    threads: int | None  # the builtin model's threads in this worker (the cores shared out)
    pool: tuple | None  # (instance ref, run id, step key, slots) when runs share the embedder through Dagster's pool


def worker_count(paths: Paths, keys: int) -> int:
    """How many processes index a run of `keys` items: `dagster.workers`, fewer when there are few items."""
    wanted = load_settings(paths.config).dagster.workers
    return max(1, min(wanted, keys // MIN_KEYS))


def worker_jobs(paths: Paths, cfg: CollectionConfig, keys: list[str], workers: int, force: bool,
                pool: tuple | None = None) -> list[WorkerJob]:
    """The run's keys dealt out to `workers` jobs, the cores shared out among them."""
    return [WorkerJob(paths, cfg, share, force, cores_each(workers), pool) for share in deal(keys, workers)]


def deal(keys: list[str], workers: int) -> list[list[str]]:
    """The keys in blocks of BLOCK neighbours, round-robin over the workers."""
    shares: list[list[str]] = [[] for _ in range(workers)]
    for i in range(0, len(keys), BLOCK):
        shares[(i // BLOCK) % workers].extend(keys[i : i + BLOCK])
    return [s for s in shares if s]


def index_in_workers(store: Store, jobs: list[WorkerJob], *, on_item: ItemListener | None = None,
                     on_work: WorkListener | None = None, stats: IndexStats | None = None,
                     log: Callable[[str], None] | None = None) -> IndexStats:
    """Run each job in its own process; every item's outcome reaches `on_item` here (figures in `stats` first),
    and `log` hears what each worker did (its pid, items, seconds)."""
    stats = stats if stats is not None else IndexStats()
    stats.items += sum(len(j.keys) for j in jobs)
    ctx = mp.get_context("spawn")  # never fork a process with threads (onnxruntime, Dagster)
    procs, readers = [], []
    try:
        for n, job in enumerate(jobs):  # a pipe each: a worker killed mid-message blocks no other
            reader, writer = ctx.Pipe(duplex=False)
            procs.append(ctx.Process(target=_work, args=(n, job, writer), name=f"local-rag worker {n}", daemon=True))
            procs[-1].start()
            writer.close()  # the worker's end: when it ends, this process reads EOF
            readers.append(reader)
        _Hearing(store, jobs, procs, readers, stats, on_item, on_work, log).until_done()
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()  # Ctrl-C, SIGTERM or an error here: what the workers wrote stays
            p.join(5)
        for reader in readers:
            reader.close()
    return stats


class _Hearing:
    """The run's process hearing its workers: each outcome counted and passed on, dead workers' items failed."""

    def __init__(self, store, jobs, procs, readers, stats: IndexStats, on_item, on_work, log):
        self.store, self.jobs, self.procs, self.stats = store, jobs, procs, stats
        self.on_item, self.on_work, self.log = on_item, on_work, log or (lambda line: None)
        self.open = dict(enumerate(readers))
        self.pending = [set(job.keys) for job in jobs]  # keys not heard of yet, per worker
        self.running = set(range(len(procs)))  # workers that have not said done (or failed)
        self.error: BaseException | None = None

    def until_done(self) -> None:
        """Hear the workers until each has ended; re-raise the first worker's error."""
        from multiprocessing.connection import wait

        while self.open:
            for reader in wait(list(self.open.values())):
                n = next(n for n, r in self.open.items() if r is reader)
                try:
                    self.handle(reader.recv())
                except EOFError:  # the worker's process ended
                    del self.open[n]
                    self.ended(n)
        if self.error:
            raise self.error

    def ended(self, n: int) -> None:
        """A worker ended without saying done (killed, a crash in native code): its unheard items fail."""
        if n in self.running:
            self.running.discard(n)
            self.procs[n].join(5)
            _lost(self.store, self.jobs[n], sorted(self.pending[n]), self.procs[n].exitcode, self.stats,
                  self.on_item)

    def handle(self, message) -> None:
        kind, n, *rest = message
        if kind == "item":
            key, outcome, figures = rest
            self.pending[n].discard(key)
            _count(self.stats, key, outcome, figures)
            if self.on_item:
                self.on_item(key, outcome)
        elif kind == "work" and self.on_work:
            self.on_work(*rest)
        elif kind == "done":
            self.running.discard(n)
            timings, pid, items, seconds = rest
            for name, value in timings.items():
                setattr(self.stats, name, getattr(self.stats, name) + value)
            self.log(f"worker {n} (pid {pid}): {items} items in {seconds:.1f} s")
        elif kind == "error":
            self.running.discard(n)
            self.error = self.error or (rest[0] if isinstance(rest[0], BaseException) else RagError(rest[0]))


def _count(stats: IndexStats, key: str, outcome: str, figures: dict) -> None:
    """An item's outcome into the run's figures, as index_keys counts it in its own process."""
    stats.outcomes[key] = outcome
    if "uri" in figures:
        stats.item_uris[key] = figures["uri"]
    if outcome == "indexed":
        stats.indexed += 1
        stats.chunks += figures.get("chunks", 0)
        stats.item_chunks[key] = figures.get("chunks", 0)
    elif outcome == "failed":
        stats.failed += 1
        stats.failures.append((key, *figures.get("failure", ("error", ""))))
    elif outcome in ("unchanged", "deleted"):
        setattr(stats, outcome, getattr(stats, outcome) + 1)
    if "tokens" in figures:
        stats.tokens += figures["tokens"]
        stats.item_tokens[key] = figures["tokens"]


def _lost(store: Store, job: WorkerJob, keys: list[str], exitcode, stats: IndexStats, on_item) -> None:
    """A dead worker's items not written: failed with the reason (the next index retries failed items); an item
    indexed before keeps its chunks."""
    from rag_search.store import reads

    from rag_pipelines.indexing.scan import open_sources, owner_of, source_name

    known, sources = reads.item_states(store, job.cfg.name), open_sources(job.cfg)
    why = (f"the indexing worker process ended (exit code {exitcode}) before this item was written: a crash in a "
           "parser or the model, or it was killed; the next `local-rag index` retries it")
    for key in keys:
        owner = owner_of(key, sources)
        label = source_name(sources[owner]) if owner is not None else None
        uri = stats.item_uris.get(key) or (known[key].uri if key in known else key)
        writes.mark_failed(store, ItemRef(job.cfg.name, key, uri, "unknown", label), "error", why)
        _count(stats, key, "failed", {"failure": ("error", why)})
        if on_item:
            on_item(key, "failed")


def _work(n: int, job: WorkerJob, conn) -> None:
    """A worker process: index its keys, telling the run's process each outcome; then its timings."""
    started = time.monotonic()
    try:
        stats = _index_share(n, job, conn)
        conn.send(("done", n, {name: getattr(stats, name) for name in TIMINGS}, os.getpid(), len(job.keys),
                   time.monotonic() - started))
    except BaseException as exc:  # noqa: BLE001 - reported to the run's process, which raises it
        conn.send(("error", n, _picklable(exc)))
    finally:
        conn.close()


def _index_share(n: int, job: WorkerJob, conn) -> IndexStats:
    from rag_search.embedders import load_embedder
    from rag_search.store import open_store

    from rag_pipelines.indexing.items import index_keys

    settings = load_settings(job.paths.config)
    embedder_settings = settings.embedder.model_copy(update={"threads": settings.embedder.threads or job.threads})
    embedder = load_embedder(embedder_settings, job.paths)
    if job.pool:
        embedder = _pooled(embedder, n, *job.pool)
    store = open_store(settings.store_location(job.paths), indexing=True)
    stats = IndexStats()

    def on_item(key: str, outcome: str) -> None:
        figures = {"uri": stats.item_uris[key]} if key in stats.item_uris else {}
        if outcome == "indexed":
            figures["chunks"] = stats.item_chunks.get(key, 0)
        if key in stats.item_tokens and outcome == "indexed":
            figures["tokens"] = stats.item_tokens[key]
        if outcome == "failed":
            figures["failure"] = next(((k, m) for k_, k, m in reversed(stats.failures) if k_ == key), ("error", ""))
        conn.send(("item", n, key, outcome, figures))

    try:
        return index_keys(store, embedder, job.cfg, job.keys, force=job.force, on_item=on_item,
                          on_work=lambda kind, chunks: conn.send(("work", n, kind, chunks)), stats=stats)
    finally:
        store.close()


def _pooled(embedder, n: int, instance_ref, run_id: str, step: str, slots: int):
    import dagster as dg

    from rag_pipelines.wiring.pool import pooled

    instance = dg.DagsterInstance.from_ref(instance_ref)
    return pooled(embedder, instance, run_id, f"{step}[worker {n}]", slots)


def _picklable(exc: BaseException) -> BaseException | str:
    import pickle

    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - sent as text instead
        return f"{type(exc).__name__}: {exc} (in an indexing worker process)\n{traceback.format_exc()}"


def cores_each(workers: int) -> int:
    """The builtin model's threads in each of `workers` processes: the cores shared out."""
    return max(1, (os.cpu_count() or 1) // workers)
