"""Dagster's SQLite event log with its connections kept open: an item's event costs ~1 ms, not ~10.

Dagster's `SqliteEventLogStorage` opens a new SQLAlchemy engine and connection for every event and
closes it again; each close checkpoints the WAL (copy and fsync) and each commit fsyncs. A run that
materialises one partition per item writes two databases per item (the run's shard and `index.db`),
so on 500 notes the event log took a quarter of the run. This subclass keeps one connection per
database file (the index and the last few runs' shards), in WAL mode with `synchronous=NORMAL`:
a power cut can lose the last events but never corrupts the log (SQLite's guarantee), and rag.db,
not this log, is the record of what is indexed.

The Dagster UI follows a running run by watching its shard file for modifications, which happen
when the WAL is checkpointed into it: a run's shard is checkpointed after every event except
item events (materialisations, observations), and after those at least every `LIVE_SECONDS`.

local-rag's dagster.yaml names this class (`wiring/instance.py`); everything else is Dagster's.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from contextlib import contextmanager
from typing import Iterator

from dagster import Field, StringSource
from dagster._core.events import DagsterEventType
from dagster._core.storage.event_log.schema import SqlEventLogStorageTable
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import StaticPool

OPEN_SHARDS = 4  # databases kept open: index.db and the most recent runs' shards
LIVE_SECONDS = 0.5  # a running run's shard shows new item events in the UI at least this often
ITEM_EVENTS = frozenset({DagsterEventType.ASSET_MATERIALIZATION, DagsterEventType.ASSET_OBSERVATION})


def _pragmas(dbapi_connection, _record) -> None:
    dbapi_connection.execute("PRAGMA synchronous=NORMAL")


class LocalEventLogStorage(SqliteEventLogStorage):
    """`SqliteEventLogStorage` keeping its connections open between events (see the module's docstring)."""

    def __init__(self, base_dir: str | None = None, inst_data=None):
        self._engines: OrderedDict[str, Engine] = OrderedDict()  # set before Dagster's __init__ connects
        self._checkpointed: dict[str, float] = {}
        self._timers: dict[str, threading.Timer] = {}
        self._disposed = False
        self._pid = os.getpid()
        self._engines_lock = threading.Lock()
        super().__init__(base_dir or default_base_dir(), inst_data)

    @classmethod
    def config_type(cls):
        return {"base_dir": Field(StringSource, is_required=False,
                                  description="Where the event log lives (default: $DAGSTER_HOME/history/runs).")}

    @classmethod
    def from_config_value(cls, inst_data, config_value) -> LocalEventLogStorage:
        return cls(inst_data=inst_data, **config_value)

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        with self._db_lock:
            with self._engine(shard).connect() as conn:
                with conn.begin():
                    yield conn

    def _engine(self, shard: str) -> Engine:
        with self._engines_lock:
            if self._pid != os.getpid():  # a forked child never shares its parent's connections
                self._engines, self._checkpointed, self._timers, self._pid = OrderedDict(), {}, {}, os.getpid()
            engine = self._engines.get(shard)
            if engine is not None:
                self._engines.move_to_end(shard)
                return engine
            engine = create_engine(self.conn_string_for_shard(shard), poolclass=StaticPool,
                                   connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS, "check_same_thread": False})
            event.listen(engine, "connect", _pragmas)
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            self._engines[shard] = engine
            while len(self._engines) > OPEN_SHARDS:
                _, old = self._engines.popitem(last=False)
                old.dispose()  # closing the last connection checkpoints its WAL
            return engine

    @property
    def can_store_asset_failure_events(self) -> bool:
        """Dagster's own SQL storages drop "failed to materialise" events (Dagster+ keeps them); this one keeps
        them, so a failed item's partition page in the UI shows the event with its reason and metadata."""
        return True

    def fetch_failed_materializations(self, records_filter, limit: int, cursor: str | None = None,
                                      ascending: bool = False):
        """As `fetch_observations`, for the events above (the UI's partition page asks for them)."""
        from dagster import AssetKey, EventRecordsFilter
        from dagster._core.storage.event_log.sql_event_log import enforce_max_records_limit

        enforce_max_records_limit(limit)
        kind = DagsterEventType.ASSET_FAILED_TO_MATERIALIZE
        if isinstance(records_filter, AssetKey):
            before, after = EventRecordsFilter.get_cursor_params(cursor, ascending)
            wanted = EventRecordsFilter(event_type=kind, asset_key=records_filter, before_cursor=before,
                                        after_cursor=after)
        else:
            wanted = records_filter.to_event_records_filter(event_type=kind, cursor=cursor, ascending=ascending)
        return self._get_event_records_result(wanted, limit, cursor, ascending)

    def store_event(self, event_entry) -> None:
        super().store_event(event_entry)
        run_id = event_entry.run_id
        if not run_id:
            return
        wait = LIVE_SECONDS - (time.monotonic() - self._checkpointed.get(run_id, 0.0))
        if event_entry.dagster_event_type not in ITEM_EVENTS or wait <= 0:
            self._checkpoint(run_id)
        elif run_id not in self._timers:  # the last item events of a burst show within LIVE_SECONDS too
            timer = self._timers[run_id] = threading.Timer(wait, self._checkpoint, (run_id,))
            timer.daemon = True
            timer.start()

    def store_event_batch(self, events) -> None:
        """A batch of one run's item events in one transaction per database (else one by one)."""
        run_id = events[0].run_id if events else None
        if not run_id or any(e.run_id != run_id or e.dagster_event_type not in ITEM_EVENTS for e in events):
            return super().store_event_batch(events)
        rows = [self._event_to_row(e) for e in events]  # each event serialised once, for both databases
        with self.run_connection(run_id) as conn:
            conn.execute(SqlEventLogStorageTable.insert(), rows)
        with self.index_transaction() as conn:
            insert = SqlEventLogStorageTable.insert()  # compiled once (SQLAlchemy's cache), a row at a time: its id
            ids = [conn.execute(insert, row).inserted_primary_key[0] for row in rows]
            self._store_asset_event_tags(conn, events, ids)
            for i in _last_per_asset(events):  # what the asset's row ends up holding after all of them
                self._store_asset_event(conn, events[i], ids[i])
        self._checkpoint(run_id)

    def _checkpoint(self, run_id: str) -> None:
        """Copy the run shard's WAL into its file: the modification the UI's watcher waits for. Best effort: the
        events are stored either way, and a storage error here must not fail the step (or make Dagster store a
        batch again)."""
        with self._db_lock:
            timer = self._timers.pop(run_id, None)
            if timer is not None and timer is not threading.current_thread():
                timer.cancel()
            if self._disposed:
                return
            self._checkpointed[run_id] = time.monotonic()
            try:
                with self._engine(run_id).connect() as conn:
                    conn.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")
            except Exception as exc:  # noqa: BLE001 — only the UI's live view waits on it
                logging.getLogger(__name__).warning("event log: could not checkpoint run %s: %s", run_id, exc)

    def delete_events(self, run_id: str) -> None:
        super().delete_events(run_id)
        self._close(run_id)

    def wipe(self) -> None:
        self._close_all()
        super().wipe()

    def dispose(self) -> None:
        self._disposed = True  # a timer that fires later does nothing
        self._close_all()
        super().dispose()

    def _close(self, shard: str) -> None:
        with self._db_lock, self._engines_lock:  # no other thread is inside one of its connections
            engine = self._engines.pop(shard, None)
            if engine is not None:
                engine.dispose()

    def _close_all(self) -> None:
        with self._db_lock, self._engines_lock:
            for timer in list(self._timers.values()):
                timer.cancel()  # closing a connection checkpoints its WAL anyway
            self._timers.clear()
            engines, self._engines = list(self._engines.values()), OrderedDict()
            for engine in engines:
                engine.dispose()


def _last_per_asset(events) -> list[int]:
    """Indexes of each asset's last materialisation and (when later) its last event, in order."""
    keep: set[int] = set()
    seen_any, seen_mat = set(), set()
    for i in range(len(events) - 1, -1, -1):
        dagster_event = events[i].dagster_event
        key = dagster_event.asset_key
        if key not in seen_any:
            seen_any.add(key)
            keep.add(i)
        if dagster_event.is_step_materialization and key not in seen_mat:
            seen_mat.add(key)
            keep.add(i)
    return sorted(keep)


def default_base_dir() -> str:
    home = os.environ.get("DAGSTER_HOME")
    if not home:
        raise RuntimeError("LocalEventLogStorage needs DAGSTER_HOME (or a base_dir in dagster.yaml); "
                           "local-rag sets it to <LOCAL_RAG_HOME>/dagster: run it through `local-rag`.")
    return os.path.join(os.path.abspath(os.path.expanduser(home)), "history", "runs")
