"""Pipeline figures: Dagster indexing vs embed-only, bookkeeping share, 50k no-change rescan, watch latency, RSS.

    python bench/pipeline.py [--notes 2000] [--rescan-files 50000] [--saves 5] [--index-only] [--repeats 1]

1. Generates a vault of real prose (docstrings) as Markdown notes and indexes it with
   `local-rag index project` (a subprocess: its peak RSS is measured), then embeds the very same chunk
   texts directly with the builtin embedder in a fresh process. Prints both times, the ratio, and where
   the asset body's time went (parse / waiting for the model / write; the model embeds on its own
   threads while the body parses and writes; the rest is Dagster, scan and startup).
2. Builds a 50k-file tree whose items the index already knows and times the sensor's no-change scan.
3. Runs the watcher and times save → searchable for a few edits.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from docstrings import docstrings

EXE = str(Path(sys.executable).with_name("local-rag"))


def make_vault(root: Path, n: int) -> None:
    texts = docstrings(3 * n, min_words=30, max_words=120)
    rng = np.random.default_rng(0)
    for i in range(n):
        folder = root / f"area{i % 7}" / f"topic{i % 23}"
        folder.mkdir(parents=True, exist_ok=True)
        paras = [texts[(3 * i + j) % len(texts)] for j in range(int(rng.integers(1, 4)))]
        body = "\n\n".join(f"## Part {j + 1}\n\n{p}" for j, p in enumerate(paras))
        (folder / f"note {i:05}.md").write_text(
            f"---\ntags: [t{i % 11}, area{i % 7}]\n---\n# Note {i}\n\n{body}\n#inline{i % 5}\n", encoding="utf-8")


def index_vault(home: Path, vault: Path) -> tuple[float, dict, int]:
    env = {**os.environ, "LOCAL_RAG_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    out = subprocess.run([EXE, "index", "project", "bench", str(vault), "--json"], env=env, check=True,
                         capture_output=True, text=True)
    wall = time.perf_counter() - t0
    rss_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return wall, json.loads(out.stdout)[0], max(rss_kb, before)


def asset_seconds(home: Path) -> dict:
    """Sum of the asset bodies' own timings, from the stats line each run logs ("bench: {...}")."""
    import ast

    os.environ["DAGSTER_HOME"] = str(home / "dagster")
    import dagster as dg

    instance = dg.DagsterInstance.get()
    totals = {"seconds_parsing": 0.0, "seconds_embedding": 0.0, "seconds_writing": 0.0}
    for run in instance.get_runs():
        for entry in instance.all_logs(run.run_id):
            if entry.user_message.startswith("bench: {"):
                stats = ast.literal_eval(entry.user_message[len("bench: "):])
                for k in totals:
                    totals[k] += float(stats.get(k, 0.0))
    return totals


def embed_only(home: Path) -> tuple[float, int]:
    """In a fresh process each time: a second model session in the bench process ran 1.4x slower (twice)."""
    out = subprocess.run([sys.executable, __file__, "--embed-only", str(home)], check=True, capture_output=True,
                         text=True)
    seconds, n = out.stdout.split()
    return float(seconds), int(n)


def _embed_only(home: Path) -> tuple[float, int]:
    from rag_search.embedders.builtin import BuiltinEmbedder
    from rag_search.store import Store

    store = Store.open(home / "rag.db")
    texts = [r[0] for r in store.conn.execute("SELECT text FROM chunks ORDER BY id")]
    store.close()
    t0 = time.perf_counter()
    emb = BuiltinEmbedder()
    emb.embed_documents(texts)
    return time.perf_counter() - t0, len(texts)


def rescan(n_files: int, repeats: int = 3) -> tuple[float, float]:
    from rag_pipelines.config import CollectionConfig
    from rag_pipelines.sources.files import scan_collection
    from rag_pipelines.indexing.plan import plan_sync
    from rag_search.store import Store, writes

    root = Path(tempfile.mkdtemp()) / "tree"
    for i in range(n_files):
        d = root / f"d{i % 50}" / f"e{i % 17}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.md").write_text(f"note {i}")
    cfg = CollectionConfig.model_validate({"name": "big", "sources": [{"type": "project", "paths": [str(root)]}]})
    store = Store.open(Path(tempfile.mkdtemp()) / "rag.db")
    coll = writes.ensure_collection(store, "big")
    entries = scan_collection(cfg)
    with store.transaction() as conn:  # the index already knows every file (as after a full index)
        conn.executemany(
            "INSERT INTO items(collection_id, source_type, key, uri, size, mtime_ns, sha256, status) "
            "VALUES (?, 'markdown', ?, ?, ?, ?, 'x', 'indexed')",
            [(coll, e.key, str(e.path), e.size, e.mtime_ns) for e in entries.values()])
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        plan = plan_sync(store, cfg)
        times.append(time.perf_counter() - t0)
        assert plan.empty, "a no-change rescan found changes"
    return statistics.median(times), max(times)


def watch_latency(home: Path, vault: Path, saves: int) -> list[float]:
    os.environ["LOCAL_RAG_HOME"] = str(home)
    os.environ["DAGSTER_HOME"] = str(home / "dagster")
    from rag_pipelines.indexing.watch import watch_collections
    from rag_pipelines.wiring.resources import RagResource
    from rag_search.config import Paths
    from rag_search.retrieval import SearchEngine, SearchRequest

    stop, msgs = threading.Event(), []
    thread = threading.Thread(target=watch_collections, args=(Paths.from_env(), ["bench"], 1.0, msgs.append, stop),
                              daemon=True)
    thread.start()
    while not any("watching" in m for m in msgs):
        time.sleep(0.1)
    time.sleep(5)
    engine = SearchEngine(RagResource().store(), RagResource().embedder())
    out = []
    for i in range(saves):
        word = f"zebrafinch{i}x"
        (vault / "area0" / "topic0" / "note 00000.md").write_text(f"# Note 0\n\nToday I saw a {word}.\n")
        t0 = time.perf_counter()
        while not engine.search(SearchRequest(word, mode="keyword")).hits:
            time.sleep(0.05)
            if time.perf_counter() - t0 > 60:
                raise SystemExit(f"not searchable after 60 s: {msgs[-3:]}")
        out.append(time.perf_counter() - t0)
        time.sleep(1.5)
    stop.set()
    thread.join(timeout=30)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=2000)
    ap.add_argument("--rescan-files", type=int, default=50_000)
    ap.add_argument("--saves", type=int, default=5)
    ap.add_argument("--index-only", action="store_true", help="only the full index vs embed-only comparison")
    ap.add_argument("--repeats", type=int, default=1, help="index and embed-only runs, alternating (median ratio)")
    ap.add_argument("--embed-only", type=Path, help=argparse.SUPPRESS)  # the child process of embed_only()
    args = ap.parse_args()
    if args.embed_only:
        seconds, n = _embed_only(args.embed_only)
        print(seconds, n)
        return
    tmp = Path(tempfile.mkdtemp())
    vault = tmp / "vault"
    make_vault(vault, args.notes)
    ratios, inner = [], []
    for rep in range(args.repeats):
        home = tmp / f"home{rep}"
        wall, summary, rss_kb = index_vault(home, vault)
        parts = asset_seconds(home)
        embed_secs, n_chunks = embed_only(home)
        ratios.append(wall / embed_secs)
        inner.append(wall - embed_secs)
        print(f"full index of {args.notes} notes ({n_chunks} chunks) through Dagster: {wall:.1f} s "
              f"({summary['outcomes']}, {len(summary['run_ids'])} run(s))")
        print(f"  asset bodies: parse {parts['seconds_parsing']:.1f} s, waiting for the model "
              f"{parts['seconds_embedding']:.1f} s (it embeds on its own threads meanwhile), "
              f"write {parts['seconds_writing']:.1f} s")
        print(f"embed-only, same {n_chunks} texts, same embedder, one process (model load included): {embed_secs:.1f} s")
        print(f"  pipeline / embed-only = {wall / embed_secs:.2f}x (target <= 1.15x); pipeline minus embed-only "
              f"{wall - embed_secs:.1f} s")
        print(f"  peak RSS of the `local-rag index` process: {rss_kb / 1024:.0f} MB (target <= 400 MB)", flush=True)
    if args.repeats > 1:
        print(f"median pipeline / embed-only over {args.repeats} runs: {statistics.median(ratios):.2f}x; "
              f"pipeline minus embed-only: {statistics.median(inner):.1f} s")
    if args.index_only:
        return
    med, worst = rescan(args.rescan_files)
    print(f"no-change rescan of {args.rescan_files} files: median {med:.2f} s, worst {worst:.2f} s (target <= 5 s)")
    lat = watch_latency(home, vault, args.saves)
    print(f"watch mode, save -> searchable: median {statistics.median(lat):.1f} s, max {max(lat):.1f} s over "
          f"{len(lat)} saves (debounce 1 s; target <= 10 s)")


if __name__ == "__main__":
    main()
