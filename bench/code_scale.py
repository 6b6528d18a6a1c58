"""A code group at 50k files and 20k commits: no-op rescans of files and history, and first-index overhead.

    python bench/code_scale.py [--files 50000] [--commits 20000] [--index-files 100] [--index-commits 50]
                               [--sample 1000] [--repeats 3] [--index-repeats 2]

1. Generates (once; cached under bench/out/code-<files>-<commits>/) a repository with `git fast-import`
   (bench/code_gen.py: Python/Go/TS/Java/Rust/Markdown files; every commit after the first rewrites one to
   three files, all within the last 6 months) and prints its sizes.
2. No-op rescan at that size: the git commands a scan runs, the source's scan() of files and of history
   (first call of a fresh source, then repeats), plan_sync() against an index that already knows every item
   (a bench shortcut: rag.db's items rows are written by SQL from the scan), adding every key as a Dagster
   partition, and a real evaluation of the collection's sensor with no changes.
3. Reading, parsing and chunking (no embedding) a `--sample` of files and of commits of the big repository
   with the builtin tokenizer: the per-item cost that comes on top of embedding in a first index.
4. First index of a small repository (`--index-files`, `--index-commits`): `local-rag index group --history`
   in a subprocess into a temp LOCAL_RAG_HOME, then the very same chunk texts embedded by the builtin
   embedder in a fresh process (bench/email_scale.py's method). Ratio, and the non-embedding cost per item.

Figures are medians over `--repeats` (section 4: `--index-repeats`). Nothing leaves the machine (git runs with GIT_ALLOW_PROTOCOL empty).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
BIN = Path(sys.executable).parent
sys.path.insert(0, str(HERE))

from email_scale import embed_only_main, fmt_times, home_env, med, note, run_measured, say, timed  # noqa: E402

COLLECTION, GROUP = "repo", "bench"


def repository(files: int, commits: int) -> Path:
    import code_gen

    folder = OUT / f"code-{files}-{commits}"
    repo = folder / COLLECTION
    if not (folder / "done.json").exists():
        shutil.rmtree(folder, ignore_errors=True)
        info = code_gen.generate(repo, files, commits)
        (folder / "done.json").write_text(json.dumps(info))
        say(f"   generated in {info['fast_import_s']:.1f} s (git fast-import) + {info['checkout_s']:.1f} s (checkout)")
    return repo


def du(path: Path) -> str:
    out = subprocess.run(["du", "-sh", str(path)], capture_output=True, text=True).stdout.split()
    return out[0] if out else "?"


def write_config(home: Path, repo: Path) -> None:
    import yaml

    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump({"code_groups": {GROUP: [str(repo)]},
                                                      "git_history_in_months": 6}))


# -- 2. no-op rescan -----------------------------------------------------------------------------------------


def section_rescan(repo: Path, home: Path, repeats: int) -> dict:
    import dagster as dg

    from rag_pipelines.config import load_collections
    from rag_pipelines.indexing.scan import open_sources
    from rag_pipelines.sources import gitcli
    from rag_pipelines.sources.git import GitOptions, GitSource, window_start
    from rag_pipelines.indexing.plan import plan_sync
    from rag_pipelines.wiring.assets import add_partitions
    from rag_pipelines.wiring.definitions import build_definitions
    from rag_pipelines.wiring.instance import ensure_instance
    from rag_pipelines.wiring.resources import RagResource
    from rag_search.config import Paths
    from rag_search.store import Store, writes

    since = window_start(6)
    for label, fn in (("git ls-files -s -z", lambda: gitcli.tracked(repo)),
                      ("git status --porcelain -z (GIT_OPTIONAL_LOCKS=0)", lambda: gitcli.worktree_changes(repo)),
                      ("git rev-list --since=<6 months> HEAD", lambda: gitcli.commits_since(repo, since))):
        times, _ = timed(fn, repeats)
        say(f"   {label}: {fmt_times(times, 'ms')}")
    files = GitSource(GitOptions(type="code", path=repo))
    t0 = time.perf_counter()
    scan = files.scan()
    first = time.perf_counter() - t0
    times, _ = timed(files.scan, repeats)
    say(f"   files scan() of {len(scan.items):,} files: {fmt_times(times)}; first call of a fresh source {first:.2f} s")
    note("ls-files + status + the skip rules; a fresh source also reads the first 8 KB of files of unknown "
         "suffix (cached by blob after that)")
    history = GitSource(GitOptions(type="code", path=repo, files=False, history_months=6))
    times, hscan = timed(history.scan, repeats)
    say(f"   history scan() of {len(hscan.items):,} commits in the window: {fmt_times(times)}")

    write_config(home, repo)
    os.environ.update(home_env(home))
    paths = Paths.from_env()
    cfg = load_collections(paths)[COLLECTION]
    sources = open_sources(cfg)
    full = sources[0].scan()
    db = Store.open(paths.db)
    coll = writes.ensure_collection(db, COLLECTION, "project")
    with db.transaction() as conn:  # the index knows every item (bench shortcut: SQL, not indexing)
        conn.executemany("INSERT INTO items(collection_id, source_type, key, uri, sha256, status, stamp, source) "
                         "VALUES (?, 'code', ?, ?, 'x', 'indexed', ?, 'code')",
                         [(coll, k, s.uri, s.value) for k, s in full.items.items()])
    db.close()
    db = RagResource().store()

    def plan():
        p = plan_sync(db, cfg, sources=sources)
        assert p.empty, f"a no-op rescan found changes: {len(p.new)} new, {len(p.changed)} changed"
        return p

    plan()
    times, _ = timed(plan, repeats)
    res = {"keys": sorted(full.items), "plan": med(times)}
    say(f"   plan_sync() of files + history ({len(full.items):,} items) with every item known: {fmt_times(times)}")
    note(f"the whole no-change work of a sensor tick: {100 * med(times) / cfg.sensor_interval_seconds:.1f}% of the "
         f"{cfg.sensor_interval_seconds} s interval")

    ensure_instance(paths)
    instance = dg.DagsterInstance.get()
    defs, built = build_definitions({COLLECTION: cfg})
    t0 = time.perf_counter()
    add_partitions(instance, built[COLLECTION].partitions.name, res["keys"])
    say(f"   add_partitions() of {len(res['keys']):,} keys (the first index's one-off): {time.perf_counter() - t0:.2f} s")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sensor = defs.get_sensor_def(f"{cfg.safe_name}_sensor")

    def tick():
        data = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, resources={"rag": RagResource()}))
        assert not data.run_requests, data
        return data

    tick()
    times, data = timed(tick, repeats)
    say(f"   sensor evaluation with no changes ({len(res['keys']):,} partitions): {fmt_times(times)}")
    note(f"'{data.skip_message}'; {100 * med(times) / cfg.sensor_interval_seconds:.1f}% of the interval")
    return res


# -- 3. read, parse, chunk (no embedding) ---------------------------------------------------------------------


def section_chunking(repo: Path, keys: list[str], sample: int) -> None:
    from rag_pipelines.chunking.prose import chunk_spec
    from rag_pipelines.sources.git import GitOptions, GitSource
    from rag_search.embedders.builtin import BuiltinEmbedder

    emb = BuiltinEmbedder()
    spec = chunk_spec(emb.max_input_tokens)
    rng = random.Random(3)
    src = GitSource(GitOptions(type="code", path=repo, history_months=6))
    src.scan()
    for kind, pool in (("files", [k for k in keys if not k.startswith("commit/")]),
                       ("commits", [k for k in keys if k.startswith("commit/")])):
        chosen = sorted(rng.sample(pool, min(sample, len(pool))))
        t0 = time.perf_counter()
        loaded = list(src.load(chosen))
        t1 = time.perf_counter()
        chunks = 0
        for item in loaded:
            doc = item.parse()
            chunks += len(item.chunker(doc, emb.count_tokens, spec))
        t2 = time.perf_counter()
        per = (t2 - t0) / len(chosen)
        say(f"   {len(chosen):,} {kind}: read {1000 * (t1 - t0) / len(chosen):.1f} ms/item, parse + chunk "
            f"{1000 * (t2 - t1) / len(chosen):.1f} ms/item; {chunks / len(chosen):.1f} chunks/item "
            f"-> {per * len(pool) / 60:.1f} min for all {len(pool):,}")
    note("no embedding: what reading git and tree-sitter chunking add to a first index, per item")


# -- 4. first index vs embed-only -----------------------------------------------------------------------------


def section_first_index(repo: Path, work: Path, repeats: int) -> None:
    runs = []
    for i in range(repeats):
        home = work / f"index-{i}"
        write_config(home, repo)
        env = home_env(home)
        wall, rss, out = run_measured([str(BIN / "local-rag"), "index", "group", "--history", "--json"], env,
                                      work / f"index-{i}.log")
        summary = json.loads(out)[0]
        e_wall, e_rss, e_out = run_measured([sys.executable, __file__, "--embed-only", str(home / "rag.db")], env,
                                            work / f"embed-{i}.log")
        runs.append({"wall": wall, "rss": rss, "summary": summary, "e_wall": e_wall, "e_rss": e_rss,
                     **json.loads(e_out)})
        say(f"   repeat {i + 1}: index {wall:.1f} s ({rss:.0f} MB peak), embed-only {e_wall:.1f} s ({e_rss:.0f} MB)")
    r = runs[-1]
    items, chunks = r["summary"]["outcomes"].get("indexed", 0), r["chunks"]
    wall, e_wall = med([x["wall"] for x in runs]), med([x["e_wall"] for x in runs])
    e_inner = med([x["embed"] + x["model_load"] for x in runs])
    say(f"   `local-rag index group --history` of {items:,} items ({chunks:,} chunks, {len(r['summary']['run_ids'])} "
        f"Dagster run(s)): {wall:.1f} s wall")
    say(f"   embed-only of the same {chunks:,} chunk texts, fresh process: {e_wall:.1f} s ({e_inner:.1f} s model load "
        f"+ embedding)")
    say(f"   pipeline / embed-only = {wall / e_wall:.2f}x (whole processes); {wall / e_inner:.2f}x against model "
        f"load + embedding alone; the difference is {1000 * (wall - e_inner) / max(items, 1):.0f} ms per item")
    note("the difference = process start-up and imports, git reads, tree-sitter parsing and chunking, token "
         "counting, rag.db writes and Dagster's run and per-partition bookkeeping")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=50_000)
    ap.add_argument("--commits", type=int, default=20_000)
    ap.add_argument("--index-files", type=int, default=100)
    ap.add_argument("--index-commits", type=int, default=50)
    ap.add_argument("--index-repeats", type=int, default=2, help="repeats of section 4 (each embeds everything; "
                    "0 skips it)")
    ap.add_argument("--sample", type=int, default=1000, help="files and commits read and chunked in section 3")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep", action="store_true", help="keep the temporary homes (printed)")
    ap.add_argument("--embed-only", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.embed_only:
        return embed_only_main(args.embed_only)
    work = Path(tempfile.mkdtemp(prefix="code_scale_"))
    say(f"1. repository of {args.files:,} files and {args.commits:,} commits")
    repo = repository(args.files, args.commits)
    tracked = subprocess.run(["git", "-C", str(repo), "ls-files"], capture_output=True).stdout.count(b"\n")
    say(f"   {repo}: {tracked:,} tracked files, working tree {du(repo)} (.git {du(repo / '.git')})")
    say("2. no-op rescan")
    res = section_rescan(repo, work / "home", args.repeats)
    say("3. reading, parsing and chunking a sample (builtin tokenizer, no embedding)")
    section_chunking(repo, res["keys"], args.sample)
    if args.index_repeats:
        say(f"4. first index of {args.index_files:,} files and {args.index_commits:,} commits vs embed-only")
        section_first_index(repository(args.index_files, args.index_commits), work / "first", args.index_repeats)
    if args.keep:
        say(f"kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
