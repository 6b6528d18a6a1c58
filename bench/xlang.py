"""The cross-language set: every judged question in another language than its corpus (bench/sets: dendron's and
foam's questions in 8 languages over English notes, vue-zh-en's English questions over Chinese docs), scored with the
multilingual embedder's indexes (`python bench/quality.py --config e5.yaml --variant e5` builds them), three ways:

- `cli before`: the query embedded as a passage ("passage: "), as `local-rag search --json` and MCP did before
  issue 35, with fusion giving the keyword side its full weight;
- `query prefix`: the query embedded as a query ("query: "), fusion as before;
- `scaled fusion`: the query prefix and the keyword sides scaled by the share of the query's words the index holds
  (retrieval/unmatched.py), no pin for a foreign word (the first pass of issue 35);
- `product`: that, and the float similarities taken around e5's centre (store/vectors.ranking_query: the query minus
  the centre), what ships. The three rows before it rank by the raw cosine.

Each set's index is the product's (`--variant e5`: Markdown's inline HTML read as its text); `--variant e5pre` names
an index built before that (kept by hand) to measure it.

    python bench/xlang.py [--variant e5] [--sets dendron,foam,vue-zh-en] [--modes hybrid,semantic]
"""

from __future__ import annotations

import argparse
from unittest import mock

import quality_sets as qs
from quality import engine_for

from rag_search.retrieval import SearchRequest, unmatched, vector
from rag_search.store import vectors

HOW = ("cli before", "query prefix", "scaled fusion", "product")


def run(bench: qs.BenchSet, engine, qids: list[str], how: str, mode: str = "hybrid") -> dict[str, list[str]]:
    out = {}
    raw = (lambda query, centre: query) if how != "product" else vectors.ranking_query
    for q in qids:
        text = bench.queries[q]
        vec = engine.embedder.embed_documents([text])[0] if how == "cli before" else None
        with mock.patch.object(vector, "ranking_query", raw), mock.patch.object(vectors, "ranking_query", raw), \
                mock.patch.object(unmatched, "found_share", return_value=1.0) if how in HOW[:2] else _nothing():
            hits = engine.search(SearchRequest(text, top_k=10, mode=mode, query_vector=vec)).hits
        out[q] = list(dict.fromkeys(d for d in (bench.doc_of(h.uri) for h in hits) if d))
    return out


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variant", default="e5")
    ap.add_argument("--sets", default="dendron,foam,vue-zh-en")
    ap.add_argument("--mirror", default="/work/.mirror")
    ap.add_argument("--modes", default="hybrid")
    a = ap.parse_args()
    import judged_sets

    totals: dict[str, list[dict]] = {}
    print("| set | questions | mode | ranking | nDCG@5 | Hit@1 | Hit@3 |\n|---|---|---|---|---|---|---|")
    for name in a.sets.split(","):
        bench = qs.load(name, a.mirror)
        home = qs.ensure_index(bench, a.variant, (qs.HERE / "out" / "e5.yaml").read_text() if a.variant.startswith("e5")
                               else None)
        engine = engine_for(home)
        js = judged_sets.load_set(name)
        qids = [q.id for q in js.queries if q.kind == "other-language"]
        judg = {q.id: q.judgements for q in js.queries}
        for mode in a.modes.split(","):
            for how in HOW:
                per = [judged_sets.score_query(r, judg[q]) for q, r in run(bench, engine, qids, how, mode).items()]
                totals.setdefault((mode, how), []).extend(per)
                print(f"| {name} | {len(per)} | {mode} | {how} | " + " | ".join(
                    f"{sum(p[m] for p in per) / len(per):.3f}" for m in ("ndcg@5", "hit@1", "hit@3")) + " |", flush=True)
    for (mode, how), per in totals.items():
        print(f"| all | {len(per)} | {mode} | {how} | " + " | ".join(
            f"{sum(p[m] for p in per) / len(per):.3f}" for m in ("ndcg@5", "hit@1", "hit@3")) + " |")


if __name__ == "__main__":
    main()
