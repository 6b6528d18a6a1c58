"""Calendars at ~20k events: partitions per event instance, scan and no-op rescan cost, first index vs embed-only.

    python bench/calendar_scale.py [--events 20000] [--series 400] [--sample 500] [--repeats 3] [--index-repeats 2]

(`--index-repeats 0` skips section 3.)

1. Generates (once; cached under bench/out/calendar-<events>/) one calendar as a single export (`big.ics`, Europe/Berlin
   VTIMEZONE, ten years of events) and the same events one per file (`caldav/<uid>.ics`, as CalDAV caches keep them).
   `--series` of the events are recurring masters (weekly, weekday-daily, monthly, yearly; bounded and unbounded) with
   overrides and EXDATEs; the rest are single events (some all-day, some UTC), 0–8 attendees from 300 people,
   descriptions of real English prose (docstrings of installed packages) on 40% of them.
2. Per layout: the first scan (fresh source: read, parse, expand), the partition count, the no-op rescan (size+mtime
   fast path), a rescan after one event is edited, a rescan on the next day (series re-expanded); for the single file
   also icalendar's parse of the same bytes, plan_sync against an index that knows every item (rows written by SQL: a
   bench shortcut), add_dynamic_partitions of every key into a fresh Dagster instance and a real no-change sensor tick.
3. First index of a `--sample`-event calendar: `local-rag index calendar --path` in a fresh process and temp home (wall,
   peak RSS) vs the same chunk texts embedded by the builtin embedder in a fresh process.

Times are medians over `--repeats` unless said otherwise. The clock is the real one: the window is around today.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from datetime import datetime, timedelta, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT = HERE / "out"
BIN = Path(sys.executable).parent
sys.path.insert(0, str(HERE))
COLLECTION = "calendar"
GEN_VERSION = "2"

TZ = """BEGIN:VTIMEZONE\nTZID:Europe/Berlin\nBEGIN:DAYLIGHT\nTZOFFSETFROM:+0100\nTZOFFSETTO:+0200\nTZNAME:CEST
DTSTART:19700329T020000\nRRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU\nEND:DAYLIGHT\nBEGIN:STANDARD\nTZOFFSETFROM:+0200
TZOFFSETTO:+0100\nTZNAME:CET\nDTSTART:19701025T030000\nRRULE:FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU\nEND:STANDARD
END:VTIMEZONE"""
TOPICS = ("roadmap", "budget", "hiring", "incident review", "onboarding", "offsite", "release train", "security audit",
          "customer call", "design critique", "quarterly planning", "retro", "1:1", "vendor demo", "board prep",
          "migration", "on-call handover", "interview", "dentist", "school run", "yoga", "football", "dinner")
TEAMS = ("platform", "data", "mobile", "growth", "infra", "payments", "search", "design", "finance", "legal")
PLACES = ("Room Spree", "Room Havel", "Cafeteria", "Zoom", "Microsoft Teams Meeting", "Google Meet", "Lisbon office",
          "Main Street 4, Berlin", "")


def say(text: str = "") -> None:
    print(text, flush=True)


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def timed(fn, repeats: int) -> tuple[list[float], object]:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return times, out


def fmt(times: list[float]) -> str:
    if med(times) < 1:
        return f"{med(times) * 1000:.0f} ms (min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f})"
    return f"{med(times):.2f} s (min {min(times):.2f}, max {max(times):.2f})"


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


# -- 1. generated calendars ----------------------------------------------------------------------------------------


def esc(text: str) -> str:
    return text.replace("\\", "\\\\").replace(",", "\\,").replace(";", "\\;").replace("\n", "\\n")


def fold(line: str) -> str:
    raw, out = line.encode(), []
    while len(raw) > 75:
        cut = 75
        while cut > 1 and (raw[cut] & 0xC0) == 0x80:
            cut -= 1
        out.append(raw[:cut].decode())
        raw = raw[cut:]
    return "\r\n ".join(out + [raw.decode()])


def generate(n: int, series: int, prose: list[str], seed: int = 7) -> dict[str, list[str]]:
    """uid → the VEVENT blocks (lines) of that UID: singles, and masters with their overrides."""
    rng = random.Random(seed)
    people = [(f"{rng.choice('ABCDEFGHJKLMNPRSTW')}{rng.choice(('ann', 'ben', 'cara', 'dan', 'eva', 'finn'))} "
               f"{rng.choice(('Meyer', 'Smith', 'Lopez', 'Chen', 'Kowalski', 'Okafor'))}", f"person{i:03d}@example.com")
              for i in range(300)]
    today = datetime.now(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    first = today - timedelta(days=365 * 8)
    span = (today + timedelta(days=365 * 2) - first).days
    out: dict[str, list[str]] = {}
    overrides_left = n - series - (n - 3 * series)  # about two overrides per series count as events
    for i in range(n - overrides_left):
        uid = f"{i:06d}-{rng.getrandbits(48):012x}@bench.example"
        start = first + timedelta(days=rng.randrange(span), hours=rng.choice((8, 9, 10, 11, 13, 14, 15, 16, 18)))
        topic, team = rng.choice(TOPICS), rng.choice(TEAMS)
        lines = [f"UID:{uid}", "DTSTAMP:20260101T000000Z", f"SUMMARY:{esc(topic.capitalize())} – {team}",
                 f"SEQUENCE:{rng.randrange(3)}"]
        if rng.random() < 0.08:
            lines += [f"DTSTART;VALUE=DATE:{start:%Y%m%d}",
                      f"DTEND;VALUE=DATE:{start + timedelta(days=rng.choice((1, 1, 2, 3))):%Y%m%d}"]
        elif rng.random() < 0.2:
            lines += [f"DTSTART:{start:%Y%m%dT%H%M%SZ}", f"DTEND:{start + timedelta(minutes=45):%Y%m%dT%H%M%SZ}"]
        else:
            lines += [f"DTSTART;TZID=Europe/Berlin:{start:%Y%m%dT%H%M%S}",
                      f"DTEND;TZID=Europe/Berlin:{start + timedelta(minutes=rng.choice((30, 60, 90))):%Y%m%dT%H%M%S}"]
        place = rng.choice(PLACES)
        lines += [f"LOCATION:{esc(place)}"] if place else []
        if rng.random() < 0.4:
            lines.append(f"DESCRIPTION:{esc(rng.choice(prose))}")
        who = rng.sample(people, rng.choice((0, 0, 1, 2, 3, 4, 6, 8)))
        if who:
            org = who[0]
            lines.append(f"ORGANIZER;CN={org[0]}:mailto:{org[1]}")
            lines += [f"ATTENDEE;CN={p[0]};PARTSTAT={rng.choice(('ACCEPTED', 'DECLINED', 'TENTATIVE'))}:mailto:{p[1]}"
                      for p in who[1:]]
        blocks = [lines]
        if i < series:
            blocks = _series(lines, start, rng)
        out[uid] = ["BEGIN:VEVENT", *blocks[0], "END:VEVENT"]
        for extra in blocks[1:]:
            out[uid] += ["BEGIN:VEVENT", *extra, "END:VEVENT"]
    return out


def _series(lines: list[str], start: datetime, rng: random.Random) -> list[list[str]]:
    """A master (its DTSTART moved to a weekday in the last 3 years) plus two overrides (one moved, one cancelled)."""
    start = datetime.now(timezone.utc).replace(hour=9, minute=0, second=0, microsecond=0) - \
        timedelta(days=rng.randrange(3 * 365))
    start -= timedelta(days=start.weekday())  # a Monday
    kind = rng.random()
    rule, step = ("FREQ=WEEKLY", timedelta(weeks=1)) if kind < 0.6 else \
        ("FREQ=DAILY;BYDAY=MO,TU,WE,TH,FR", timedelta(days=1)) if kind < 0.7 else \
        ("FREQ=MONTHLY", None) if kind < 0.9 else ("FREQ=YEARLY", None)
    if rng.random() < 0.5:
        rule += f";COUNT={rng.randrange(5, 80)}"
    master = [ln for ln in lines if not ln.startswith(("DTSTART", "DTEND"))]
    master += [f"DTSTART;TZID=Europe/Berlin:{start:%Y%m%dT%H%M%S}",
               f"DTEND;TZID=Europe/Berlin:{start + timedelta(hours=1):%Y%m%dT%H%M%S}", f"RRULE:{rule}"]
    if step is None:
        return [master]
    ex, moved, gone = (start + step * k for k in (2, 3, 4))
    master.append(f"EXDATE;TZID=Europe/Berlin:{ex:%Y%m%dT%H%M%S}")
    uid = lines[0]
    over = [uid, "DTSTAMP:20260101T000000Z", "SEQUENCE:3", f"RECURRENCE-ID;TZID=Europe/Berlin:{moved:%Y%m%dT%H%M%S}",
            f"DTSTART;TZID=Europe/Berlin:{moved + timedelta(hours=2):%Y%m%dT%H%M%S}",
            f"DTEND;TZID=Europe/Berlin:{moved + timedelta(hours=3):%Y%m%dT%H%M%S}", "SUMMARY:Moved: " +
            next(ln for ln in lines if ln.startswith("SUMMARY:"))[8:]]
    cancel = [uid, "DTSTAMP:20260101T000000Z", "SEQUENCE:3", "STATUS:CANCELLED",
              f"RECURRENCE-ID;TZID=Europe/Berlin:{gone:%Y%m%dT%H%M%S}",
              f"DTSTART;TZID=Europe/Berlin:{gone:%Y%m%dT%H%M%S}"]
    return [master, over, cancel]


def calendar_text(blocks: list[list[str]], name: str) -> str:
    head = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//local-rag bench//EN", f"X-WR-CALNAME:{name}", TZ]
    body = [fold(ln) for block in blocks for ln in block]
    return "\r\n".join(head + body + ["END:VCALENDAR"]).replace("\n", "\r\n").replace("\r\r\n", "\r\n") + "\r\n"


def ensure(n: int, series: int) -> Path:
    folder = OUT / f"calendar-{n}"
    marker = folder / "generated.json"
    if marker.exists() and json.loads(marker.read_text()).get("version") == GEN_VERSION:
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "caldav").mkdir(parents=True)
    from docstrings import docstrings

    t0 = time.perf_counter()
    prose = docstrings(3000, max_words=80)
    events = generate(n, series, prose)
    (folder / "big.ics").write_text(calendar_text(list(events.values()), "Work"), encoding="utf-8")
    for uid, block in events.items():
        (folder / "caldav" / f"{uid.split('@')[0]}.ics").write_text(calendar_text([block], "Work"), encoding="utf-8")
    marker.write_text(json.dumps({"version": GEN_VERSION, "events": sum(b.count("BEGIN:VEVENT") for b in events.values()),
                                  "uids": len(events), "seconds": time.perf_counter() - t0}))
    return folder


# -- 2. scans ---------------------------------------------------------------------------------------------------------


def new_source(path: Path):
    from rag_pipelines.sources.calendar import CalendarOptions, CalendarSource

    return CalendarSource(CalendarOptions(type="calendar", paths=[path], timezone="Europe/Berlin"))


def section_scan(path: Path, label: str, repeats: int, edit_uid: str) -> dict:
    from rag_pipelines.sources import calendar as module

    firsts, result, rss0 = [], None, rss_mb()
    for _ in range(repeats):
        src = new_source(path)
        t0 = time.perf_counter()
        result = src.scan()
        firsts.append(time.perf_counter() - t0)
    keys = list(result.items)
    series = sum("/" in k for k in keys)
    say(f"   {label}: first scan (fresh source: list, read, parse, expand) {fmt(firsts)}; {len(keys):,} partitions "
        f"({series:,} instances of recurring series), {len(result.problems)} problems; RSS +{rss_mb() - rss0:.0f} MB")
    times, again = timed(src.scan, repeats)
    assert again.items == result.items
    say(f"   {label}: no-op rescan (size+mtime unchanged: nothing read) {fmt(times)}")
    target = next(p for p in ([path] if path.is_file() else sorted(path.glob(f"{edit_uid.split('@')[0]}.ics"))))
    data = target.read_bytes()
    marker = f"UID:{edit_uid}\r\nDTSTAMP:20260101T000000Z\r\n".encode()
    assert marker in data
    target.write_bytes(data.replace(marker, marker + b"LOCATION:Edited room\r\n", 1))
    t0 = time.perf_counter()
    edited = src.scan()
    took = time.perf_counter() - t0
    changed = [k for k in keys if edited.items.get(k) != result.items[k]]
    say(f"   {label}: rescan after one event was edited {took * 1000:.0f} ms; {len(changed)} stamp(s) changed "
        f"({', '.join(changed)[:90]})")
    target.write_bytes(data)
    src.scan()
    real = module.now
    module.now = lambda: real() + timedelta(days=1)
    try:
        t0 = time.perf_counter()
        src.scan()
        say(f"   {label}: rescan on the next day (files with series read and expanded again) "
            f"{(time.perf_counter() - t0) * 1000:.0f} ms")
    finally:
        module.now = real
    return {"keys": keys, "first": med(firsts), "noop": med(times)}


def section_icalendar(path: Path) -> None:
    import icalendar

    from rag_pipelines.parsers import ics

    data = path.read_bytes()
    t0 = time.perf_counter()
    ics.read_calendars(data)
    ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        icalendar.Calendar.from_ical(data)
    theirs = time.perf_counter() - t0
    say(f"   reading big.ics ({len(data) / 1e6:.1f} MB): parsers/ics.py {ours:.2f} s, icalendar.Calendar.from_ical "
        f"{theirs:.2f} s (parse only, no recurrence)")


def section_sync(path: Path, home: Path, keys: list[str], repeats: int) -> None:
    import dagster as dg
    import yaml

    from rag_pipelines.config import load_collections
    from rag_pipelines.indexing.scan import open_sources
    from rag_pipelines.indexing.plan import plan_sync
    from rag_pipelines.wiring.assets import add_partitions, partitions_name
    from rag_pipelines.wiring.definitions import build_definitions
    from rag_pipelines.wiring.instance import DAGSTER_YAML, ensure_instance
    from rag_pipelines.wiring.resources import RagResource
    from rag_search.config import Paths
    from rag_search.store import Store, writes

    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump({"collections": {COLLECTION: {"sources": [
        {"type": "calendar", "paths": [str(path)], "timezone": "Europe/Berlin"}]}}}))
    os.environ.update(LOCAL_RAG_HOME=str(home), DAGSTER_HOME=str(home / "dagster"))
    paths = Paths.from_env()
    cfg = load_collections(paths)[COLLECTION]
    sources = open_sources(cfg)
    scan = sources[0].scan()
    db = Store.open(paths.db)
    coll = writes.ensure_collection(db, COLLECTION, "system")
    with db.transaction() as conn:
        conn.executemany("INSERT INTO items(collection_id, source_type, key, uri, sha256, status, stamp, source) "
                         "VALUES (?, 'event', ?, ?, 'x', 'indexed', ?, 'calendar')",
                         [(coll, k, s.uri, s.value) for k, s in scan.items.items()])
    db.close()
    store = RagResource().store()

    def plan():
        p = plan_sync(store, cfg, sources=sources)
        assert p.empty, (len(p.new), len(p.changed), len(p.deleted))

    plan()
    times, _ = timed(plan, repeats)
    say(f"   plan_sync() with every item known (scan + item states + compare): {fmt(times)} "
        f"({100 * med(times) / cfg.sensor_interval_seconds:.2f}% of the {cfg.sensor_interval_seconds} s sensor interval)")
    adds, gets = [], []
    for _ in range(repeats):
        tmp = Path(tempfile.mkdtemp(prefix="dg_", dir=home))
        (tmp / "dagster.yaml").write_text(DAGSTER_YAML)
        inst = dg.DagsterInstance.from_config(str(tmp))
        t0 = time.perf_counter()
        add_partitions(inst, partitions_name(COLLECTION), keys)
        adds.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        assert len(inst.get_dynamic_partitions(partitions_name(COLLECTION))) == len(keys)
        gets.append(time.perf_counter() - t0)
        inst.dispose()
        shutil.rmtree(tmp, ignore_errors=True)
    say(f"   add_partitions() of {len(keys):,} keys into a fresh instance: {fmt(adds)}; get_dynamic_partitions(): "
        f"{fmt(gets)}")
    ensure_instance(paths)
    instance = dg.DagsterInstance.get()
    add_partitions(instance, partitions_name(COLLECTION), keys)
    defs, _ = build_definitions({COLLECTION: cfg})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sensor = defs.get_sensor_def(f"{cfg.safe_name}_sensor")

    def tick():
        data = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, resources={"rag": RagResource()}))
        assert not data.run_requests, data

    tick()
    times, _ = timed(tick, repeats)
    say(f"   sensor evaluation with no changes ({len(keys):,} partitions): {fmt(times)}")
    instance.dispose()


# -- 3. first index vs embed-only ---------------------------------------------------------------------------------------


def embed_only_main(db_path: str) -> None:
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
    print(json.dumps({"chunks": len(texts), "read": t0 - t_start, "model_load": t1 - t0,
                      "embed": time.perf_counter() - t1}))


def run(cmd: list[str], env: dict, log: Path) -> tuple[float, float, str]:
    """(wall seconds, peak RSS MB of the command, stdout) through a fork+wait4 launcher."""
    launcher = ("import os,sys\npid=os.fork()\nif pid==0: os.execv(sys.argv[2], sys.argv[2:])\n"
                "_,st,ru=os.wait4(pid,0)\nopen(sys.argv[1],'w').write(str(ru.ru_maxrss))\n"
                "sys.exit(os.waitstatus_to_exitcode(st))")
    rss = log.with_suffix(".rss")
    with open(log, "w") as err, tempfile.TemporaryFile("w+") as out:
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", launcher, str(rss), *cmd], env=env, stdout=out, stderr=err,
                              cwd=REPO)
        wall = time.perf_counter() - t0
        out.seek(0)
        stdout = out.read()
    if proc.returncode not in (0, 6, 7):  # 6/7: finished with failed items / a skipped source
        raise SystemExit(f"{cmd[:3]} failed:\n{log.read_text()[-3000:]}")
    return wall, int(rss.read_text()) / 1024, stdout


def body_seconds(dagster_home: Path) -> dict:
    """Parse/embed/write seconds summed over the runs' own figures (the asset logs `calendar: {stats}` per run)."""
    import ast

    import dagster as dg

    instance = dg.DagsterInstance.from_config(str(dagster_home))
    totals = {"seconds_parsing": 0.0, "seconds_embedding": 0.0, "seconds_writing": 0.0}
    for record in instance.get_runs():
        for entry in instance.all_logs(record.run_id):
            message = entry.user_message or ""
            if message.startswith(f"{COLLECTION}: {{"):
                stats = ast.literal_eval(message.split(": ", 1)[1])
                for k in totals:
                    totals[k] += float(stats.get(k, 0.0))
    instance.dispose()
    return totals


def section_first_index(sample: Path, work: Path, repeats: int) -> None:
    runs = []
    for i in range(repeats):
        home = work / f"index-{i}"
        env = {**{k: v for k, v in os.environ.items() if k not in ("LOCAL_RAG_DB", "LOCAL_RAG_CONFIG")},
               "LOCAL_RAG_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")}
        wall, rss, out = run([str(BIN / "local-rag"), "index", "calendar", "--path", str(sample), "--json"], env,
                             work / f"index-{i}.log")
        summary = json.loads(out)[0]
        e_wall, e_rss, e_out = run([sys.executable, __file__, "--embed-only", str(home / "rag.db")], env,
                                   work / f"embed-{i}.log")
        runs.append({"wall": wall, "rss": rss, "summary": summary, "e_wall": e_wall, "e_rss": e_rss,
                     "body": body_seconds(home / "dagster"), **json.loads(e_out)})
        say(f"   repeat {i + 1}: index {wall:.1f} s ({rss:.0f} MB peak), embed-only {e_wall:.1f} s")
    last = runs[-1]
    items, chunks = last["summary"]["outcomes"].get("indexed", 0), last["chunks"]
    wall, e_wall = med([r["wall"] for r in runs]), med([r["e_wall"] for r in runs])
    inner = med([r["model_load"] + r["embed"] for r in runs])
    body = {k: med([r["body"][k] for r in runs]) for k in last["body"]}
    rest = wall - sum(body.values())
    say(f"   `local-rag index calendar` of {items:,} instances ({chunks:,} chunks, {len(last['summary']['run_ids'])} "
        f"Dagster run(s)): {wall:.1f} s wall, peak RSS {med([r['rss'] for r in runs]):.0f} MB")
    say(f"   embed-only of the same chunk texts, fresh process: {e_wall:.1f} s wall ({inner:.1f} s model load + "
        f"embedding), peak RSS {med([r['e_rss'] for r in runs]):.0f} MB")
    say(f"   pipeline / embed-only = {wall / e_wall:.2f}x (whole processes); {wall / inner:.2f}x against model load + "
        f"embedding alone")
    say(f"   inside the asset: parse {body['seconds_parsing']:.1f} s, embed {body['seconds_embedding']:.1f} s, write "
        f"{body['seconds_writing']:.1f} s; everything else {rest:.1f} s = {1000 * rest / max(items, 1):.1f} ms per "
        "instance (start-up, scan, partitions, Dagster bookkeeping)")


# -- main ---------------------------------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--series", type=int, default=400, help="recurring series among the events")
    ap.add_argument("--sample", type=int, default=500, help="events of the calendar indexed in section 3")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--index-repeats", type=int, default=2, help="repeats of section 3 (0: skip it)")
    ap.add_argument("--embed-only", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.embed_only:
        return embed_only_main(args.embed_only)
    import rag_search  # noqa: F401  (telemetry off before Dagster loads)

    OUT.mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="calendar_scale_"))
    t_all = time.perf_counter()
    say(f"calendar_scale: --events {args.events} --series {args.series} --sample {args.sample} --repeats "
        f"{args.repeats} (work dir {work}; today {datetime.now(timezone.utc):%Y-%m-%d})")
    say("\n1. Generated calendars")
    big = ensure(args.events, args.series)
    info = json.loads((big / "generated.json").read_text())
    say(f"   {big}: {info['events']:,} VEVENTs ({info['uids']:,} UIDs, {args.series} recurring series with overrides), "
        f"big.ics {(big / 'big.ics').stat().st_size / 1e6:.1f} MB, caldav/ {info['uids']:,} files")
    edit_uid = next(ln[4:] for ln in (big / "big.ics").read_text().splitlines()[::-1] if ln.startswith("UID:"))
    say(f"\n2. Scans (medians of {args.repeats})")
    copy = work / "calendars"
    shutil.copytree(big, copy, ignore=shutil.ignore_patterns("generated.json"))
    section_icalendar(copy / "big.ics")
    res = section_scan(copy / "big.ics", "big.ics", args.repeats, edit_uid)
    section_scan(copy / "caldav", "caldav/", args.repeats, edit_uid)
    section_sync(copy / "big.ics", work / "big-home", res["keys"], args.repeats)
    if args.index_repeats:
        say(f"\n3. First index of a {args.sample:,}-event calendar: pipeline vs embed-only (medians of "
            f"{args.index_repeats})")
        sample = ensure(args.sample, max(1, args.series * args.sample // args.events))
        section_first_index(sample / "big.ics", work, args.index_repeats)
    say(f"\n   total bench time {(time.perf_counter() - t_all) / 60:.1f} min")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
