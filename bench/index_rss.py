"""Peak RSS of `local-rag index` on a large vault, where per-item memory shows.

    python bench/index_rss.py [--files 50000 20000 5000]

Each vault holds N one-chunk notes sharing one body (their titles differ), so the embedding cache answers
after the first note and the run measures what every item costs besides the model: scan, plan, Dagster
partitions and events, rag.db writes. Prints peak RSS (MB) and wall seconds per size; the target is
<= 400 MB at 50,000 files.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXE = str(Path(sys.executable).with_name("local-rag"))
BODY = ("The quarterly review covered the migration of the billing service, the new on-call rota and the "
        "budget for the offsite. Action items: move the staging cluster, write the runbook, book the venue.")


def make_vault(root: Path, n: int) -> None:
    for i in range(n):
        folder = root / f"area{i % 13}" / f"topic{i % 97}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"note {i:06}.md").write_text(f"{BODY}\n", encoding="utf-8")


def index(vault: Path, home: Path) -> tuple[float, float, dict]:
    """Peak RSS (MB, this child alone: wait4), wall seconds and the run's JSON summary."""
    env = {**os.environ, "LOCAL_RAG_HOME": str(home)}
    env.pop("DAGSTER_HOME", None)
    t0 = time.perf_counter()
    proc = subprocess.Popen([EXE, "index", "project", "big", str(vault), "--json"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 6, 7):  # 6/7: finished with failed items / a skipped source
        raise SystemExit(f"local-rag index failed (exit {proc.returncode})")
    return usage.ru_maxrss / 1024, wall, json.loads(out)[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, nargs="+", default=[50_000])
    args = ap.parse_args()
    for n in args.files:
        tmp = Path(tempfile.mkdtemp())
        make_vault(tmp / "vault", n)
        rss, wall, summary = index(tmp / "vault", tmp / "home")
        print(f"{n} files: peak RSS {rss:.0f} MB, {wall:.0f} s, {summary['outcomes']}, "
              f"{len(summary['run_ids'])} Dagster run(s) (target <= 400 MB at 50,000)", flush=True)


if __name__ == "__main__":
    main()
