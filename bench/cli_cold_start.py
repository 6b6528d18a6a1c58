"""Wall time of a cold `local-rag search` process (import, open index, load model, embed, search, print).

    python bench/cli_cold_start.py [--runs 7]

First in-process (LOCAL_RAG_NO_SERVER=1), then with a `local-rag serve` running on the same home, which the
CLI finds through the home's search.sock and asks instead of loading everything itself.

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

    def measure(label: str, extra_env: dict) -> None:
        for mode in ("hybrid", "keyword"):
            times = []
            for _ in range(args.runs):
                t0 = time.perf_counter()
                subprocess.run([str(exe), "search", "planning the kube-proxy rollout", "--mode", mode],
                               env={**env, **extra_env}, check=True, stdout=subprocess.DEVNULL)
                times.append(time.perf_counter() - t0)
            print(f"{label:<34} --mode {mode:<8} median {statistics.median(times):.2f} s  "
                  f"(min {min(times):.2f}, max {max(times):.2f}, {args.runs} runs)", flush=True)

    measure("in-process (no server)", {"LOCAL_RAG_NO_SERVER": "1"})
    import socket as _socket

    with _socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([str(exe), "serve", "--port", str(port)], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while not (home / "search.sock").exists() and time.time() < deadline:
            time.sleep(0.2)
        measure("with `local-rag serve` running", {})
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
