"""iMessage at 150k messages: conversation windows vs one partition per message (no-op rescan, partitions, first index).

    python bench/imessage_scale.py [--messages 150000] [--sample 2000] [--repeats 3] [--index-repeats 1]

1. Generates (once; cached under bench/out/) a chat.db of `--messages` rows (bench/imessage_gen.py) and prints
   its shape.
2. No-op rescan at that size, for the two partition units: conversation windows (the default: a 4 h silence or
   1,500 characters / 50 messages close a window) and one message per partition (the same source with
   window_messages: 1). For each: the source's scan(), plan_sync() against an index that already knows every
   item (a bench shortcut: rag.db's items rows written by SQL from the scan), and the Dagster side
   (add_dynamic_partitions of every key into a fresh SQLite instance, get_dynamic_partitions).
3. First index of a sample: the big database's conversations picked at random until `--sample` message rows
   (so windows are as dense as at full size), `local-rag index imessage` in a subprocess into a fresh
   LOCAL_RAG_HOME for both units, then the same chunk texts embedded by the builtin embedder in a fresh
   process (bench/email_scale.py --embed-only). Then one new message and `local-rag index imessage` again.

Medians over repeats unless said otherwise.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from email_scale import BIN, OUT, fmt_times, home_env, med, note, run_measured, say, timed  # noqa: E402

COLLECTION = "imessage"
UNITS = {"window": {}, "message": {"window_messages": 1}}


def write_config(home: Path, db: Path, options: dict) -> None:
    import yaml

    home.mkdir(parents=True, exist_ok=True)
    source = {"type": "imessage", "path": str(db), "timezone": "UTC", **options}
    (home / "config.yaml").write_text(yaml.safe_dump({"collections": {COLLECTION: {"kind": "system",
                                                                                   "sources": [source]}}}))


# -- 2. no-op rescan -----------------------------------------------------------------------------------------


def section_rescan(db: Path, work: Path, unit: str, repeats: int) -> dict:
    import os

    import dagster as dg

    from rag_pipelines.config import load_collections
    from rag_pipelines.indexing.scan import open_sources
    from rag_pipelines.indexing.plan import plan_sync
    from rag_pipelines.wiring.assets import add_partitions, partitions_name
    from rag_pipelines.wiring.instance import DAGSTER_YAML
    from rag_pipelines.wiring.resources import RagResource
    from rag_search.config import Paths
    from rag_search.store import Store, writes

    home = work / f"rescan-{unit}"
    write_config(home, db, UNITS[unit])
    os.environ.update(home_env(home))
    paths = Paths.from_env()
    cfg = load_collections(paths)[COLLECTION]
    [src] = open_sources(cfg)

    def full_scan():
        src._signature = None  # as after any write by Messages (a read receipt is one): chat.db is read again
        return src.scan()

    t0 = time.perf_counter()
    scan = full_scan()
    first = time.perf_counter() - t0
    times, _ = timed(full_scan, repeats)
    same, _ = timed(src.scan, repeats)
    keys = sorted(scan.items) + sorted(scan.problems)
    say(f"   [{unit}] scan(): {len(scan.items):,} items (+{len(scan.problems)} undecodable) in {fmt_times(times)}; "
        f"first call {first:.2f} s; with chat.db and its -wal unchanged since the last scan {fmt_times(same, 'ms')}")

    store = Store.open(paths.db)
    coll = writes.ensure_collection(store, COLLECTION, "system")
    with store.transaction() as conn:
        conn.executemany("INSERT INTO items(collection_id, source_type, key, uri, sha256, status, stamp, source) "
                         "VALUES (?, 'chat', ?, ?, 'x', 'indexed', ?, 'imessage')",
                         [(coll, k, s.uri, s.value) for k, s in scan.items.items()])
    store.close()
    rag = RagResource().store()

    def plan(reread: bool = True):
        if reread:
            src._signature = None
        p = plan_sync(rag, cfg, sources=[src])
        assert p.empty, f"a no-op rescan found changes: {len(p.new)} new, {len(p.changed)} changed"

    plan()
    p_times, _ = timed(plan, repeats)
    p_same, _ = timed(lambda: plan(False), repeats)
    say(f"   [{unit}] plan_sync() with every item known, chat.db read again: {fmt_times(p_times)} "
        f"({100 * med(p_times) / cfg.sensor_interval_seconds:.1f}% of the {cfg.sensor_interval_seconds} s interval); "
        f"files unchanged: {fmt_times(p_same, 'ms')}")
    add_t, get_t = [], []
    for _ in range(repeats):
        tmp = Path(tempfile.mkdtemp(prefix="dg_", dir=home))
        (tmp / "dagster.yaml").write_text(DAGSTER_YAML)
        inst = dg.DagsterInstance.from_config(str(tmp))
        t0 = time.perf_counter()
        add_partitions(inst, partitions_name(COLLECTION), keys)
        add_t.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        assert len(inst.get_dynamic_partitions(partitions_name(COLLECTION))) == len(keys)
        get_t.append(time.perf_counter() - t0)
        inst.dispose()
        shutil.rmtree(tmp, ignore_errors=True)
    say(f"   [{unit}] Dagster: add_partitions() of {len(keys):,} keys {fmt_times(add_t)}; "
        f"get_dynamic_partitions() {fmt_times(get_t, 'ms')}")
    return {"items": len(scan.items), "scan": med(times), "plan": med(p_times), "plan_same": med(p_same),
            "add": med(add_t)}


# -- 3. first index ------------------------------------------------------------------------------------------


def sample_db(big: Path, n: int, work: Path) -> tuple[Path, int]:
    """A copy of the big database keeping whole conversations, picked at random, until n message rows."""
    import random

    out = work / "sample" / "chat.db"
    out.parent.mkdir(parents=True)
    src, dst = sqlite3.connect(f"file:{big}?mode=ro", uri=True), sqlite3.connect(out)
    src.backup(dst)
    src.close()
    counts = dst.execute("SELECT chat_id, count(*) FROM chat_message_join GROUP BY chat_id").fetchall()
    random.Random(7).shuffle(counts)
    keep, total = [], 0
    for chat, count in counts:
        if total >= n:
            break
        if total + count <= n * 1.1:
            keep.append(chat)
            total += count
    dst.execute(f"DELETE FROM chat_message_join WHERE chat_id NOT IN ({','.join(map(str, keep))})")
    dst.commit()
    dst.execute("VACUUM")
    dst.close()
    return out, total


def asset_seconds(dagster_home: Path) -> tuple[dict, int]:
    """The asset bodies' own timings (each run logs `imessage: {stats}`), and the materialisation count."""
    import ast

    import dagster as dg

    instance = dg.DagsterInstance.from_config(str(dagster_home))
    totals = {"seconds_parsing": 0.0, "seconds_embedding": 0.0, "seconds_writing": 0.0}
    for run in instance.get_runs():
        for entry in instance.all_logs(run.run_id):
            text = entry.user_message or ""
            if text.startswith(f"{COLLECTION}: {{"):
                stats = ast.literal_eval(text[len(COLLECTION) + 2 :])
                for k in totals:
                    totals[k] += float(stats.get(k, 0.0))
    records, cursor = 0, None
    while True:
        page = instance.fetch_materializations(dg.AssetKey([COLLECTION, "items"]), limit=10_000, cursor=cursor)
        records += len(page.records)
        if not page.has_more:
            break
        cursor = page.cursor
    instance.dispose()
    return totals, records


def section_first_index(db: Path, messages: int, work: Path, unit: str, repeats: int) -> dict:
    exe, runs = str(BIN / "local-rag"), []
    for i in range(repeats):
        home = work / f"index-{unit}-{i}"
        write_config(home, db, UNITS[unit])
        env = home_env(home)
        wall, rss, out = run_measured([exe, "index", COLLECTION, "--json"], env, work / f"index-{unit}-{i}.log")
        summary = json.loads(out)[0]
        body, n_mat = asset_seconds(home / "dagster")
        e_wall, _, e_out = run_measured([sys.executable, str(HERE / "email_scale.py"), "--embed-only",
                                         str(home / "rag.db")], env, work / f"embed-{unit}-{i}.log")
        runs.append({"home": home, "wall": wall, "rss": rss, "summary": summary, "body": body, "mat": n_mat,
                     "e_wall": e_wall, **json.loads(e_out)})
    r = runs[-1]
    items, chunks = r["summary"]["outcomes"].get("indexed", 0), r["chunks"]
    wall, e_wall = med([x["wall"] for x in runs]), med([x["e_wall"] for x in runs])
    e_inner = med([x["embed"] + x["model_load"] for x in runs])
    body = {k: med([x["body"][k] for x in runs]) for k in r["body"]}
    rest = wall - sum(body.values())
    say(f"   [{unit}] `local-rag index imessage`: {items:,} items ({chunks:,} chunks, {len(r['summary']['run_ids'])} "
        f"run(s), {r['mat']:,} materialisations) in {wall:.1f} s, peak RSS {med([x['rss'] for x in runs]):.0f} MB")
    say(f"   [{unit}] embed-only of the same {chunks:,} chunks (fresh process): {e_wall:.1f} s "
        f"({e_inner:.1f} s model load + embedding)")
    say(f"   [{unit}] pipeline / embed-only = {wall / e_wall:.2f}x whole processes, {wall / e_inner:.2f}x against "
        f"model load + embedding; asset body: parse {body['seconds_parsing']:.1f} s, embed "
        f"{body['seconds_embedding']:.1f} s, write {body['seconds_writing']:.1f} s; everything else {rest:.1f} s = "
        f"{1000 * rest / max(messages, 1):.1f} ms per message")
    non_embed = (wall - body["seconds_embedding"]) / max(messages, 1)
    say(f"   [{unit}] everything but embedding (start-up, scan, Dagster, parse, rag.db writes): "
        f"{wall - body['seconds_embedding']:.1f} s = {1000 * non_embed:.1f} ms per message row")
    return {"items": items, "chunks": chunks, "wall": wall, "e_wall": e_wall, "e_inner": e_inner,
            "non_embed_per_msg": non_embed, "home": r["home"]}


def section_new_message(db: Path, home: Path, work: Path, repeats: int) -> None:
    conn = sqlite3.connect(db)
    chat, last = conn.execute("SELECT j.chat_id, max(m.date) FROM chat_message_join j JOIN message m "
                              "ON m.ROWID = j.message_id GROUP BY j.chat_id ORDER BY count(*) DESC LIMIT 1").fetchone()
    times = []
    for i in range(repeats):
        rowid = conn.execute("SELECT max(ROWID) + 1 FROM message").fetchone()[0]
        conn.execute("INSERT INTO message (ROWID, guid, text, handle_id, date, is_from_me) VALUES (?, ?, ?, 0, ?, 1)",
                     (rowid, f"NEW-{rowid}", "One more message about the lake hotel", last + (i + 1) * 60_000_000_000))
        conn.execute("INSERT INTO chat_message_join (chat_id, message_id) VALUES (?, ?)", (chat, rowid))
        conn.commit()
        wall, _, out = run_measured([str(BIN / "local-rag"), "index", COLLECTION, "--json"], home_env(home),
                                    work / f"new-{i}.log")
        outcomes = json.loads(out)[0]["outcomes"]
        assert outcomes.get("indexed") == 1, outcomes
        times.append(wall)
    conn.close()
    say(f"   one new message, then `local-rag index imessage`: {fmt_times(times)} wall (1 window re-indexed: "
        "the conversation's last)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=150_000)
    ap.add_argument("--sample", type=int, default=2000, help="message rows of the first-index sample")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--index-repeats", type=int, default=1)
    ap.add_argument("--skip-rescan", action="store_true", help="sections 1 and 3 only")
    args = ap.parse_args()
    import rag_search  # noqa: F401  (telemetry off before Dagster loads)
    import imessage_gen

    work = Path(tempfile.mkdtemp(prefix="imessage_scale_"))
    say(f"imessage_scale: --messages {args.messages} --sample {args.sample} --repeats {args.repeats} "
        f"--index-repeats {args.index_repeats} (work dir {work})")
    say("\n1. Generated chat.db")
    folder = OUT / f"imessage-{args.messages}"
    info = imessage_gen.ensure(folder, args.messages, log=lambda m: say(f"   {m}"))
    say(f"   {folder / 'chat.db'}: {info['rows']:,} message rows in {info['chats']} chats ({info['handles']} handles), "
        f"{info['bytes'] / 1e6:.0f} MB; rows by kind: {info['kinds']}")

    say(f"\n2. No-op rescan at {args.messages:,} messages (medians of {args.repeats})")
    rescan = {unit: section_rescan(folder / "chat.db", work, unit, args.repeats) for unit in UNITS} \
        if not args.skip_rescan else {}

    db, rows = sample_db(folder / "chat.db", args.sample, work)
    say(f"\n3. First index of a {rows:,}-row sample (whole conversations of the big database), medians of "
        f"{args.index_repeats}")
    first = {unit: section_first_index(db, rows, work, unit, args.index_repeats) for unit in UNITS}
    section_new_message(db, first["window"]["home"], work, args.repeats)

    fw, fm = first["window"], first["message"]
    say("\nSummary")
    say(f"   first index of {rows:,} rows: windows {fw['wall']:.0f} s ({fw['wall'] / fw['e_wall']:.2f}x embed-only), "
        f"per message {fm['wall']:.0f} s ({fm['wall'] / fm['e_wall']:.2f}x embed-only)")
    if not rescan:
        return
    w, m = rescan["window"], rescan["message"]
    say(f"   partitions at {args.messages:,} messages: {w['items']:,} windows vs {m['items']:,} messages "
        f"({m['items'] / w['items']:.1f}x)")
    say(f"   no-op rescan (plan_sync) after a write by Messages: windows {w['plan']:.2f} s, per message "
        f"{m['plan']:.2f} s; with the files unchanged: {1000 * w['plan_same']:.0f} ms / {1000 * m['plan_same']:.0f} ms")
    for unit, f in first.items():
        n = rescan[unit]["items"]
        say(f"   projected non-embedding work of a first index at {args.messages:,} messages [{unit}]: "
            f"{f['non_embed_per_msg'] * args.messages / 60:.0f} min ({n:,} partitions)")
    note("linear extrapolation of the sample's non-embedding time per message row")


if __name__ == "__main__":
    main()
