"""Judged retrieval sets over real public corpora (bench/sets/<name>/): load them, export their corpus, score rankings.

Each set is a folder with `set.json` (repository, pinned commit, licence, sub-folder and file patterns of the corpus)
and `queries.jsonl`, one query a line: {"id", "query", "kind", "lang", "named"?, "judgements": {"rel/path.md": 2|1}}
(2 = answers the query, 1 = partial). The corpus itself is not committed: it is exported from a bare git mirror
(<mirror>/<owner>+<name>/repo, as the `search` tool's fetch makes it) at the pinned commit.

    python bench/judged_sets.py list
    python bench/judged_sets.py export dendron --mirror /work/.mirror --out /tmp/dendron
    python bench/judged_sets.py run dendron --mirror /work/.mirror --work /tmp/dendron-run   # export, index, search, score

`run` does what a user does: `local-rag index project NAME FOLDER` in its own LOCAL_RAG_HOME, then
`local-rag search QUERY --json --top 10 --mode M` per query and mode. Scores per kind and overall (and for the
queries flagged `named`): nDCG@5 and nDCG@10 with graded gains (2 and 1), MRR@10, Hit@1, Hit@3 (a hit is a page
judged 1 or 2). Standard library only.
"""

from __future__ import annotations

import argparse
import fnmatch
import io
import json
import math
import os
import subprocess
import sys
import tarfile
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

SETS_DIR = Path(__file__).parent / "sets"
KINDS = ("keyword", "conceptual", "syntax", "other-language")
METRICS = ("ndcg@5", "ndcg@10", "mrr@10", "hit@1", "hit@3")
MODES = ("hybrid", "keyword", "semantic")


class SetError(ValueError):
    """A judged set that cannot be used as it is (the message says what to fix)."""


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    kind: str
    lang: str
    judgements: dict[str, int]
    named: bool = False
    form: str = ""  # task (how do I ...), concept (a 1-3 word concept), question; "" when not said


@dataclass
class JudgedSet:
    name: str
    meta: dict
    queries: list[Query] = field(default_factory=list)


# -- loading ------------------------------------------------------------------------------------

def set_names() -> list[str]:
    return sorted(p.parent.name for p in SETS_DIR.glob("*/set.json"))


def load_set(name_or_dir: str | Path) -> JudgedSet:
    """A set by name (a folder under bench/sets/) or by folder path, its queries checked."""
    folder = Path(name_or_dir)
    if not (folder / "set.json").exists():
        folder = SETS_DIR / str(name_or_dir)
    if not (folder / "set.json").exists():
        raise SetError(f"no judged set '{name_or_dir}': expected {folder}/set.json; known sets: {', '.join(set_names())}")
    meta = json.loads((folder / "set.json").read_text(encoding="utf-8"))
    lines = (folder / meta.get("queries", "queries.jsonl")).read_text(encoding="utf-8").splitlines()
    queries = [parse_query(line, f"{folder.name}/queries.jsonl:{n}") for n, line in enumerate(lines, 1) if line.strip()]
    ids = [q.id for q in queries]
    if len(set(ids)) != len(ids):
        raise SetError(f"{folder.name}: duplicate query ids {sorted({i for i in ids if ids.count(i) > 1})}; make them unique")
    return JudgedSet(meta.get("name", folder.name), meta, queries)


def parse_query(line: str, where: str) -> Query:
    try:
        row = json.loads(line)
        q = Query(str(row["id"]), row["query"], row["kind"], row["lang"], dict(row["judgements"]), bool(row.get("named")),
                  str(row.get("form", "")))
    except (ValueError, KeyError, TypeError) as e:
        raise SetError(f"{where}: not a query line ({e!r}); each line needs id, query, kind, lang, judgements") from e
    if q.kind not in KINDS:
        raise SetError(f"{where}: kind '{q.kind}' is not one of {', '.join(KINDS)}")
    if not q.judgements or any(g not in (1, 2) for g in q.judgements.values()):
        raise SetError(f"{where}: judgements must map at least one path to 2 (answers) or 1 (partial)")
    return q


# -- exporting the corpus -------------------------------------------------------------------------

def mirror_git_dir(mirror: str | Path, repository: str) -> Path:
    return Path(mirror) / repository.replace("/", "+") / "repo"


def export_corpus(js: JudgedSet, mirror: str | Path, dest: str | Path) -> list[str]:
    """Write the set's corpus at its pinned commit into dest (sub-folder prefix stripped); the relative paths written."""
    meta = js.meta
    git_dir = mirror_git_dir(mirror, meta["repository"])
    if not git_dir.is_dir():
        raise SetError(f"no mirror of {meta['repository']} at {git_dir}: fetch it first ({meta.get('fetch', '')})")
    subdir = meta.get("subdir", "").strip("/")
    # only the included files: a mirror may lack large blobs (images) the corpus does not need
    specs = [f":(glob){subdir + '/' if subdir else ''}{pre}{pat}" for pat in meta.get("include", ["*"])
             for pre in ("", "**/")]
    archive = subprocess.run(["git", "--git-dir", str(git_dir), "archive", "--format=tar", meta["commit"], "--", *specs],
                             capture_output=True)
    if archive.returncode != 0:
        raise SetError(f"git archive of {meta['repository']}@{meta['commit'][:12]} failed: "
                       f"{archive.stderr.decode(errors='replace').strip()} (is the mirror older than the pinned commit?)")
    written = _extract(archive.stdout, subdir, meta.get("include", ["*"]), Path(dest))
    missing = sorted({p for q in js.queries for p in q.judgements} - set(written))
    if missing:
        raise SetError(f"{js.name}: judged pages missing from the export: {missing[:5]}; check the set's paths")
    return written


def _extract(tar_bytes: bytes, subdir: str, include: list[str], dest: Path) -> list[str]:
    written = []
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
        for member in tar.getmembers():
            rel = member.name[len(subdir) + 1:] if subdir else member.name
            if not member.isfile() or not any(fnmatch.fnmatch(rel, pat) for pat in include):
                continue
            if Path(rel).is_absolute() or ".." in Path(rel).parts:
                raise SetError(f"archive member {member.name!r} would be written outside {dest}; not exporting it")
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(tar.extractfile(member).read())
            written.append(rel)
    return sorted(written)


# -- mapping hits to judged paths ------------------------------------------------------------------

def hit_path(hit: dict, root: str | Path) -> str | None:
    """The hit's document as a path relative to the exported folder (None when it is not under it)."""
    uri = str(hit.get("uri") or hit.get("path") or "")
    if uri.startswith("file://"):
        uri = urllib.parse.unquote(urllib.parse.urlparse(uri).path)
    path = Path(uri.split("#")[0])
    if not path.is_absolute():
        return path.as_posix() or None
    try:
        return path.resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return None


def ranked_paths(hits: list[dict], root: str | Path) -> list[str]:
    """Hits' documents best-first, several chunks of one document collapsed to its best rank."""
    return list(dict.fromkeys(p for p in (hit_path(h, root) for h in hits) if p))


# -- metrics ---------------------------------------------------------------------------------------

def ndcg(ranked: list[str], judgements: dict[str, int], k: int) -> float:
    """nDCG@k with linear graded gains (a page judged 2 gains 2, judged 1 gains 1)."""
    dcg = sum(judgements.get(p, 0) / math.log2(i + 2) for i, p in enumerate(ranked[:k]))
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(sorted(judgements.values(), reverse=True)[:k]))
    return dcg / ideal if ideal else 0.0


def first_hit(ranked: list[str], judgements: dict[str, int]) -> int | None:
    """1-based rank of the first page judged 1 or 2."""
    return next((i for i, p in enumerate(ranked, 1) if judgements.get(p, 0) > 0), None)


def score_query(ranked: list[str], judgements: dict[str, int]) -> dict[str, float]:
    rank = first_hit(ranked, judgements)
    return {"ndcg@5": ndcg(ranked, judgements, 5), "ndcg@10": ndcg(ranked, judgements, 10),
            "mrr@10": 1.0 / rank if rank and rank <= 10 else 0.0,
            "hit@1": float(rank == 1), "hit@3": float(bool(rank) and rank <= 3)}


def score_run(js: JudgedSet, run: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    """Mean metrics per kind, for the `named` queries and overall ("all"); a query missing from run scores 0."""
    per_query = {q.id: score_query(run.get(q.id, []), q.judgements) for q in js.queries}
    groups: dict[str, list[str]] = {}
    for q in js.queries:
        for g in (q.kind, "named" if q.named else None, "all"):
            if g:
                groups.setdefault(g, []).append(q.id)
    order = [k for k in (*KINDS, "named", "all") if k in groups]
    return {g: {"queries": len(groups[g]), **{m: sum(per_query[i][m] for i in groups[g]) / len(groups[g])
                                               for m in METRICS}} for g in order}


def format_table(scores: dict[str, dict[str, dict[str, float]]]) -> str:
    """Markdown table: one row per (mode, group)."""
    lines = ["| mode | queries | n | " + " | ".join(METRICS) + " |", "|---|---|---|" + "---|" * len(METRICS)]
    for mode, groups in scores.items():
        for group, r in groups.items():
            lines.append(f"| {mode} | {group} | {r['queries']} | " + " | ".join(f"{r[m]:.3f}" for m in METRICS) + " |")
    return "\n".join(lines)


# -- running the product as a user would -------------------------------------------------------------

def product_env(home: Path) -> dict[str, str]:
    return {**os.environ, "LOCAL_RAG_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")}


def local_rag() -> str:
    exe = Path(sys.executable).with_name("local-rag")
    return str(exe) if exe.exists() else "local-rag"


def index_folder(name: str, folder: Path, home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    subprocess.run([local_rag(), "index", "project", name, str(folder)], env=product_env(home), check=True)


def search_cli(query: str, mode: str, home: Path, top: int = 10) -> list[dict]:
    out = subprocess.run([local_rag(), "search", "--json", "--top", str(top), "--mode", mode, "--", query],
                         env=product_env(home), capture_output=True, text=True)
    if out.returncode != 0:
        print(f"[warn] search exit {out.returncode} for {query!r}: {out.stderr.strip()[:300]}", file=sys.stderr)
        return []
    return json.loads(out.stdout)["hits"]


def run_set(js: JudgedSet, corpus: Path, home: Path, modes: tuple[str, ...]) -> dict:
    """{mode: {query id: [relative paths best-first]}} through `local-rag search --json`."""
    return {mode: {q.id: ranked_paths(search_cli(q.text, mode, home), corpus) for q in js.queries} for mode in modes}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=("list", "export", "run"))
    ap.add_argument("set", nargs="?")
    ap.add_argument("--mirror", default="/work/.mirror", help="folder of <owner>+<name>/repo bare git mirrors")
    ap.add_argument("--out", help="export: folder to write the corpus into")
    ap.add_argument("--work", help="run: folder for the corpus (docs/), the product's home (home/) and results")
    ap.add_argument("--modes", default=",".join(MODES))
    a = ap.parse_args(argv)
    if a.command == "list":
        for name in set_names():
            js = load_set(name)
            print(f"{name}: {len(js.queries)} queries over {js.meta['repository']}@{js.meta['commit'][:12]} "
                  f"({js.meta['licence']})")
        return
    if not a.set or not (a.out or a.work):
        ap.error("export needs SET and --out; run needs SET and --work")
    js = load_set(a.set)
    if a.command == "export":
        print(f"wrote {len(export_corpus(js, a.mirror, a.out))} files to {a.out}")
        return
    _run(js, a.mirror, Path(a.work), tuple(a.modes.split(",")))


def _run(js: JudgedSet, mirror: str, work: Path, modes: tuple[str, ...]) -> None:
    docs, home = work / "docs", work / "home"
    print(f"exported {len(export_corpus(js, mirror, docs))} files to {docs}", flush=True)
    index_folder(js.name, docs, home)
    runs = run_set(js, docs, home, modes)
    scores = {mode: score_run(js, run) for mode, run in runs.items()}
    (work / "runs.json").write_text(json.dumps(runs, indent=1, ensure_ascii=False), encoding="utf-8")
    (work / "scores.json").write_text(json.dumps(scores, indent=1), encoding="utf-8")
    print(format_table(scores))


if __name__ == "__main__":
    try:
        main()
    except SetError as e:
        sys.exit(f"error: {e}")
