"""Gmail Takeout at 100k messages and SuperWhisper at 3,000 recordings: scan, rescan, append and first-index costs.

    python bench/mbox_scale.py [--messages 100000] [--append 1000] [--sample 1000] [--recordings 3000] [--repeats 3]

1. Generates (once; cached under bench/out/) a Takeout `All mail Including Spam and Trash.mbox` of `--messages`
   messages: CRLF, Takeout From_ lines, X-GM-THRID and X-Gmail-Labels first, Gmail-like Received/ARC/DKIM headers,
   real prose bodies (bench/docstrings.py) with quoted replies, ~30% with an HTML alternative, ~3% with a 60 KB
   base64 attachment, ~3.5% Spam/Trash, 0.5% without a Message-ID.
2. First scan: the source's scan() with no table of contents anywhere (parses the whole file, writes the sidecar).
3. No-op rescan: scan() again in the same process (the table in memory) and as a fresh process would (from the
   sidecar); plan_sync() with every message known to rag.db (rows written by SQL from the scan: a bench shortcut);
   the collection's sensor evaluated with every message a Dagster partition.
4. Append `--append` messages: the scan that follows (bytes parsed and checked), then plan_sync(); the file is cut
   back to its generated size after each repeat.
5. First index of a `--sample`-message mbox: `local-rag index gmail --path` (a fresh process into a temp home)
   vs embedding the same chunk texts with the builtin embedder in a fresh process.
6. SuperWhisper: a generated folder of `--recordings` recordings (settled meta.json files and a tiny output.wav
   each): scan(), and plan_sync() with every recording known.

Figures are medians over `--repeats`. Only 127.0.0.1 is used.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import shutil
import sys
import tempfile
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO, OUT, BIN = HERE.parent, HERE / "out", Path(sys.executable).parent
sys.path.insert(0, str(HERE))

from email_scale import fmt_times, home_env, mb, med, note, rss_mb, run_measured, say, timed  # noqa: E402

GEN_VERSION = 1
START = datetime(2014, 1, 1, tzinfo=timezone.utc).timestamp()
SPAN = 12 * 365 * 86400
DAYS, MONTHS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"), ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul",
                                                                    "Aug", "Sep", "Oct", "Nov", "Dec")
NAMES = ["Ann Lee", "Bob Stone", "Carol Díaz", "Jürgen Müller", "Priya Patel", "Élodie Dubois", "Chen Wei",
         "Akira Tanaka", "Fatima Okafor", "Søren Berg", "Mateo Silva", "Zoë Walker"]
DOMAINS = ["example.com", "contoso.com", "beispiel.de", "exemple.fr", "fabrikam.io", "lists.example.org"]
LABELS = ["Work/Projects", "Travel", '"Receipts, 2025"', "Family", "Newsletters", "Work/Hiring"]


# -- 1. generated data ---------------------------------------------------------------------------------------


def _date(ts: float) -> tuple[str, str]:
    d = datetime.fromtimestamp(ts, timezone.utc)
    day, mon = DAYS[d.weekday()], MONTHS[d.month - 1]
    return (f"{day}, {d.day:02d} {mon} {d.year} {d:%H:%M:%S} +0000", f"{day} {mon} {d.day:02d} {d:%H:%M:%S} +0000 {d.year}")


def message(i: int, total: int, rnd: random.Random, corpus: list[str], attachment: str) -> bytes:
    ts = START + SPAN * i / total + rnd.random() * 600
    rfc, envelope = _date(ts)
    name, domain = rnd.choice(NAMES), rnd.choice(DOMAINS)
    addr = name.split()[0].lower().replace("ü", "ue").replace("é", "e").replace("ø", "o").replace("ë", "e") + "@" + domain
    roll = rnd.random()
    labels = ["Spam"] if roll < 0.02 else ["Trash", "Opened"] if roll < 0.035 else ["Chat"] if roll < 0.045 else \
        ["Sent"] if roll < 0.2 else ["Inbox", "Opened"] + (["Important"] if rnd.random() < 0.2 else []) + \
        ([rnd.choice(LABELS)] if rnd.random() < 0.3 else []) + [f"Category {rnd.choice(['Updates', 'Forums', 'Social'])}"]
    sig = base64.b64encode(rnd.randbytes(180)).decode()
    head = [f"From {1600000000000000000 + i * 7919}@xxx {envelope}", f"X-GM-THRID: {1600000000000000000 + i // 3}",
            f"X-Gmail-Labels: {','.join(labels)}", "Delivered-To: me@gmail.com",
            f"Received: by 2002:a05:6{i % 1000:03d}:1:b0:{i % 97} with SMTP id x{i};\r\n        {rfc}",
            f"X-Google-Smtp-Source: AGHT+I{sig[:60]}",
            f"ARC-Seal: i=1; a=rsa-sha256; t={int(ts)}; cv=none; d=google.com; s=arc-20160816;\r\n        b={sig[:120]}",
            f"Return-Path: <{addr}>",
            f"DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d={domain}; s=s1; t={int(ts)};\r\n"
            f"        h=from:to:subject:date:message-id; bh={sig[120:164]}=;\r\n        b={sig[:200]}",
            f"From: {name} <{addr}>", "To: Me Myself <me@gmail.com>", f"Subject: {rnd.choice(corpus)[:60]}",
            f"Date: {rfc}"]
    if rnd.random() > 0.005:
        head.append(f"Message-ID: <{i:07d}.{rnd.getrandbits(40):x}@{domain}>")
    paragraphs = rnd.sample(corpus, rnd.randint(1, 4))
    text = "Hi,\r\n\r\n" + "\r\n\r\n".join(paragraphs) + f"\r\n\r\nBest,\r\n{name.split()[0]}\r\n"
    if rnd.random() < 0.15:
        text += f"\r\nOn {rfc}, Me Myself <me@gmail.com> wrote:\r\n> " + rnd.choice(corpus)[:300] + "\r\n"
    if rnd.random() < 0.01:
        text += "\r\nFrom the team: thanks again.\r\n"  # a bare 'From ' body line after a blank line
    kind = rnd.random()
    if kind < 0.03:
        b = f"MIX{i}"
        body = (f"--{b}\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n{text}\r\n--{b}\r\nContent-Type: application/pdf; "
                f'name="report-{i}.pdf"\r\nContent-Disposition: attachment; filename="report-{i}.pdf"\r\n'
                f"Content-Transfer-Encoding: base64\r\n\r\n{attachment}--{b}--\r\n")
        head += ["MIME-Version: 1.0", f'Content-Type: multipart/mixed; boundary="{b}"']
    elif kind < 0.33:
        b = f"ALT{i}"
        html = "".join(f"<p>{p}</p>" for p in paragraphs)
        body = (f"--{b}\r\nContent-Type: text/plain; charset=UTF-8\r\n\r\n{text}\r\n--{b}\r\nContent-Type: text/html; "
                f"charset=UTF-8\r\n\r\n<div dir=\"ltr\">{html}</div>\r\n--{b}--\r\n")
        head += ["MIME-Version: 1.0", f'Content-Type: multipart/alternative; boundary="{b}"']
    else:
        body = text
        head += ["Content-Type: text/plain; charset=UTF-8"]
    return ("\r\n".join(head) + "\r\n\r\n" + body + "\r\n").encode("utf-8")


def generate(path: Path, first: int, count: int, total: int) -> int:
    from docstrings import docstrings

    rnd, corpus = random.Random(first * 31 + 7), docstrings(3000)
    attachment = base64.encodebytes(random.Random(1).randbytes(60_000)).decode().replace("\n", "\r\n")
    with open(path, "ab") as fh:
        for i in range(first, first + count):
            fh.write(message(i, total, rnd, corpus, attachment))
    return path.stat().st_size


def ensure_mbox(n: int) -> Path:
    folder = OUT / f"takeout-{n}"
    path, info = folder / "All mail Including Spam and Trash.mbox", folder / "generated.json"
    if info.exists() and json.loads(info.read_text()) == {"version": GEN_VERSION, "size": path.stat().st_size}:
        return path
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    t0 = time.perf_counter()
    size = generate(path, 0, n, n)
    say(f"   generated {n:,} messages ({mb(size)}) in {time.perf_counter() - t0:.0f} s")
    info.write_text(json.dumps({"version": GEN_VERSION, "size": size}))
    return path


def ensure_recordings(n: int) -> Path:
    root = OUT / f"superwhisper-{n}" / "recordings"
    if root.is_dir() and len(os.listdir(root)) == n:
        return root
    shutil.rmtree(root.parent, ignore_errors=True)
    root.mkdir(parents=True)
    from docstrings import docstrings

    rnd, corpus, old = random.Random(3), docstrings(2000), time.time() - 2 * 86400
    for i in range(n):
        folder = root / str(1700000000 + i * 5400)
        folder.mkdir()
        raw = " ".join(rnd.sample(corpus, rnd.randint(1, 3)))
        meta = {"datetime": datetime.fromtimestamp(1700000000 + i * 5400, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S"),
                "duration": rnd.randint(2000, 600000), "rawResult": " " + raw, "result": raw, "modeName": "Default",
                "modelName": "Ultra (Cloud)", "languageSelected": "en", "appVersion": "2.9.0"}
        (folder / "meta.json").write_text(json.dumps(meta))
        (folder / "output.wav").write_bytes(b"RIFF" + bytes(40))
        os.utime(folder / "meta.json", (old, old))
    return root


# -- shared ------------------------------------------------------------------------------------------------------


def make_home(home: Path, collection: str, source: dict):
    """A local-rag home with one collection; LOCAL_RAG_HOME/DAGSTER_HOME point at it. (paths, cfg)."""
    import yaml

    from rag_pipelines.config import load_collections
    from rag_search.config import Paths

    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump({"collections": {collection: {"sources": [source]}}}))
    os.environ.update(home_env(home))
    paths = Paths.from_env()
    return paths, load_collections(paths)[collection]


def know_everything(paths, collection: str, scan, source_type: str) -> None:
    """rag.db's items rows for every scanned item, written by SQL (a bench shortcut, not an index)."""
    from rag_search.store import Store, writes

    db = Store.open(paths.db)
    coll = writes.ensure_collection(db, collection, "system")
    with db.transaction() as conn:
        conn.execute("DELETE FROM items WHERE collection_id = ?", (coll,))
        conn.executemany("INSERT INTO items(collection_id, source_type, key, uri, sha256, status, stamp, source) "
                         "VALUES (?, ?, ?, ?, 'x', 'indexed', ?, ?)",
                         [(coll, source_type, k, s.uri, s.value, source_type) for k, s in scan.items.items()])
    db.close()


# -- 2-4. the Takeout mbox -----------------------------------------------------------------------------------------


def section_scans(path: Path, work: Path, repeats: int, append: int) -> dict:
    from rag_pipelines.indexing.scan import open_sources
    from rag_pipelines.sources import mbox
    from rag_pipelines.indexing.plan import plan_sync
    from rag_pipelines.wiring.resources import RagResource

    paths, cfg = make_home(work / "big-home", "gmail", {"type": "gmail", "path": str(path)})
    size, sidecar = path.stat().st_size, mbox.sidecar_path()
    say(f"\n2. First scan of {mb(size)} (no table of contents in memory or in the sidecar; medians of {repeats})")
    times, rss = [], []
    for _ in range(repeats):
        mbox._TOCS.clear()
        sidecar.unlink(missing_ok=True)
        src = open_sources(cfg)[0]
        src._items = src._seen = None
        r0 = rss_mb()
        t0 = time.perf_counter()
        scan = src.scan()
        times.append(time.perf_counter() - t0)
        rss.append(rss_mb() - r0)
    upd, first_scan = src.updates[str(path)], med(times)
    keys = len(scan.items)
    say(f"   scan(): {fmt_times(times)} = {size / med(times) / 1e6:.0f} MB/s; {upd.new:,} messages found, {keys:,} "
        f"items (Spam/Trash left out); bytes parsed {mb(upd.bytes_parsed)}")
    note(f"includes writing the sidecar ({mb(sidecar.stat().st_size)}, {sidecar}); RSS grew by "
         f"{med(rss):.0f} MB (the table of contents and the item map, kept for later scans and loads)")

    say(f"\n3. No-op rescan of {keys:,} items (medians of {repeats})")
    times, _ = timed(src.scan, repeats)
    say(f"   scan() in the same process (table in memory): {fmt_times(times, 'ms')}; "
        f"{src.updates[str(path)].bytes_parsed} bytes parsed")

    def fresh():
        mbox._TOCS.clear()
        src._items = src._seen = None
        return src.scan()

    times, _ = timed(fresh, repeats)
    say(f"   scan() as a fresh process (table from the sidecar): {fmt_times(times)}; "
        f"{src.updates[str(path)].bytes_parsed} bytes parsed")
    know_everything(paths, "gmail", scan, "email")
    store = RagResource().store()

    def plan():
        p = plan_sync(store, cfg, sources=[src])
        assert p.empty, (len(p.new), len(p.changed), len(p.deleted))

    plan()
    times, _ = timed(plan, repeats)
    say(f"   plan_sync() with every item known: {fmt_times(times)} "
        f"({100 * med(times) / cfg.sensor_interval_seconds:.1f}% of the {cfg.sensor_interval_seconds} s sensor interval)")
    sensor_tick(paths, cfg, sorted(scan.items), repeats)

    say(f"\n4. {append:,} messages appended (medians of {repeats}; the file is cut back after each)")
    base_toc, extra = mbox._TOCS[str(path)], work / "append.bin"
    generate(extra, 10_000_000, append, 10_000_000 + append)
    data = extra.read_bytes()
    scans, plans, parsed, checked, new, regroup = [], [], [], [], [], []
    names = ("_items", "_stamps", "_groups", "_threads", "_tocs", "_seen", "_files")
    state = {n: getattr(src, n) for n in names}
    try:
        for _ in range(repeats):
            mbox._TOCS[str(path)] = base_toc  # the source as it was before the append (the cut changed nothing else)
            for n, v in state.items():
                setattr(src, n, {k: list(x) for k, x in v.items()} if n == "_groups" else
                        v.copy() if isinstance(v, (dict, list)) else v)
            with open(path, "ab") as fh:
                fh.write(data)
            t0 = time.perf_counter()
            src.scan()
            scans.append(time.perf_counter() - t0)
            upd = src.updates[str(path)]
            parsed.append(upd.bytes_parsed)
            checked.append(upd.bytes_checked)
            t0 = time.perf_counter()
            p = plan_sync(store, cfg, sources=[src])
            plans.append(time.perf_counter() - t0)
            new.append(len(p.new))
            t0 = time.perf_counter()
            src._group(src._tocs)
            regroup.append(time.perf_counter() - t0)
            os.truncate(path, size)
    finally:
        os.truncate(path, size)
        mbox._TOCS[str(path)] = base_toc
    say(f"   scan() after appending {mb(len(data))}: {fmt_times(scans)}; parsed {parsed[-1]:,} bytes "
        f"(appended {len(data):,}), checked {checked[-1]:,} bytes (first KB, last KB before and after)")
    say(f"   plan_sync() then: {fmt_times(plans)}; {new[-1]:,} new items (of {append:,} messages; Spam/Trash left out)")
    note(f"scan() adds the new records to the item map; regrouping all {keys + new[-1]:,} items instead (a rewritten "
         f"file, or an older thread for a known Message-ID) takes {fmt_times(regroup)}")
    return {"keys": keys, "first_scan": first_scan}


def sensor_tick(paths, cfg, keys: list[str], repeats: int) -> None:
    import dagster as dg

    from rag_pipelines.wiring.assets import add_partitions
    from rag_pipelines.wiring.definitions import build_definitions
    from rag_pipelines.wiring.instance import ensure_instance
    from rag_pipelines.wiring.resources import RagResource

    ensure_instance(paths)
    instance = dg.DagsterInstance.get()
    defs, built = build_definitions({cfg.name: cfg})
    t0 = time.perf_counter()
    add_partitions(instance, built[cfg.name].partitions.name, keys)
    say(f"   add_partitions() of {len(keys):,} keys (chunks of 10k, once): {time.perf_counter() - t0:.1f} s")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sensor = defs.get_sensor_def(f"{cfg.safe_name}_sensor")

    def tick():
        data = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, resources={"rag": RagResource()}))
        assert not data.run_requests and data.skip_message, data
        return data

    tick()
    times, data = timed(tick, repeats)
    say(f"   sensor evaluation with no changes ({len(keys):,} partitions): {fmt_times(times)} ('{data.skip_message}')")
    instance.dispose()


# -- 5. first index vs embed-only ------------------------------------------------------------------------------


def section_first_index(n: int, work: Path, repeats: int) -> None:
    sample = OUT / f"takeout-sample-{n}.mbox"
    if not sample.exists():
        generate(sample, 0, n, n)
    say(f"\n5. First index of a {n:,}-message mbox ({mb(sample.stat().st_size)}): pipeline vs embed-only "
        f"(medians of {repeats})")
    runs = []
    for i in range(repeats):
        home = work / f"index-{i}"
        env = home_env(home)
        wall, rss, out = run_measured([str(BIN / "local-rag"), "index", "gmail", "--path", str(sample), "--json"],
                                      env, work / f"index-{i}.log")
        summary = json.loads(out)[0]
        e_wall, e_rss, e_out = run_measured([sys.executable, __file__, "--embed-only", str(home / "rag.db")], env,
                                            work / f"embed-{i}.log")
        e = json.loads(e_out)
        runs.append({"wall": wall, "rss": rss, "e_wall": e_wall, "e_rss": e_rss, "summary": summary, **e})
        say(f"   repeat {i + 1}: index {wall:.1f} s ({rss:.0f} MB peak), embed-only {e_wall:.1f} s")
    items = runs[-1]["summary"]["outcomes"].get("indexed", 0)
    wall, e_wall = med([r["wall"] for r in runs]), med([r["e_wall"] for r in runs])
    e_inner = med([r["embed"] + r["model_load"] for r in runs])
    say(f"   `local-rag index gmail --path` of {items:,} messages ({runs[-1]['chunks']:,} chunks, "
        f"{len(runs[-1]['summary']['run_ids'])} Dagster run(s)): {wall:.1f} s wall, peak RSS "
        f"{med([r['rss'] for r in runs]):.0f} MB")
    say(f"   embed-only of the same chunk texts: {e_wall:.1f} s wall ({e_inner:.1f} s model load + embedding)")
    say(f"   pipeline / embed-only = {wall / e_wall:.2f}x (whole processes); {wall / e_inner:.2f}x against model load "
        f"+ embedding alone; non-embedding cost {1000 * (wall - e_inner) / max(items, 1):.0f} ms per message")


# -- 6. SuperWhisper ---------------------------------------------------------------------------------------------


def section_superwhisper(n: int, work: Path, repeats: int) -> None:
    from rag_pipelines.indexing.scan import open_sources
    from rag_pipelines.indexing.plan import plan_sync
    from rag_pipelines.wiring.resources import RagResource, close_all

    close_all()
    root = ensure_recordings(n)
    say(f"\n6. SuperWhisper: {n:,} recordings ({root}; medians of {repeats})")
    paths, cfg = make_home(work / "voice-home", "voice", {"type": "superwhisper", "path": str(root)})
    src = open_sources(cfg)[0]
    times, scan = timed(src.scan, repeats)
    say(f"   scan() (one stat of each meta.json): {fmt_times(times, 'ms')}; {len(scan.items):,} items")
    t0 = time.perf_counter()
    docs = sum(1 for ld in src.load(sorted(scan.items)) if ld.parse and ld.parse())
    say(f"   load + parse of every recording (read and classify meta.json, build the Document): "
        f"{time.perf_counter() - t0:.2f} s for {docs:,}")
    know_everything(paths, "voice", scan, "recording")
    store = RagResource().store()

    def plan():
        p = plan_sync(store, cfg, sources=[src])
        assert p.empty, (len(p.new), len(p.changed), len(p.deleted))

    plan()
    times, _ = timed(plan, repeats)
    say(f"   plan_sync() with every recording known (the no-op sensor tick's work): {fmt_times(times, 'ms')}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--append", type=int, default=1000)
    ap.add_argument("--sample", type=int, default=1000, help="messages of the mbox indexed in section 5")
    ap.add_argument("--recordings", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--index-repeats", type=int, default=2, help="repeats of section 5 (slow: real embedding)")
    ap.add_argument("--skip-index", action="store_true", help="leave out section 5")
    ap.add_argument("--embed-only", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.embed_only:
        from email_scale import embed_only_main

        return embed_only_main(args.embed_only)

    import rag_search  # noqa: F401  (telemetry off before Dagster loads)

    OUT.mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="mbox_scale_"))
    t_all = time.perf_counter()
    say(f"mbox_scale: --messages {args.messages} --append {args.append} --sample {args.sample} --recordings "
        f"{args.recordings} --repeats {args.repeats} (work dir {work})")
    say("\n1. Generated Takeout mbox")
    path = ensure_mbox(args.messages)
    say(f"   {path} ({mb(path.stat().st_size)}, {args.messages:,} messages)")
    try:
        section_scans(path, work, args.repeats, args.append)
        if not args.skip_index:
            section_first_index(args.sample, work, args.index_repeats)
        section_superwhisper(args.recordings, work, args.repeats)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    say(f"\n   total bench time {(time.perf_counter() - t_all) / 60:.1f} min")


if __name__ == "__main__":
    main()
