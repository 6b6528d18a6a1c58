"""Faults at scale: repeated SIGKILLs during indexing, then a resume; a large bad-input corpus.

    python bench/faults.py [--notes 300] [--kills 10] [--bad-scale 20]

1. Kill loop: a vault of `--notes` real-prose notes is indexed by `local-rag index project` in a
   subprocess that is SIGKILLed after a random 2–8 s, `--kills` times; after each kill rag.db is checked
   (integrity_check, chunks = FTS rows = vectors, orphans, indexed items without chunks). A final run
   completes the index. Prints kills survived, integrity errors, count mismatches, orphans, items saved
   per kill, items redone by the resume run, and whether any run stayed STARTED (automation blocked).
2. Bad input: tests/badinput_corpus.make_corpus(scale) written to a folder and indexed in one run
   (timeout 15 min); prints files tried / recorded failed / indexed / hung, wall time, peak RSS.
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=300)
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--bad-scale", type=float, default=20)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print(f"== kill loop: {args.notes} notes, {args.kills} SIGKILLs at 2–8 s")
        kill_loop(Path(tmp), args.notes, args.kills)
        print(f"== bad input corpus at scale {args.bad_scale:g}")
        bad_input(Path(tmp), args.bad_scale)


if __name__ == "__main__":
    main()
