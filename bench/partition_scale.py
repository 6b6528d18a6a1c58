"""One collection of 300k items in Dagster: one asset (before) vs shard assets (after), what the user waits for.

    python bench/partition_scale.py [--items 300000] [--messages 20000] [--repeats 3] [--layouts 1,16]

For each layout (1 = one asset holding every partition, as before; 16 = what rag_pipelines/wiring/shards.py picks
for 300k items at SHARD_BOUND 50k) a fresh LOCAL_RAG_HOME gets:
- an eM Client store of `--messages` generated rows (bench/emclient_gen.py, cached under bench/out/) as the
  collection's real source; its items are known to rag.db (rows written by SQL from the scan, as in
  bench/email_scale.py: a bench shortcut), 1,000 of them as failed items;
- Dagster bookkeeping for `--items` items: the source's keys plus padding keys shaped like Message-IDs (a
  generated store of 300k rows takes an hour here), each a partition of its shard, each materialised (written in
  bulk as one run's events per shard through local-rag's event log: the state a finished index leaves).
Then it times:
1. the partitions page: dagster-webserver on 127.0.0.1 serving the GraphQL query the asset's partitions page
   issues (PartitionHealthQuery: every key + statuses), for the one asset vs one shard, first call (Dagster
   builds its status cache) and warm; and the partition-stats query over all of the collection's assets;
2. a sensor tick (the real sensor, evaluate_tick) with no change, and with one new item (its partition added,
   its range run requested);
3. a "backfill" of the 1,000 failed items: `local-rag index`'s path (index_collections: plan, one sync run that
   re-reads, re-parses and writes them). The embedder is a stand-in (tests/fakes.py HashEmbedder): what is
   measured is the bookkeeping, not the model.
Figures are medians over `--repeats`.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

import email_scale as es  # noqa: E402  (its store, webserver and GraphQL helpers)

COLLECTION = es.COLLECTION
FAILED = 1_000
STATS = """
query Stats($assetKeys: [AssetKeyInput!]!) {
  assetNodes(assetKeys: $assetKeys) { assetKey { path } partitionStats { numMaterialized numPartitions numFailed } }
}"""


def say(text: str = "") -> None:
    print(text, flush=True)


def prepare(home: Path, store: Path, items: int, count: int) -> dict:
    """The home: rag.db rows from the scan, the layout recorded, every partition added and materialised."""
    import dagster as dg

    from rag_pipelines.sources.emclient import EmClientOptions, EmClientSource
    from rag_pipelines.wiring.instance import ensure_instance
    from rag_pipelines.wiring.shards import KV_PREFIX, Layout
    from rag_search.config import Paths
    from rag_search.store import Store, writes

    shutil.rmtree(home, ignore_errors=True)
    es.write_config(home, store)
    os.environ.update(es.home_env(home))
    paths = Paths.from_env()
    scan = EmClientSource(EmClientOptions(type="email", path=store)).scan()
    real = sorted(scan.items)
    failed = set(real[:: max(1, len(real) // FAILED)][:FAILED])
    db = Store.open(paths.db)
    coll = writes.ensure_collection(db, COLLECTION, "system")
    with db.transaction() as conn:
        conn.executemany(
            "INSERT INTO items(collection_id, source_type, key, uri, sha256, status, stamp, source, error_kind, error) "
            "VALUES (?, 'email', ?, ?, 'x', ?, ?, 'email', ?, ?)",
            [(coll, k, s.uri, "failed" if k in failed else "indexed", s.value, *(("corrupt", "bench") if k in failed
                                                                                 else (None, None)))
             for k, s in scan.items.items()])
    db.close()
    ensure_instance(paths)
    instance = dg.DagsterInstance.get()
    instance.run_storage.set_cursor_values({KV_PREFIX + COLLECTION: str(count)})
    layout = Layout(COLLECTION, count)
    keys = real + [f"<pad-{i:07d}.{uuid.UUID(int=i).hex[:12]}@bench.example>" for i in range(items - len(real))]
    t0 = time.perf_counter()
    for i, group in layout.split(sorted(keys)).items():
        for j in range(0, len(group), 10_000):
            instance.add_dynamic_partitions(layout.partitions_name(i), group[j: j + 10_000])
    added = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i, group in layout.split(sorted(set(keys) - failed)).items():
        materialise(instance, layout, i, group)
    filled = time.perf_counter() - t0
    say(f"   {len(keys):,} partitions over {count} asset(s) (largest {max(map(len, layout.split(keys).values())):,}): "
        f"added in {added:.1f} s; {len(keys) - len(failed):,} materialisations written in bulk in {filled:.1f} s; "
        f"{len(real):,} real items in rag.db ({len(failed):,} failed)")
    return {"instance": instance, "paths": paths, "layout": layout, "real": real, "failed": sorted(failed)}


def materialise(instance, layout, i: int, keys: list[str], batch: int = 5_000) -> None:
    """One successful run of the shard's index job whose events materialise these partitions."""
    import dagster as dg
    from dagster._core.events import DagsterEvent, DagsterEventType, StepMaterializationData
    from dagster._core.events.log import EventLogEntry

    job = f"{layout.partitions_name(i).replace('_items', '_index')}"
    run_id = str(uuid.uuid4())
    instance.add_run(dg.DagsterRun(job_name=job, run_id=run_id, status=dg.DagsterRunStatus.SUCCESS,
                                   tags={"local_rag/collection": COLLECTION}))
    asset_key, now = layout.asset_key(i), time.time()
    for j in range(0, len(keys), batch):
        events = [EventLogEntry(None, logging.DEBUG, "", run_id, now, step_key="items", job_name=job,
                                dagster_event=DagsterEvent(
                                    DagsterEventType.ASSET_MATERIALIZATION.value, job_name=job, step_key="items",
                                    event_specific_data=StepMaterializationData(dg.AssetMaterialization(
                                        asset_key=asset_key, partition=k,
                                        metadata={"outcome": "indexed", "chunks": 3, "uri": f"emclient://{k}"}))))
                  for k in keys[j: j + batch]]
        instance.event_log_storage.store_event_batch(events)


def sensor_ticks(res: dict, repeats: int) -> dict:
    """The real sensor: no change; one new item (its rag.db row removed, so the scan finds it new)."""
    import dagster as dg

    from rag_pipelines.config import load_collections
    from rag_pipelines.wiring.definitions import build_definitions
    from rag_pipelines.wiring.resources import RagResource

    instance, layout = res["instance"], res["layout"]
    defs, _ = build_definitions(load_collections(res["paths"]), layouts={COLLECTION: layout})
    sensor = defs.get_sensor_def(f"{COLLECTION}_sensor")
    store = RagResource().store()

    def tick():
        t0 = time.perf_counter()
        data = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, resources={"rag": RagResource()}))
        return time.perf_counter() - t0, data

    tick()  # warm: opens the sources
    quiet, changed = [], []
    for r in range(repeats):
        took, data = tick()
        assert not data.run_requests, data
        quiet.append(took)
        key = res["real"][1 + r * 7]
        row = store.conn.execute("SELECT * FROM items WHERE key = ?", (key,)).fetchone()
        cols = [d[0] for d in store.conn.execute("SELECT * FROM items LIMIT 0").description]
        with store.transaction() as conn:
            conn.execute("DELETE FROM items WHERE key = ?", (key,))
        instance.delete_dynamic_partition(layout.partitions_of(key), key)
        took, data = tick()
        assert len(data.run_requests) == 1, data
        changed.append(took)
        with store.transaction() as conn:  # back as it was
            conn.execute(f"INSERT INTO items({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})", tuple(row))
    say(f"   sensor tick, no change: {es.fmt_times(quiet)}; one new item (partition added, range run requested): "
        f"{es.fmt_times(changed)}")
    return {"quiet": es.med(quiet), "one": es.med(changed)}


def backfill(res: dict) -> dict:
    """`local-rag index email` retrying the failed items: one sync run over them (stand-in embedder)."""
    from fakes import HashEmbedder

    from rag_pipelines.indexing.runs import index_collections
    from rag_pipelines.wiring import resources
    from rag_search.config import load_settings

    paths = res["paths"]
    settings = load_settings(paths.config).embedder
    resources._open[("embedder", settings.model_dump_json(), paths.ollama_host)] = HashEmbedder()
    t0 = time.perf_counter()
    [summary] = index_collections(paths, [COLLECTION])
    wall = time.perf_counter() - t0
    assert summary.resharded is None, summary.resharded
    retried = sum(summary.outcomes.values())
    say(f"   backfill of the {FAILED:,} failed items (`index` path, one sync run, stand-in embedder): {wall:.1f} s "
        f"= {1000 * wall / max(1, retried):.1f} ms per item; outcomes {summary.outcomes}, {len(summary.run_ids)} run(s)")
    return {"wall": wall}


def ui(res: dict, work: Path, repeats: int) -> dict:
    layout = res["layout"]
    keys = [{"path": layout.asset_key(i).path} for i in range(layout.count)]
    with es.Webserver(res["paths"].home, work / f"webserver-{layout.count}.log") as ws:
        say(f"   dagster-webserver: code location loaded {ws.ready:.1f} s after start")
        first = es.graphql(ws.port, es.PARTITION_HEALTH, {"assetKey": keys[0]})
        warm = [es.graphql(ws.port, es.PARTITION_HEALTH, {"assetKey": keys[0]}) for _ in range(repeats)]
        node = warm[-1][3]["data"]["assetNodeOrError"]
        shown = len(node["partitionKeysByDimension"][0]["partitionKeys"])
        say(f"   partitions page of {'/'.join(keys[0]['path'])} ({shown:,} partitions), PartitionHealthQuery: first "
            f"call {first[1]:.2f} s (builds the status cache), then {es.fmt_times([w[1] for w in warm])}, "
            f"{es.mb(warm[-1][2])}")
        stats = [es.graphql(ws.port, STATS, {"assetKeys": keys}) for _ in range(repeats)]
        nodes = stats[-1][3]["data"]["assetNodes"]
        total = sum(n["partitionStats"]["numMaterialized"] for n in nodes)
        say(f"   partition stats of all {len(keys)} asset(s) of the collection ({total:,} materialised): "
            f"{es.fmt_times([s[1] for s in stats])}")
    return {"first": first[1], "warm": es.med([w[1] for w in warm]), "stats": es.med([s[1] for s in stats])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=300_000)
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--layouts", default="1,16")
    args = ap.parse_args()
    store, info = es.section_store(args.messages)
    say(f"source: {store} ({info['rows']:,} MailItems rows)")
    work = es.OUT / "partition-scale"
    results = {}
    for count in [int(x) for x in args.layouts.split(",")]:
        say(f"\n== {args.items:,} items, {count} asset(s) ==")
        res = prepare(work / f"home-{count}", store, args.items, count)
        out = {"ticks": sensor_ticks(res, args.repeats)}
        out["backfill"] = backfill(res)
        res["instance"].dispose()
        out["ui"] = ui(res, work, args.repeats)
        results[count] = out
    say("\nsummary (median seconds): layout | partitions page first / warm | stats | tick quiet / one new | backfill")
    for count, r in results.items():
        say(f"   {count:>2} asset(s) | {r['ui']['first']:.2f} / {r['ui']['warm']:.2f} | {r['ui']['stats']:.2f} | "
            f"{r['ticks']['quiet']:.2f} / {r['ticks']['one']:.2f} | {r['backfill']['wall']:.1f}")


if __name__ == "__main__":
    main()
