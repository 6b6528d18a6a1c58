"""Hit@3 of the fixture eval (tests/fixtures/eval_corpus.yaml) per search mode and query kind, real model.

    python bench/eval.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))


def main() -> None:
    from conftest import add_doc
    from test_eval import CORPUS, hit_at_3

    from rag_search.embedders.builtin import BuiltinEmbedder
    from rag_search.retrieval import SearchEngine
    from rag_search.store import Store

    store, emb = Store.open(Path(tempfile.mkdtemp()) / "rag.db"), BuiltinEmbedder()
    for key, text in CORPUS["docs"].items():
        add_doc(store, emb, "eval", key, text, title=key.removesuffix(".md").replace("-", " "))
    engine = SearchEngine(store, emb)
    print(f"{len(CORPUS['docs'])} documents, {len(CORPUS['queries'])} queries; Hit@3 by query kind")
    for mode in ("keyword", "semantic", "hybrid"):
        scores, _ = hit_at_3(engine, mode)
        print(f"  {mode:<9} " + "  ".join(f"{k} {v:.2f}" for k, v in sorted(scores.items())))


if __name__ == "__main__":
    main()
