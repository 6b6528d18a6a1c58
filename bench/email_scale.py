"""eM Client at 150k messages: is one Dagster partition per message usable (sensor tick, UI), and what it costs.

    python bench/email_scale.py [--messages 150000] [--index-messages 2000] [--repeats 3]

1. Generates (once; cached under bench/out/) an eM Client data folder of `--messages` MailItems rows
   (bench/emclient_gen.py: real prose bodies, mostly in the FTI shadow table, some HTML-only, ~1/6 Gmail
   "All Mail" copies) and prints its sizes.
2. No-op rescan at that size: the source's scan(), plan_sync() against an index that already knows every
   item (a bench shortcut: rag.db's items rows are written directly by SQL from the scan), the Dagster side
   (add_dynamic_partitions of every key into a fresh SQLite instance, get_dynamic_partitions, the run requests
   of a tick that finds one new message) and a real evaluation of the collection's sensor with no changes.
3. First index of a `--index-messages` store: `local-rag index email --path STORE` (a subprocess into a temp
   LOCAL_RAG_HOME; wall time and peak RSS), then the very same chunk texts (read back from rag.db)
   embedded by the builtin embedder in a fresh process. Ratio, and the non-embedding cost per item.
4. The Dagster UI over the 150k instance: a range run over `--ui-materialized` keys with a fast fake
   embedder (tests/fakes.py HashEmbedder) gives it materialisations, then `dagster-webserver` on 127.0.0.1
   serves the GraphQL queries the asset's partitions page issues (timed: first byte and total), and headless
   Chromium (when installed) screenshots /assets/email/items?view=partitions. The step-3 home (~1.7k
   partitions) is measured the same way as a baseline.

Every network connection stays on 127.0.0.1 (Chromium gets a resolver rule that maps every other host to
nothing). Figures are medians over `--repeats` unless said otherwise.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT = HERE / "out"
BIN = Path(sys.executable).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests"))

COLLECTION = "email"
ASSET_PATH = ["email", "items"]


# -- small helpers -----------------------------------------------------------------------------------------


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def timed(fn, repeats: int) -> tuple[list[float], object]:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return times, out


def fmt_times(times: list[float], unit: str = "s") -> str:
    if unit == "ms":
        return f"{med(times) * 1000:.0f} ms (min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f})"
    return f"{med(times):.2f} s (min {min(times):.2f}, max {max(times):.2f})"


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def mb(n: int) -> str:
    return f"{n / 1e6:,.0f} MB" if n >= 1e6 else f"{n / 1e3:,.0f} kB"


def say(text: str = "") -> None:
    print(text, flush=True)


def note(text: str) -> None:
    print(f"   -> {text}", flush=True)


def home_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LOCAL_RAG_DB", "LOCAL_RAG_CONFIG")}
    return {**env, "LOCAL_RAG_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")}


# Linux copies a process's RSS high-water mark into a child at fork+exec, so a child forked from this (large)
# process would report at least our RSS as its peak. A small launcher forks the command and reports its
# peak RSS from wait4 instead.
LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as fh:
    fh.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_measured(cmd: list[str], env: dict, log: Path, timeout: float = 3600) -> tuple[float, float, str]:
    """Run a command; (wall seconds, its peak RSS in MB, its stdout). Raises with the log on failure."""
    rss_file = log.with_suffix(".rss")
    with open(log, "w") as err, tempfile.TemporaryFile("w+") as out:
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", LAUNCHER, str(rss_file), *cmd], env=env, stdout=out,
                              stderr=err, cwd=REPO, timeout=timeout)
        wall = time.perf_counter() - t0
        out.seek(0)
        stdout = out.read()
    if proc.returncode not in (0, 6, 7):  # 6/7: finished with failed items / a skipped source
        raise SystemExit(f"{' '.join(cmd[:4])} failed ({proc.returncode}):\n{log.read_text()[-3000:]}")
    return wall, int(rss_file.read_text()) / 1024, stdout


def write_config(home: Path, store: Path) -> None:
    import yaml

    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump(
        {"collections": {COLLECTION: {"sources": [{"type": "email", "path": str(store)}]}}}))


def asset_body_seconds(dagster_home: Path) -> tuple[dict, int]:
    """Sum of the asset bodies' own timings (once per run: a range run copies its metadata to every key)."""
    import dagster as dg

    instance = dg.DagsterInstance.from_config(str(dagster_home))
    records, cursor = [], None
    while True:
        page = instance.fetch_materializations(dg.AssetKey(ASSET_PATH), limit=10_000, cursor=cursor)
        records += page.records
        if not page.has_more:
            break
        cursor = page.cursor
    seen, totals = set(), {"seconds_parsing": 0.0, "seconds_embedding": 0.0, "seconds_writing": 0.0}
    for r in records:
        if r.run_id in seen:
            continue
        seen.add(r.run_id)
        meta = r.asset_materialization.metadata
        for k in totals:
            totals[k] += float(meta[k].value) if k in meta else 0.0
    instance.dispose()
    return totals, len(records)


# -- 1. the store ------------------------------------------------------------------------------------------


def section_store(n: int) -> tuple[Path, dict]:
    import emclient_gen

    folder = OUT / f"emclient-{n}"
    cached = (folder / "generated.json").exists()
    t0 = time.perf_counter()
    info = emclient_gen.ensure(folder, n, log=lambda m: say(f"   {m}"))
    took = time.perf_counter() - t0
    info["cached"] = cached and took < 5
    return folder, info


def print_store(folder: Path, info: dict, keys: int | None) -> None:
    files: dict[str, int] = info["files"]
    by_kind: dict[str, int] = {}
    for path, size in files.items():
        by_kind[Path(path).name] = by_kind.get(Path(path).name, 0) + size
    kinds = info["body_kinds"]
    total_msgs = sum(kinds.values())
    stores = info["stores"]
    copies = sum(s["all_mail_copies"] for s in stores.values())
    buckets = sum(s["mailbox_month_buckets"] for s in stores.values())
    how = "reused from the cache" if info.get("cached") else f"generated in {info.get('seconds', 0):.0f} s"
    say(f"   {folder}  ({how})")
    say(f"   {info['rows']:,} MailItems rows in 2 stores (gmail {stores['gmail']['rows']:,}, o365 "
        f"{stores['o365']['rows']:,}); {copies:,} of them ({100 * copies / info['rows']:.0f}%) Gmail All Mail "
        f"copies of another row" + (f"; the source scans {keys:,} items (one per Message-ID, junk/trash and "
                                    f"deleted rows left out)" if keys is not None else ""))
    say(f"   bodies: {100 * kinds.get('fti', 0) / total_msgs:.0f}% FTI plain text, "
        f"{100 * kinds.get('html_fti2', 0) / total_msgs:.0f}% HTML-only with FTI part 2, "
        f"{100 * kinds.get('html_only', 0) / total_msgs:.0f}% HTML-only with no FTI text (body from mail_data.dat)")
    say(f"   sizes: total {mb(info['bytes'])}; mail_index.dat {mb(by_kind.get('mail_index.dat', 0))}, "
        f"mail_fti.dat {mb(by_kind.get('mail_fti.dat', 0))}, mail_data.dat {mb(by_kind.get('mail_data.dat', 0))}")
    say(f"   a coarser partition unit would have {buckets:,} mailbox-month keys instead")


# -- 2. no-op rescan -----------------------------------------------------------------------------------------


def section_rescan(store: Path, home: Path, repeats: int) -> dict:
    import dagster as dg

    from rag_pipelines.config import load_collections
    from rag_pipelines.indexing.scan import open_sources
    from rag_pipelines.sources.emclient import EmClientOptions, EmClientSource
    from rag_pipelines.indexing.plan import plan_sync
    from rag_pipelines.wiring.assets import add_partitions, partitions_name
    from rag_pipelines.wiring.definitions import build_definitions
    from rag_pipelines.wiring.instance import DAGSTER_YAML, ensure_instance
    from rag_pipelines.wiring.resources import RagResource
    from rag_pipelines.wiring.sensors import run_requests
    from rag_search.config import Paths
    from rag_search.store import Store, writes

    res: dict = {}
    write_config(home, store)
    os.environ.update(home_env(home))
    paths = Paths.from_env()
    cfg = load_collections(paths)[COLLECTION]

    # the source's scan alone
    src = EmClientSource(EmClientOptions(type="email", path=store))
    t0 = time.perf_counter()
    scan = src.scan()
    first = time.perf_counter() - t0
    times, _ = timed(src.scan, repeats)
    keys = sorted(scan.items)
    res["keys"] = keys
    say(f"   source scan() of {len(keys):,} items: {fmt_times(times)}; first call {first:.2f} s")
    note("reads MailItems/MailCategoryNames/Folders of both stores and groups rows by Message-ID; what every "
         "sensor tick pays before comparing with the index")

    # the index knows every item (bench shortcut: written by SQL, not by indexing)
    db = Store.open(paths.db)
    coll = writes.ensure_collection(db, COLLECTION, "system")
    with db.transaction() as conn:
        conn.executemany(
            "INSERT INTO items(collection_id, source_type, key, uri, sha256, status, stamp, source) "
            "VALUES (?, 'email', ?, ?, 'x', 'indexed', ?, 'email')",
            [(coll, k, s.uri, s.value) for k, s in scan.items.items()])
    db.close()
    sources = open_sources(cfg)
    db = RagResource().store()

    def plan():
        p = plan_sync(db, cfg, sources=sources)
        assert p.empty, f"a no-op rescan found changes: {len(p.new)} new, {len(p.changed)} changed"
        return p

    plan()  # warm: the first plan records the source's scan row
    times, _ = timed(plan, repeats)
    res["plan"] = med(times)
    say(f"   plan_sync() with every item known: {fmt_times(times)}")
    note(f"scan + read rag.db's {len(keys):,} item states + compare stamps = the whole no-change work of a tick "
         f"(items rows filled by SQL from the scan: a bench shortcut, not a real index); "
         f"{100 * med(times) / cfg.sensor_interval_seconds:.1f}% of the {cfg.sensor_interval_seconds} s "
         f"sensor interval")

    # Dagster: the partitions
    name = partitions_name(COLLECTION)
    extra = [f"<bench-extra-{i}@example.com>" for i in range(max(0, 150_000 - len(keys)))]
    add_t, add150_t, get_t, tick_t = [], [], [], []
    _, built = build_definitions({COLLECTION: cfg})
    c = built[COLLECTION]
    for _ in range(repeats):
        tmp = Path(tempfile.mkdtemp(prefix="dg_", dir=home))
        (tmp / "dagster.yaml").write_text(DAGSTER_YAML)
        inst = dg.DagsterInstance.from_config(str(tmp))
        t0 = time.perf_counter()
        add_partitions(inst, name, keys)
        add_t.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        got = inst.get_dynamic_partitions(name)
        get_t.append(time.perf_counter() - t0)
        assert len(got) == len(keys)
        t0 = time.perf_counter()
        reqs = run_requests(inst, c, [f"<new-{time.time_ns()}@example.com>"], [], [], tags={})
        tick_t.append(time.perf_counter() - t0)
        assert len(reqs) == 1
        if extra:
            t0 = time.perf_counter()
            add_partitions(inst, name, extra)
            add150_t.append(time.perf_counter() - t0)
        inst.dispose()
        shutil.rmtree(tmp, ignore_errors=True)
    say(f"   add_partitions() of {len(keys):,} keys into a fresh SQLite instance (chunks of 10k): {fmt_times(add_t)}")
    if add150_t:
        say(f"   ... and {len(extra):,} more keys on top (150,000 in all): {fmt_times(add150_t)}")
    note("the one-off cost of registering every message as a partition (the first `index email` or sensor tick)")
    say(f"   get_dynamic_partitions() of {len(keys):,} keys: {fmt_times(get_t, 'ms')}")
    say(f"   run requests of a tick that finds 1 new message (add it, list all keys, find its range): "
        f"{fmt_times(tick_t, 'ms')}")
    note("Dagster-side work of a tick with new mail, on top of plan_sync (the daemon then launches 1 run)")

    # the real sensor on the instance the UI section uses
    ensure_instance(paths)
    instance = dg.DagsterInstance.get()
    t0 = time.perf_counter()
    add_partitions(instance, name, keys)
    say(f"   (main instance: {len(keys):,} partitions added in {time.perf_counter() - t0:.2f} s)")
    defs, _ = build_definitions({COLLECTION: cfg})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # get_sensor_def's note on resource resolution
        sensor = defs.get_sensor_def(f"{cfg.safe_name}_sensor")

    def tick():
        ctx = dg.build_sensor_context(instance=instance, resources={"rag": RagResource()})
        data = sensor.evaluate_tick(ctx)
        assert not data.run_requests and data.skip_message, data
        return data

    tick()
    times, data = timed(tick, repeats)
    res["sensor"] = med(times)
    say(f"   sensor evaluation with no changes (evaluate_tick, {len(keys):,} partitions): {fmt_times(times)}")
    note(f"'{data.skip_message}'; reap dead runs + look for active runs + plan_sync; the daemon's tick "
         f"on top of it only stores the skip; {100 * med(times) / cfg.sensor_interval_seconds:.1f}% of the "
         f"{cfg.sensor_interval_seconds} s interval")
    res["instance"], res["paths"], res["cfg"] = instance, paths, cfg
    return res


# -- 3. first index vs embed-only ------------------------------------------------------------------------


def embed_only_main(db_path: str) -> None:
    """The fresh process of section 3: read the chunk texts, load the builtin embedder, embed them."""
    t_start = time.perf_counter()
    from rag_search.embedders.builtin import BuiltinEmbedder
    from rag_search.store import Store

    store = Store.open(Path(db_path))
    texts = [r[0] for r in store.conn.execute("SELECT text FROM chunks ORDER BY id")]
    store.close()
    t0 = time.perf_counter()
    emb = BuiltinEmbedder()
    t1 = time.perf_counter()
    emb.embed_documents(texts)
    t2 = time.perf_counter()
    print(json.dumps({"chunks": len(texts), "imports_and_read": t0 - t_start, "model_load": t1 - t0,
                      "embed": t2 - t1}))


def section_first_index(store: Path, work: Path, repeats: int) -> dict:
    exe = str(BIN / "local-rag")
    runs = []
    for i in range(repeats):
        home = work / f"index-{i}"
        env = home_env(home)
        wall, rss, out = run_measured([exe, "index", "email", "--path", str(store), "--json"], env,
                                      work / f"index-{i}.log")
        summary = json.loads(out)[0]
        body, n_mat = asset_body_seconds(home / "dagster")
        e_wall, e_rss, e_out = run_measured([sys.executable, __file__, "--embed-only", str(home / "rag.db")],
                                            env, work / f"embed-{i}.log")
        e = json.loads(e_out)
        runs.append({"home": home, "wall": wall, "rss": rss, "summary": summary, "body": body, "materialized": n_mat,
                     "e_wall": e_wall, "e_rss": e_rss, **e})
        say(f"   repeat {i + 1}: index {wall:.1f} s ({rss:.0f} MB peak), embed-only {e_wall:.1f} s "
            f"({e['embed'] + e['model_load']:.1f} s model load + embed)")
    r = runs[-1]
    items = r["summary"]["outcomes"].get("indexed", 0)
    chunks = r["chunks"]
    wall, e_wall = med([x["wall"] for x in runs]), med([x["e_wall"] for x in runs])
    e_inner = med([x["embed"] + x["model_load"] for x in runs])
    body = {k: med([x["body"][k] for x in runs]) for k in r["body"]}
    rest = wall - sum(body.values())
    say(f"   `local-rag index email` of {items:,} messages ({chunks:,} chunks, "
        f"{len(r['summary']['run_ids'])} Dagster run(s), {r['materialized']:,} materialisations): "
        f"{wall:.1f} s wall, peak RSS {med([x['rss'] for x in runs]):.0f} MB")
    note("a fresh process into an empty LOCAL_RAG_HOME: start-up, scan, partitions, the range run(s), model load, "
         "load/parse/chunk/embed/write every message")
    say(f"   embed-only of the same {chunks:,} chunk texts, fresh process: {e_wall:.1f} s wall "
        f"({e_inner:.1f} s model load + embedding), peak RSS {med([x['e_rss'] for x in runs]):.0f} MB")
    say(f"   pipeline / embed-only = {wall / e_wall:.2f}x (both whole processes); "
        f"{wall / e_inner:.2f}x against model load + embedding alone (bench/pipeline.py's definition)")
    say(f"   inside the asset: parse {body['seconds_parsing']:.1f} s, embed {body['seconds_embedding']:.1f} s, "
        f"write {body['seconds_writing']:.1f} s; everything else {rest:.1f} s = {1000 * rest / max(items, 1):.1f} ms "
        f"per message")
    note("'everything else' = process start and imports, scan, adding partitions, Dagster run and per-partition "
         "event bookkeeping, loading messages from the store (an upper bound of the bookkeeping per item)")
    return {"items": items, "chunks": chunks, "wall": wall, "e_wall": e_wall, "e_inner": e_inner,
            "rest_per_item": rest / max(items, 1), "body": body, "home": r["home"],
            "embed_per_chunk": med([x["embed"] for x in runs]) / max(chunks, 1)}


# -- 4. materialisations and the UI --------------------------------------------------------------------------


def fake_range_run(res: dict, n: int) -> dict:
    """A range run of the collection's index job over the first n keys, with a fast fake embedder."""
    from fakes import HashEmbedder

    from rag_pipelines.config import load_collections
    from rag_pipelines.indexing.runs import _execute
    from rag_pipelines.wiring import resources
    from rag_pipelines.wiring.definitions import build_definitions
    from rag_pipelines.wiring.sensors import range_tags
    from rag_search.config import load_settings

    paths, instance, keys = res["paths"], res["instance"], res["keys"]
    settings = load_settings(paths.config).embedder
    resources._open[("embedder", settings.model_dump_json(), paths.ollama_host)] = HashEmbedder()
    defs, built = build_definitions(load_collections(paths))
    job = defs.resolve_job_def(built[COLLECTION].index_job.name)
    ordered = instance.get_dynamic_partitions(built[COLLECTION].partitions.name)
    first, last = ordered[0], ordered[min(n, len(ordered)) - 1]
    t0 = time.perf_counter()
    _execute(job, instance, tags={"local_rag/trigger": "bench", **range_tags(first, last)})
    wall = time.perf_counter() - t0
    body, n_mat = asset_body_seconds(paths.dagster_home)
    per_item = (wall - body["seconds_embedding"]) / n
    say(f"   range run over {n:,} of {len(keys):,} partitions with the fake embedder: {wall:.1f} s "
        f"({n_mat:,} materialisations; asset body: parse {body['seconds_parsing']:.1f} s, fake embed "
        f"{body['seconds_embedding']:.1f} s, write {body['seconds_writing']:.1f} s)")
    note(f"everything but embedding = {1000 * per_item:.1f} ms per message with {len(keys):,} partitions in the instance "
         f"(of which Dagster: {1000 * (wall - sum(body.values())) / n:.1f} ms outside the asset body)")
    return {"wall": wall, "per_item": per_item, "dagster_per_item": (wall - sum(body.values())) / n}


PARTITION_HEALTH = """
query PartitionHealthQuery($assetKey: AssetKeyInput!) {
  assetNodeOrError(assetKey: $assetKey) {
    ... on AssetNode {
      id
      partitionKeysByDimension { name type partitionKeys }
      assetPartitionStatuses {
        ... on TimePartitionStatuses { ranges { status startTime endTime startKey endKey } }
        ... on DefaultPartitionStatuses { materializedPartitions materializingPartitions failedPartitions }
        ... on MultiPartitionStatuses {
          primaryDimensionName
          ranges {
            primaryDimStartKey primaryDimEndKey primaryDimStartTime primaryDimEndTime
            secondaryDim {
              ... on TimePartitionStatuses { ranges { status startTime endTime startKey endKey } }
              ... on DefaultPartitionStatuses { materializedPartitions materializingPartitions failedPartitions }
            }
          }
        }
      }
    }
  }
}"""

ASSET_GRAPH_LIVE = """
query AssetGraphLiveQuery($assetKeys: [AssetKeyInput!]!) {
  assetNodes(assetKeys: $assetKeys, loadMaterializations: true) {
    id opNames repository { id } assetKey { path }
    assetMaterializations(limit: 1) { timestamp runId stepKey }
    assetObservations(limit: 1) { timestamp runId stepKey }
    assetChecksOrError { ... on AssetChecks { checks {
      name canExecuteIndividually
      executionForLatestMaterialization { id runId status timestamp stepKey evaluation { severity } }
    } } }
    partitionStats { numMaterialized numMaterializing numPartitions numFailed }
  }
  assetsLatestInfo(assetKeys: $assetKeys) {
    id assetKey { path } unstartedRunIds inProgressRunIds latestRun { id status startTime endTime }
  }
}"""

ASSET_VIEW_DEFINITION = """
query AssetViewDefinitionQuery($assetKey: AssetKeyInput!) {
  assetOrError(assetKey: $assetKey) {
    ... on Asset {
      id key { path } hasDefinitionOrRecord
      assetMaterializations(limit: 1) { timestamp runId }
      definition {
        id groupName isExecutable opVersion
        partitionDefinition { description dimensionTypes { type dynamicPartitionsDefinitionName } }
        partitionKeysByDimension { name }
        backfillPolicy { description }
        repository { id name location { id name } }
      }
    }
  }
}"""

PARTITION_DETAIL = """
query AssetPartitionDetailQuery($assetKey: AssetKeyInput!, $partitionKey: String!) {
  assetOrError(assetKey: $assetKey) {
    ... on Asset {
      id
      definition { id opNames latestRunForPartition(partition: $partitionKey) { id status endTime } }
      assetEventHistory(partitions: [$partitionKey], limit: 1000,
                        eventTypeSelectors: [MATERIALIZATION, OBSERVATION, FAILED_TO_MATERIALIZE]) {
        results {
          ... on MaterializationEvent { runId timestamp partition metadataEntries { label } }
          ... on FailedToMaterializeEvent { runId timestamp partition }
        }
      }
    }
  }
}"""

WORKSPACE = """{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus
  locationOrLoadError { __typename ... on PythonError { message } } } } } }"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def graphql(port: int, query: str, variables: dict | None = None, timeout: float = 600) -> tuple[float, float, int, dict]:
    """(seconds to the first byte of the response, total seconds, bytes, parsed body)."""
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    t0 = time.perf_counter()
    conn.request("POST", "/graphql", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    ttfb = time.perf_counter() - t0
    data = resp.read()
    total = time.perf_counter() - t0
    conn.close()
    parsed = json.loads(data)
    if parsed.get("errors"):
        raise RuntimeError(f"GraphQL errors: {str(parsed['errors'])[:500]}")
    return ttfb, total, len(data), parsed


class Webserver:
    def __init__(self, home: Path, log: Path):
        self.home, self.log, self.port = home, log, free_port()
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "Webserver":
        env = home_env(self.home)
        cmd = [str(BIN / "dagster-webserver"), "-w", str(self.home / "dagster" / "workspace.yaml"),
               "-h", "127.0.0.1", "-p", str(self.port)]
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=open(self.log, "w"), stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.perf_counter() + 300
        while time.perf_counter() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"dagster-webserver exited: {self.log.read_text()[-2000:]}")
            try:
                *_, ws = graphql(self.port, WORKSPACE, timeout=10)
                entries = ws["data"]["workspaceOrError"]["locationEntries"]
                if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                    kinds = {e["locationOrLoadError"]["__typename"] for e in entries}
                    if kinds != {"RepositoryLocation"}:
                        raise SystemExit(f"code location failed to load: {entries}")
                    self.ready = time.perf_counter() - self.t0
                    return self
            except (OSError, http.client.HTTPException, json.JSONDecodeError, KeyError, TypeError):
                pass
            time.sleep(0.5)
        raise SystemExit("dagster-webserver did not come up in 300 s")

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # its own process group: the webserver and its code server
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


def time_queries(port: int, runs: int, partition_key: str) -> dict:
    key = {"path": ASSET_PATH}
    queries = [
        ("PartitionHealthQuery (all keys + statuses)", PARTITION_HEALTH, {"assetKey": key}),
        ("AssetGraphLiveQuery (partitionStats, latest run)", ASSET_GRAPH_LIVE, {"assetKeys": [key]}),
        ("AssetViewDefinitionQuery (trimmed)", ASSET_VIEW_DEFINITION, {"assetKey": key}),
        ("AssetPartitionDetailQuery (one key, trimmed)", PARTITION_DETAIL, {"assetKey": key,
                                                                            "partitionKey": partition_key}),
    ]
    out = {}
    for label, q, v in queries:
        first = graphql(port, q, v)
        rest = [graphql(port, q, v) for _ in range(runs)]
        out[label] = {"first": first[:3], "ttfb": [r[0] for r in rest], "total": [r[1] for r in rest],
                      "bytes": rest[-1][2], "data": rest[-1][3]}
    return out


def print_queries(q: dict) -> None:
    for label, r in q.items():
        f_ttfb, f_total, _ = r["first"]
        say(f"   {label}: first byte {med(r['ttfb']) * 1000:.0f} ms, total {med(r['total']) * 1000:.0f} ms "
            f"(max {max(r['total']) * 1000:.0f} ms), {mb(r['bytes'])}; first call after start "
            f"{f_total * 1000:.0f} ms")


def screenshot(port: int, png: Path, work: Path) -> float | None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        return None
    profile = Path(tempfile.mkdtemp(prefix="chromium-", dir=work))
    url = f"http://127.0.0.1:{port}/assets/{'/'.join(ASSET_PATH)}?view=partitions"
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
           "--no-default-browser-check", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", "--disable-extensions", "--disable-default-apps", f"--user-data-dir={profile}",
           "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1", f"--screenshot={png}",
           "--window-size=1400,900", "--virtual-time-budget=20000", url]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    took = time.perf_counter() - t0
    shutil.rmtree(profile, ignore_errors=True)
    if not png.exists():
        say(f"   chromium made no screenshot ({proc.returncode}): {proc.stderr[-500:]}")
        return None
    return took


def section_ui(home: Path, work: Path, label: str, runs: int, partition_key: str) -> dict:
    png = OUT / f"email_partitions_{label}.png"
    png.unlink(missing_ok=True)
    with Webserver(home, work / f"webserver-{label}.log") as ws:
        say(f"   dagster-webserver on 127.0.0.1:{ws.port}: code location loaded {ws.ready:.1f} s after start")
        graphql(ws.port, "mutation SetNuxSeen { setNuxSeen }")  # what the first-visit dialog's Skip does
        q = time_queries(ws.port, runs, partition_key)
        print_queries(q)
        stats = next(iter(q.values()))["data"]["data"]["assetNodeOrError"]["assetPartitionStatuses"]
        live = q["AssetGraphLiveQuery (partitionStats, latest run)"]["data"]["data"]["assetNodes"][0]["partitionStats"]
        say(f"   partitionStats: {live['numPartitions']:,} partitions, {live['numMaterialized']:,} materialised, "
            f"{live['numFailed']:,} failed ({len(stats['materializedPartitions']):,} keys listed as materialised)")
        shots = []
        for _ in range(2):  # the first load also warms the webserver's caches and the browser's disk cache is fresh
            took = screenshot(ws.port, png, work)
            if took is None:
                break
            shots.append(took)
        if shots:
            say(f"   headless Chromium screenshot of /assets/{'/'.join(ASSET_PATH)}?view=partitions: "
                f"{', '.join(f'{t:.1f} s' for t in shots)} (fresh profile each; virtual-time budget 20 s; process "
                f"start to PNG; the first-visit dialog dismissed via setNuxSeen) "
                f"-> {png.relative_to(REPO)}")
        else:
            say("   (no headless Chromium here: no screenshot)")
    return {"queries": q, "shots": shots}


# -- main ------------------------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=150_000, help="MailItems rows of the big store")
    ap.add_argument("--index-messages", type=int, default=2000, help="MailItems rows of the store indexed in 3")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ui-materialized", type=int, default=5000, help="keys materialised for the UI section")
    ap.add_argument("--keep", action="store_true", help="keep the temporary homes (printed)")
    ap.add_argument("--embed-only", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.embed_only:
        return embed_only_main(args.embed_only)

    import rag_search  # noqa: F401  (telemetry off before Dagster loads)

    OUT.mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="email_scale_"))
    t_all = time.perf_counter()
    say(f"email_scale: --messages {args.messages} --index-messages {args.index_messages} --repeats {args.repeats} "
        f"(work dir {work})")

    say("\n1. Generated eM Client stores")
    from rag_pipelines.sources.emclient import EmClientOptions, EmClientSource

    stores = {}
    for n in (args.messages, args.index_messages):
        stores[n], info = section_store(n)
        rss0 = rss_mb()
        src = EmClientSource(EmClientOptions(type="email", path=stores[n]))
        print_store(stores[n], info, len(src.scan().items))
        if n == args.messages:
            say(f"   this process's RSS: {rss0:.0f} MB before scanning it, {rss_mb():.0f} MB after (a source keeps "
                "its last scan's item map for loads; the sensor's code server holds one per email source)")
        del src
    big, small = stores[args.messages], stores[args.index_messages]

    say(f"\n2. No-op rescan at {args.messages:,} messages (medians of {args.repeats})")
    res = section_rescan(big, work / "big-home", args.repeats)

    say(f"\n3. First index of {args.index_messages:,} messages: Dagster pipeline vs embed-only (medians of "
        f"{args.repeats})")
    first = section_first_index(small, work, args.repeats)
    n_big = len(res["keys"])
    chunks_per_item = first["chunks"] / max(first["items"], 1)
    say(f"   projected to {n_big:,} messages: non-embedding work {first['rest_per_item'] * n_big / 60:.0f} min "
        f"(at {1000 * first['rest_per_item']:.1f} ms per message), embedding ~{chunks_per_item * n_big:,.0f} chunks x "
        f"{first['embed_per_chunk'] * 1000:.0f} ms = {chunks_per_item * n_big * first['embed_per_chunk'] / 3600:.1f} h")
    note("linear extrapolation of this run's figures; section 4 measures the non-embedding cost per message "
         f"again with {n_big:,} partitions in the instance")

    say(f"\n4. The Dagster UI with {n_big:,} partitions")
    fake = fake_range_run(res, min(args.ui_materialized, n_big))
    res["instance"].dispose()
    say(f"   projected non-embedding work of a first index of {n_big:,} messages at that rate: "
        f"{fake['per_item'] * n_big / 60:.0f} min")
    runs = max(3, args.repeats)
    big_ui = section_ui(work / "big-home", work, f"{n_big // 1000}k", runs, res["keys"][0])
    say(f"   baseline: the section-3 home ({first['items']:,} partitions, all materialised)")
    import dagster as dg

    inst = dg.DagsterInstance.from_config(str(first["home"] / "dagster"))
    from rag_pipelines.wiring.assets import partitions_name

    small_keys = inst.get_dynamic_partitions(partitions_name(COLLECTION))
    inst.dispose()
    small_ui = section_ui(first["home"], work, "baseline", runs, small_keys[0])

    health = "PartitionHealthQuery (all keys + statuses)"
    say("\nSummary")
    say(f"   no-change sensor tick at {n_big:,} items: {res['sensor']:.2f} s (plan_sync {res['plan']:.2f} s) "
        f"of a {res['cfg'].sensor_interval_seconds} s interval")
    say(f"   partitions page data (PartitionHealthQuery): {med(big_ui['queries'][health]['total']):.2f} s and "
        f"{mb(big_ui['queries'][health]['bytes'])} at {n_big:,} partitions vs "
        f"{med(small_ui['queries'][health]['total']):.2f} s / {mb(small_ui['queries'][health]['bytes'])} at "
        f"{first['items']:,}")
    if big_ui["shots"]:
        say(f"   partitions page in headless Chromium: {min(big_ui['shots']):.1f} s at {n_big:,} vs "
            f"{min(small_ui['shots'] or [float('nan')]):.1f} s at {first['items']:,} partitions")
    say(f"   first index: pipeline / embed-only {first['wall'] / first['e_wall']:.2f}x; non-embedding work "
        f"{1000 * fake['per_item']:.0f} ms per message at {n_big:,} partitions")
    say(f"   total bench time {(time.perf_counter() - t_all) / 60:.1f} min")
    if args.keep:
        say(f"   kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
