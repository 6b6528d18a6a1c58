"""The judged sets bench/quality.py scores, behind one shape: queries, an index of the set's corpus, a scorer.

- `scifact`: BEIR SciFact *train* split (../shared/eval; the test split is held out and never read here).
- `notes`: the generated notes-like set (bench/notes_set.py).
- every set under bench/sets/ (bench/judged_sets.py): real public corpora with graded judgements, exported
  from a bare git mirror (`--mirror`, default /work/.mirror) at the set's pinned commit.

Each set's corpus is indexed once with `local-rag index project` in its own home under bench/out/<set>[-<variant>]/
(a variant is another embedder config: its own index) and reused while complete.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

HERE = Path(__file__).parent
EVAL = Path(os.environ.get("LOCAL_RAG_EVAL", HERE.parents[1] / "shared" / "eval"))  # a worktree: set it
sys.path.insert(0, str(EVAL))
sys.path.insert(0, str(HERE))

import judged_sets  # noqa: E402
from beir import load_beir, score_run as beir_score  # noqa: E402

EXE = str(Path(sys.executable).with_name("local-rag"))
BEIR_SETS = ("scifact", "notes")


@dataclass
class BenchSet:
    name: str
    queries: dict[str, str]  # query id → text
    docs: Path  # the corpus as files
    score: Callable[[dict[str, list[str]]], dict[str, dict[str, float]]]  # run → {group: {metric: value}}
    doc_of: Callable[[str], str | None]  # a hit's uri → the judged document id (or relative path)
    headline: list[tuple[str, str, str]] = field(default_factory=list)  # (label, group, metric) to print
    ready: Callable[[], None] = lambda: None  # writes the corpus files


def all_set_names() -> list[str]:
    return [*BEIR_SETS, *judged_sets.set_names()]


def load(name: str, mirror: str) -> BenchSet:
    if name in BEIR_SETS:
        return _beir(name)
    return _judged(judged_sets.load_set(name), mirror)


def _beir(name: str) -> BenchSet:
    if name == "scifact":
        ds, root, ext = load_beir(str(EVAL / "data" / "scifact-train")), HERE / "out" / "scifact-train", "txt"
    else:
        from notes_set import build_notes

        root, ext = HERE / "out" / "notes", "md"
        ds = build_notes(root)
    docs = root / "docs"

    def ready() -> None:
        docs.mkdir(parents=True, exist_ok=True)
        if len(list(docs.glob(f"*.{ext}"))) == len(ds.doc_ids):
            return
        for d in ds.doc_ids:
            doc = ds.corpus[d]
            body = doc["text"].strip()
            text = body if ext == "md" else doc["title"].strip() + "\n\n" + body
            (docs / f"{d}.{ext}").write_text(text + "\n", encoding="utf-8")

    def score(run: dict[str, list[str]]) -> dict[str, dict[str, float]]:
        return {"all": {"queries": len(run), **beir_score(run, {q: ds.qrels[q] for q in run})}}

    return BenchSet(name, dict(ds.queries), docs, score, lambda uri: Path(uri.split("#")[0]).stem,
                    [("nDCG@10", "all", "ndcg@10")], ready)


def _judged(js: judged_sets.JudgedSet, mirror: str) -> BenchSet:
    docs = HERE / "out" / js.meta.get("same_corpus_as", js.name) / "docs"  # a set of questions over another's corpus
    groups = {q.id: ["all", "en" if q.lang == "en" else "other", q.kind] + (["named"] if q.named else [])
              + ([f"form:{q.form}"] if q.form else []) for q in js.queries}

    def ready() -> None:
        marker = docs / ".exported"
        if not marker.exists():
            judged_sets.export_corpus(js, mirror, docs)
            marker.write_text(js.meta["commit"])

    def score(run: dict[str, list[str]]) -> dict[str, dict[str, float]]:
        per = {q.id: judged_sets.score_query(run[q.id], q.judgements) for q in js.queries if q.id in run}
        out: dict[str, dict[str, float]] = {}
        for qid, gs in ((q, g) for q, g in groups.items() if q in per):  # the queries the run answered
            for g in gs:
                row = out.setdefault(g, {"queries": 0, **{m: 0.0 for m in judged_sets.METRICS}})
                row["queries"] += 1
                for m in judged_sets.METRICS:
                    row[m] += per[qid][m]
        return {g: {k: (v / r["queries"] if k != "queries" else v) for k, v in r.items()} for g, r in out.items()}

    root = docs.resolve()

    def doc_of(uri: str) -> str | None:
        try:
            return Path(uri.split("#")[0]).resolve().relative_to(root).as_posix()
        except ValueError:
            return None

    langs = {q.lang for q in js.queries}
    own = "en" in langs and any(q.kind != "other-language" for q in js.queries)
    head = [("nDCG@5", "en", "ndcg@5"), ("Hit@1", "en", "hit@1")] if own else \
        [("nDCG@5", "all", "ndcg@5"), ("Hit@1", "all", "hit@1"), ("Hit@3", "all", "hit@3")]
    if any(q.kind == "other-language" for q in js.queries) and own:
        head += [("other-lang nDCG@5", "other-language", "ndcg@5"), ("other-lang Hit@3", "other-language", "hit@3")]
    return BenchSet(js.name, {q.id: q.text for q in js.queries}, docs, score, doc_of, head, ready)


def ensure_index(bench: BenchSet, variant: str = "", config: str | None = None, rebuild: bool = False) -> Path:
    """The set's corpus indexed by `local-rag index project` in its own home (reused when complete)."""
    bench.ready()
    root = bench.docs.parent
    home = (root if not variant else root.with_name(f"{root.name}-{variant}")) / "home"
    if rebuild and home.exists():
        shutil.rmtree(home)
    files = sum(1 for p in bench.docs.rglob("*") if p.is_file() and not p.name.startswith("."))
    if (home / "rag.db").exists() and _indexed(home / "rag.db") >= files:
        return home
    home.mkdir(parents=True, exist_ok=True)
    if config:
        (home / "config.yaml").write_text(config, encoding="utf-8")
    env = {**os.environ, "LOCAL_RAG_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")}
    for k in ("LOCAL_RAG_DB", "LOCAL_RAG_CONFIG"):
        env.pop(k, None)
    t0 = time.perf_counter()
    print(f"{bench.name}{'/' + variant if variant else ''}: indexing {files} files with `local-rag index project` "
          "(once) ...", flush=True)
    proc = subprocess.run([EXE, "index", "project", bench.name.replace("-", "_"), str(bench.docs.resolve())],
                          env=env)
    if proc.returncode not in (0, 6):
        raise SystemExit(f"indexing {bench.name} failed (exit {proc.returncode})")
    print(f"  indexed in {time.perf_counter() - t0:.0f} s", flush=True)
    return home


def _indexed(db: Path) -> int:
    from rag_search.store import Store

    with Store.open(db) as store:  # applies pending migrations
        return store.conn.execute("SELECT count(*) FROM items WHERE status IN ('indexed', 'failed')").fetchone()[0]
