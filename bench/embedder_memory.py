"""Builtin embedder sessions: resident memory at load, peak while embedding, batch and single-query speed.

    python bench/embedder_memory.py

Each setting runs in a fresh process (ru_maxrss is a high-water mark): the shipped session (BASIC graph
optimisation, constant folding on) and the same without constant folding (int8 weights stay int8 at load).
"""

from __future__ import annotations

import json
import subprocess
import sys

CHILD = r"""
import json, resource, statistics, sys, time
from rag_search.embedders.builtin import BuiltinEmbedder
rss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
import onnxruntime as ort
from rag_search.embedders import builtin
emb = BuiltinEmbedder()
before = rss()
if sys.argv[1] == "1":
    o = ort.SessionOptions(); o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    o.inter_op_num_threads = 1
    emb.__dict__["_session"] = ort.InferenceSession(str(builtin.packaged_file(*builtin.MODEL_FILE)), sess_options=o,
        providers=["CPUExecutionProvider"], disabled_optimizers=["ConstantFolding"])
emb._session; loaded = rss()
texts = [" ".join(["word"] * 200)] * 64
emb.embed_documents(texts[:4])
t0 = time.perf_counter(); emb.embed_documents(texts); batch = time.perf_counter() - t0
emb.embed_query("warm up")
q = []
for _ in range(20):
    t0 = time.perf_counter(); emb.embed_query("how do we roll back the kube-proxy upgrade"); q.append(time.perf_counter() - t0)
print(json.dumps({"load_mb": loaded - before, "peak_mb": rss(), "chunks_per_s": len(texts) / batch,
                  "query_ms": 1000 * statistics.median(q)}))
"""


def main() -> None:
    for label, flag in (("without constant folding", "1"), ("shipped (constant folding)", "0")):
        out = subprocess.run([sys.executable, "-c", CHILD, flag], check=True, capture_output=True, text=True)
        r = json.loads(out.stdout)
        print(f"{label:<36} load +{r['load_mb']} MB, peak {r['peak_mb']} MB, {r['chunks_per_s']:.1f} chunks/s "
              f"(200-word texts), one query {r['query_ms']:.0f} ms")


if __name__ == "__main__":
    main()
