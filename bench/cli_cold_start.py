"""Wall time of a cold `local-rag search` process (import, open index, load model, embed, search, print).

    python bench/cli_cold_start.py [--runs 7]

Uses a small real index built in a temporary LOCAL_RAG_HOME with the builtin model.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    from conftest import add_doc

    from rag_search.embedders.builtin import BuiltinEmbedder
    from rag_search.store import Store

    home = Path(tempfile.mkdtemp())
    store, emb = Store.open(home / "rag.db"), BuiltinEmbedder()
    for i in range(200):
        add_doc(store, emb, "notes", f"n{i}.md", f"note {i} about project planning, sourdough and kube-proxy {i}")
    store.close()
    exe = Path(sys.executable).with_name("local-rag")
    env = {**os.environ, "LOCAL_RAG_HOME": str(home)}
    for mode in ("hybrid", "keyword"):
        times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            subprocess.run([str(exe), "search", "planning the kube-proxy rollout", "--mode", mode], env=env,
                           check=True, stdout=subprocess.DEVNULL)
            times.append(time.perf_counter() - t0)
        print(f"local-rag search --mode {mode:<8} median {statistics.median(times):.2f} s  "
              f"(min {min(times):.2f}, max {max(times):.2f}, {args.runs} runs)")


if __name__ == "__main__":
    main()
