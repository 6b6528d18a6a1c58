"""The multilingual embedder's sign-bit centre: the mean passage vector of a generic sample, none of it judged.

    python bench/e5_centre.py [--mirror /work/.mirror] [--per-source 400] [--write]

multilingual-e5-small's vectors lie in a narrow cone (unrelated texts at cosine ~0.8), so their sign bits are
nearly the same for every text; the index takes them of the vector minus this centre (store/vectors.py). The
sample: paragraphs of two public notes vaults (obsidian-hub, nikitavoloboev/knowledge), docstrings of installed
packages (bench/docstrings.py), and the UI messages of Calibre-Web-Automated's 28 translations (grouped by 8)
— English prose and code docs plus short text in 28 languages; the evaluation sets (SciFact, notes, dendron,
vue-zh) are left out so bench/vector_recall.py measures the centre on text it was not made from. Prints each
source's mean and their cosines; --write puts the centre into rag_search/embedders/centres.py.
"""

from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path

import numpy as np
from docstrings import docstrings

from rag_search.embedders.multilingual import MultilingualEmbedder

OUT = Path(__file__).parent / "out"
CENTRES = Path(__file__).parents[1] / "rag_search" / "embedders" / "centres.py"


def git_files(mirror: Path, repo: str, pattern: str) -> list[tuple[str, str]]:
    git = ["git", "-C", str(mirror / repo / "repo")]
    names = [n for n in subprocess.run([*git, "ls-tree", "-r", "--name-only", "HEAD"], capture_output=True,
                                       text=True, check=True).stdout.splitlines() if re.search(pattern, n)]
    return [(n, subprocess.run([*git, "show", f"HEAD:{n}"], capture_output=True).stdout.decode("utf-8", "replace"))
            for n in names]


def paragraphs(mirror: Path, repo: str, n: int) -> list[str]:
    out = []
    for name, text in git_files(mirror, repo, r"^(?!\.github/).*\.md$"):
        for para in re.split(r"\n\s*\n", text):
            words = para.split()
            if len(words) >= 15 and not para.lstrip().startswith(("---", "```", "|")):
                out.append(" ".join(words[:300]))
        if len(out) >= n:
            break
    return out[:n]


def translations(mirror: Path, n: int) -> list[str]:
    groups = []
    for _, po in git_files(mirror, "crocodilestick+Calibre-Web-Automated", r"LC_MESSAGES/messages\.po$"):
        found = re.findall(r'msgstr ((?:"(?:[^"\\]|\\.)*"\s*)+)', po)
        messages = [m for m in ("".join(re.findall(r'"((?:[^"\\]|\\.)*)"', f)) for f in found) if len(m) > 3]
        groups += [" ".join(messages[i : i + 8]) for i in range(8, len(messages), 8 * 20)]  # ~every 20th group
    return groups[:n]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mirror", default="/work/.mirror")
    ap.add_argument("--per-source", type=int, default=400)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    mirror, n = Path(args.mirror), args.per_source
    sources = {"obsidian-hub notes": paragraphs(mirror, "obsidian-community+obsidian-hub", n),
               "knowledge notes": paragraphs(mirror, "nikitavoloboev+knowledge", n),
               "docstrings": docstrings(n), "28 translations": translations(mirror, n)}
    emb, means = MultilingualEmbedder(), {}
    OUT.mkdir(exist_ok=True)
    for name, texts in sources.items():
        cache = OUT / f"e5-centre-{re.sub(r'[^a-z0-9]+', '-', name)}-{len(texts)}.npy"
        vecs = np.load(cache) if cache.exists() else emb.embed_documents(texts)
        np.save(cache, vecs)
        means[name] = vecs.mean(axis=0)
        print(f"{name}: {len(texts)} texts, |mean| {np.linalg.norm(means[name]):.3f}, mean pairwise cosine "
              f"{float(((vecs @ vecs.T).sum() - len(vecs)) / (len(vecs) ** 2 - len(vecs))):.3f}")
    names = list(means)
    unit = {k: v / np.linalg.norm(v) for k, v in means.items()}
    for i, a in enumerate(names):
        print("  cosine of means: " + a + ": " + ", ".join(f"{b} {float(unit[a] @ unit[b]):.3f}" for b in names[i + 1 :]))
    centre = np.mean([means[k] for k in names], axis=0).astype(np.float32)  # each source weighs the same
    print(f"centre: |c| {np.linalg.norm(centre):.3f}")
    if args.write:
        write(centre)


def write(centre: np.ndarray) -> None:
    text = CENTRES.read_text(encoding="utf-8")
    rows = [", ".join(f"{v:.5f}" for v in centre[i : i + 10]) for i in range(0, len(centre), 10)]
    body = "E5_SMALL = (\n" + "".join(f"    {r},\n" for r in rows) + ")"
    CENTRES.write_text(re.sub(r"E5_SMALL = \((.|\n)*?\n\)", lambda _: body, text, count=1), encoding="utf-8")
    print(f"wrote {CENTRES}")


if __name__ == "__main__":
    main()
