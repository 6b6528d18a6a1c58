"""Faults at scale: repeated SIGKILLs during indexing, then a resume; a large bad-input corpus.

    python bench/faults.py [--notes 300] [--kills 10] [--bad-scale 20] [--only SECTIONS]

1. Kill loop: a vault of `--notes` real-prose notes is indexed by `local-rag index project` in a
   subprocess that is SIGKILLed after a random 2–8 s, `--kills` times; after each kill rag.db is checked
   (integrity_check, chunks = FTS rows = vectors, orphans, indexed items without chunks). A final run
   completes the index. Prints kills survived, integrity errors, count mismatches, orphans, items saved
   per kill, items redone by the resume run, and whether any run stayed STARTED (automation blocked).
2. Bad input: tests/badinput_corpus.make_corpus(scale) written to a folder and indexed in one run
   (timeout 15 min); prints files tried / recorded failed / indexed / hung, wall time, peak RSS.
3. Each bad file alone (`files`): every corpus file parsed in a process of its own with the default limits;
   prints seconds, peak RSS and outcome per file, and flags any over 60 s or 1 GB (the issue's bound).
4. Hostile shapes of the other sources (`shapes`, tests/hostile: mail, calendars, ...): each indexed by
   `local-rag index ... --json` in a fresh home; prints seconds, peak RSS, outcome and whether it is the expected one.

    python bench/faults.py --only files,shapes          # sections to run: kills, bad, files, shapes (default all)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))

from docstrings import docstrings  # noqa: E402

from rag_search.store.connection import connect  # noqa: E402

EXE = str(Path(sys.executable).with_name("local-rag"))
MEASURE = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
           "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(r.returncode)")


def make_vault(root: Path, n: int) -> None:
    texts = docstrings(4 * n, min_words=60, max_words=160)
    for i in range(n):
        root.mkdir(parents=True, exist_ok=True)
        body = "\n\n".join(f"## Part {j + 1}\n\n{texts[(4 * i + j) % len(texts)]}" for j in range(4))
        (root / f"note-{i:04d}.md").write_text(f"# Note {i}\n\n{body}\n", encoding="utf-8")


def check(db: Path) -> dict:
    if not db.exists():
        return {"integrity_errors": 0, "mismatch": 0, "orphans": 0, "indexed": 0, "cache": 0}
    conn = connect(db)
    q = lambda sql: conn.execute(sql).fetchone()[0]  # noqa: E731
    chunks, fts = q("SELECT count(*) FROM chunks"), q("SELECT count(*) FROM chunks_fts_docsize")
    vecs = q("SELECT count(*) FROM chunk_vec") if q("SELECT count(*) FROM sqlite_master WHERE name='chunk_vec'") else 0
    out = {
        "integrity_errors": 0 if q("PRAGMA integrity_check") == "ok" else 1,
        "mismatch": int(not (chunks == fts == vecs)),
        "orphans": q("SELECT count(*) FROM chunks WHERE item_id NOT IN (SELECT id FROM items)")
        + q("SELECT count(*) FROM items i WHERE status = 'indexed' AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.item_id = i.id)"),
        "indexed": q("SELECT count(*) FROM items WHERE status = 'indexed'"),
        "cache": q("SELECT count(*) FROM embedding_cache"),
    }
    conn.close()
    return out


def env_for(home: Path) -> dict:
    env = {**os.environ, "LOCAL_RAG_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")}
    for k in ("LOCAL_RAG_DB", "LOCAL_RAG_CONFIG"):
        env.pop(k, None)
    return env


def kill_loop(tmp: Path, notes: int, kills: int) -> None:
    vault, home = tmp / "vault", tmp / "home-kill"
    make_vault(vault, notes)
    env, db, rng = env_for(home), home / "rag.db", random.Random(0)
    saved, totals = [], {"integrity_errors": 0, "mismatch": 0, "orphans": 0}
    for k in range(kills):
        before = check(db)["indexed"]
        proc = subprocess.Popen([EXE, "index", "project", "vault", str(vault)], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(2, 8))
        if proc.poll() is not None:
            print(f"  kill {k + 1}: the run had already finished")
            break
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        state = check(db)
        for name in totals:
            totals[name] += state[name]
        saved.append(state["indexed"] - before)
        print(f"  kill {k + 1}: {state['indexed']}/{notes} items indexed (+{saved[-1]}), cache {state['cache']} vectors, "
              f"integrity errors {state['integrity_errors']}, mismatch {state['mismatch']}, orphans {state['orphans']}")
    before = check(db)["indexed"]
    out = subprocess.run([EXE, "index", "all", "--json"], env=env, capture_output=True, text=True, timeout=3600)
    summary = json.loads(out.stdout)[0] if out.returncode in (0, 6, 7) else {"outcomes": {}}
    final = check(db)
    redone = summary["outcomes"].get("indexed", 0) - (notes - before)
    runs = subprocess.run([sys.executable, "-c", "import dagster as dg; print(sorted({str(r.status) for r in "
                           "dg.DagsterInstance.get().get_runs()}))"], env=env, capture_output=True, text=True)
    print(f"kills survived: {len(saved)}/{kills}; integrity errors {totals['integrity_errors']}, count mismatches "
          f"{totals['mismatch']}, orphans {totals['orphans']}")
    print(f"items saved per kill: median {sorted(saved)[len(saved) // 2] if saved else 0}, min {min(saved, default=0)}; "
          f"resume run: {summary['outcomes']} → {final['indexed']}/{notes} indexed, items redone after resume {redone}")
    print(f"run statuses after resume: {runs.stdout.strip()} (no STARTED = automation not blocked)")


def bad_input(tmp: Path, scale: float) -> None:
    from badinput_corpus import make_corpus

    folder, home = tmp / "bad", tmp / "home-bad"
    folder.mkdir()
    from rag_pipelines.parsers.limits import Limits

    expected = make_corpus(folder, scale=scale, limits=Limits())  # the defaults a user gets
    env = env_for(home)
    t0 = time.perf_counter()
    rss = 0.0
    try:
        out = subprocess.run([sys.executable, "-c", MEASURE, EXE, "index", "project", "bad", str(folder), "--json"],
                             env=env, capture_output=True, text=True, timeout=900)
        hung = 0 if out.returncode in (0, 6, 7) else len(expected)
        rss = float(out.stderr.strip().splitlines()[-1]) / 1024
    except subprocess.TimeoutExpired:
        hung = len(expected)
    wall = time.perf_counter() - t0
    conn = connect(home / "rag.db")
    rows = dict(conn.execute("SELECT status, count(*) FROM items GROUP BY status").fetchall())
    kinds = dict(conn.execute("SELECT error_kind, count(*) FROM items WHERE status = 'failed' GROUP BY 1").fetchall())
    chunks = conn.execute("SELECT max(n) FROM (SELECT count(*) AS n FROM chunks GROUP BY item_id)").fetchone()[0]
    wrong = [k for k, v in expected.items() if v.startswith("failed") and not conn.execute(
        "SELECT 1 FROM items WHERE key = ? AND status = 'failed'", (k,)).fetchone()]
    print(f"bad files tried: {len(expected)} (scale {scale:g}, {sum(p.stat().st_size for p in folder.rglob('*') if p.is_file()) / 1e6:.0f} MB); "
          f"recorded failed: {rows.get('failed', 0)} {kinds}; indexed: {rows.get('indexed', 0)}; hung: {hung}")
    print(f"expected failures not recorded: {wrong or 'none'}; most chunks of one item: {chunks}")
    print(f"wall {wall:.1f} s, peak RSS of the indexing process {rss:.0f} MB")


PARSE_ONE = ("import resource, sys, time; t0 = time.perf_counter()\n"
             "from rag_pipelines import parsers\n"
             "data = open(sys.argv[1], 'rb').read()\n"
             "try:\n    doc = parsers.parse(data, sys.argv[2]); out = f'indexed ({len(doc.sections)} sections)'\n"
             "except parsers.ParseError as e:\n    out = f'failed:{e.kind}'\n"
             "print(out, round(time.perf_counter() - t0, 2), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)")
LIMIT_S, LIMIT_MB = 60, 1024


def each_file(tmp: Path, scale: float) -> None:
    from badinput_corpus import make_corpus
    from rag_pipelines.parsers.limits import Limits

    folder = tmp / "bad-each"
    expected = make_corpus(folder, scale=scale, limits=Limits())
    rows = []
    for rel in sorted(expected):
        try:
            out = subprocess.run([sys.executable, "-c", PARSE_ONE, str(folder / rel), rel], capture_output=True,
                                 text=True, timeout=LIMIT_S * 5).stdout.split()
            outcome, secs, mb = " ".join(out[:-2]), float(out[-2]), int(out[-1])
        except subprocess.TimeoutExpired:
            outcome, secs, mb = "hung", LIMIT_S * 5.0, 0
        rows.append((rel, secs, mb, outcome, expected[rel]))
    bad = [r for r in rows if r[1] > LIMIT_S or r[2] > LIMIT_MB or r[3] == "hung"]
    print(f"{len(rows)} files (scale {scale:g}), each parsed in its own process; over {LIMIT_S} s or {LIMIT_MB} MB: "
          f"{len(bad)}")
    print("| file | seconds | peak RSS MB | outcome | expected |\n|---|---|---|---|---|")
    for rel, secs, mb, outcome, want in sorted(rows, key=lambda r: -r[1]):
        flag = " **over**" if (rel, secs, mb, outcome, want) in bad else ""
        print(f"| {rel} | {secs:.1f} | {mb} | {outcome}{flag} | {want} |")


def shapes(tmp: Path) -> None:
    from hostile import all_shapes

    print("| shape | seconds | peak RSS MB | outcome | expected |\n|---|---|---|---|---|")
    for shape in all_shapes():
        work = tmp / f"shape-{shape.name}"
        args = shape.build(work / "input")
        env, t0, mb = env_for(work / "home"), time.perf_counter(), 0.0
        try:
            out = subprocess.run([sys.executable, "-c", MEASURE, EXE, "index", *args, "--json"], env=env,
                                 capture_output=True, text=True, timeout=shape.limit_s * 5)
            mb = float(out.stderr.strip().splitlines()[-1]) / 1024
            outcome = json.loads(out.stdout)[0]["outcomes"] if out.returncode in (0, 6, 7) else f"exit {out.returncode}"
        except subprocess.TimeoutExpired:
            outcome = "hung"
        secs = time.perf_counter() - t0
        ok = outcome == shape.expect and secs <= shape.limit_s and mb <= LIMIT_MB
        print(f"| {shape.name} | {secs:.1f} | {mb:.0f} | {outcome} | {shape.expect}{'' if ok else ' **differs**'} |",
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=300)
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--bad-scale", type=float, default=20)
    ap.add_argument("--only", default="kills,bad,files,shapes", help="sections to run (comma-separated)")
    args = ap.parse_args()
    only = set(args.only.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        if "kills" in only and args.kills:
            print(f"== kill loop: {args.notes} notes, {args.kills} SIGKILLs at 2–8 s")
            kill_loop(Path(tmp), args.notes, args.kills)
        if "bad" in only:
            print(f"== bad input corpus at scale {args.bad_scale:g}")
            bad_input(Path(tmp), args.bad_scale)
        if "files" in only:
            print(f"== each bad file alone, scale {args.bad_scale:g}")
            each_file(Path(tmp), args.bad_scale)
        if "shapes" in only:
            print("== hostile shapes of the other sources (tests/hostile), through `local-rag index`")
            shapes(Path(tmp))


if __name__ == "__main__":
    main()
