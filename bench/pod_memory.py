"""Peak memory of what each pod of the Kubernetes recipe runs, to size its requests and limits (deploy/k8s).

    python bench/pod_memory.py [--pages 4] [--notes 300] [--searches 20] [--only scans,notes,code,search]

A pod's memory is its whole process tree: every 0.2 s the proportional set size (PSS: shared pages counted once,
as a cgroup charges them) is summed over the process and its children; the peak is printed in MB.
1. scans: a run pod indexing scans (`local-rag index project`: N dense A4 pages as PNG and an image-only PDF of
   two pages; OCR in the RapidOCR worker process), the embedding elsewhere (the Ollama stand-in of the tests, as
   the recipe's Ollama): the run pod of the recipe;
2. notes: a run pod indexing N generated notes with the bundled embedder (no Ollama);
3. code: the code server (`dagster api grpc ... -m rag_pipelines -a defs`) loaded, for 10 s;
4. search: `local-rag serve --http` over the index of 2 (bundled embedder), answering N `local-rag search`es.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "bench")]
EXE = str(Path(sys.executable).with_name("local-rag"))
QUERIES = ["river crossing schedule", "budget review", "the migration plan", "who wrote the runbook", "offsite"]


def tree_mb(pid: int) -> float:
    """PSS (else RSS) of a process and its children, MB."""
    import psutil

    total = 0
    try:
        root = psutil.Process(pid)
        for proc in [root, *root.children(recursive=True)]:
            try:
                info = proc.memory_full_info()
                total += getattr(info, "pss", info.rss)
            except psutil.Error:
                pass
    except psutil.Error:
        return 0.0
    return total / 2**20


class Peak:
    """Samples a process tree in the background until stopped; `mb` is the highest sum seen."""

    def __init__(self, pid: int, every: float = 0.2):
        self.pid, self.every, self.mb, self._stop = pid, every, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.mb = max(self.mb, tree_mb(self.pid))
            time.sleep(self.every)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.mb


def home(base: Path, folder: Path, embedder: dict | None) -> dict:
    (base / "home").mkdir(parents=True)
    config = {"collections": {"data": {"sources": [{"type": "project", "paths": [str(folder)]}]}}}
    if embedder:
        config["embedder"] = embedder
    (base / "home" / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    env = {**os.environ, "LOCAL_RAG_HOME": str(base / "home")}
    env.pop("DAGSTER_HOME", None)
    env.pop("LOCAL_RAG_CONFIG", None)
    return env


def index_peak(env: dict) -> tuple[float, float, str]:
    """(peak MB of the `local-rag index` tree, wall seconds, its summary line)."""
    started = time.monotonic()
    proc = subprocess.Popen([EXE, "index", "all"], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    peak = Peak(proc.pid)
    out = proc.communicate()[0]
    mb = peak.stop()
    if proc.returncode not in (0, 6, 7):
        raise SystemExit(f"local-rag index failed (exit {proc.returncode}): {out}")
    return mb, time.monotonic() - started, out.strip().splitlines()[0]


def scans(base: Path, pages: int) -> None:
    from ocr_office import prose_lines
    from office_builders import image_pdf, text_image
    from ollama_standin import OllamaStandIn

    folder = base / "scans"
    folder.mkdir(parents=True)
    blocks = prose_lines(7 * (pages + 2))
    page = lambda i: text_image([ln for b in blocks[7 * i: 7 * i + 7] for ln in b][:40], size=33)  # noqa: E731
    for i in range(pages):
        (folder / f"page{i}.png").write_bytes(page(i))
    (folder / "scan.pdf").write_bytes(image_pdf([page(pages), page(pages + 1)]))
    with OllamaStandIn() as ollama:
        env = home(base, folder, {"provider": "ollama"}) | {"OLLAMA_HOST": ollama.host}
        mb, wall, line = index_peak(env)
    print(f"1. run pod, OCR of {pages} dense A4 pages (PNG) and a 2-page image-only PDF, Ollama embedding: peak "
          f"{mb:.0f} MB, {wall:.0f} s ({line})", flush=True)


def notes(base: Path, count: int) -> dict:
    from dagster_instance import notes as write_notes

    write_notes(base / "notes", count, seed=7)
    env = home(base, base / "notes", None)
    mb, wall, line = index_peak(env)
    print(f"2. run pod, {count} notes with the bundled embedder: peak {mb:.0f} MB, {wall:.0f} s ({line})", flush=True)
    return env


def code_server(env: dict) -> None:
    from code_server import code_server as serve

    with tempfile.TemporaryDirectory() as tmp, serve(env, Path(tmp) / "server.log") as port:
        pid = next(p.pid for p in __import__("psutil").Process().children() if str(port) in " ".join(p.cmdline()))
        peak = Peak(pid)
        time.sleep(10)
        print(f"3. code server (dagster api grpc, the location loaded): peak {peak.stop():.0f} MB", flush=True)


def search_server(env: dict, searches: int) -> None:
    from postgres_server import _free_port

    port = _free_port()
    server = subprocess.Popen([EXE, "serve", "--http", "--port", str(port)], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        peak = Peak(server.pid)
        while not listening(port):
            if server.poll() is not None:
                raise SystemExit("local-rag serve exited")
            time.sleep(0.2)
        started = time.monotonic()
        for i in range(searches):
            subprocess.run([EXE, "search", QUERIES[i % len(QUERIES)]], env=env, capture_output=True, check=True)
        mb = peak.stop()
        print(f"4. search server (local-rag serve --http, bundled embedder) over {searches} searches: peak {mb:.0f} "
              f"MB ({(time.monotonic() - started) / searches:.2f} s a search, CLI start included)", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=60)


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=4)
    ap.add_argument("--notes", type=int, default=300)
    ap.add_argument("--searches", type=int, default=20)
    ap.add_argument("--only", default="scans,notes,code,search")
    args = ap.parse_args()
    only = set(args.only.split(","))
    base = Path(tempfile.mkdtemp(prefix="pod-memory-"))
    print(f"load average before: {os.getloadavg()[0]:.1f}", flush=True)
    if "scans" in only:
        scans(base / "scans", args.pages)
    if only & {"notes", "code", "search"}:
        env = notes(base / "notes", args.notes)
        if "code" in only:
            code_server(env)
        if "search" in only:
            search_server(env, args.searches)
    print(f"load average after: {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
