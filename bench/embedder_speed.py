"""Builtin embedder throughput: tokens/s and chunks/s on real prose, our settings vs a plain baseline.

    python bench/embedder_speed.py [--chunks 256] [--repeats 3] [--model all-MiniLM-L6-v2|multilingual-e5-small]
                                   [--tokens 240] [--cpu]

Chunks are real docstrings packed to about --tokens of the model's tokens (240: the size the chunker aims for
with MiniLM; it makes 400 with multilingual-e5-small) plus a tail of shorter ones, as a vault produces.
all-MiniLM-L6-v2: baseline = onnxruntime defaults, batches of 8 in input order; the shipped model as local-rag
used it before, and the derived per-channel int8 model (embedders/derived_model.py) used now, with the cosine of
their vectors: one run at a time on all cores' intra-op threads (before) vs one-thread runs on every core at once
(now). multilingual-e5-small (e5_variants.py): the derived per-channel int8 model (used) vs the exact 4-bit graph
(MatMulNBits), one-thread runs on every core at once, and one run on all cores. Then, in a fresh process, the
resident memory of the embedder as used: loaded, after embedding the chunks, and its peak. --cpu: only chunks per
CPU-second of both models on one thread, the same docstrings packed for each (the ratio to trust when loaded).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from docstrings import docstrings

from rag_search.embedders.base import l2_normalise
from rag_search.embedders.builtin import MODEL_FILE, BuiltinEmbedder, packaged_file


def make_chunks(emb, n: int, size: int = 240) -> list[str]:
    texts, chunks, buf = docstrings(4 * n), [], ""
    for t in texts:
        candidate = (buf + " " + t).strip()
        if emb.count_tokens(candidate) > size:
            chunks.append(buf or t)
            buf = t
        else:
            buf = candidate
        if len(chunks) >= n:
            break
    rng = np.random.default_rng(0)
    short = int(n * 0.3)  # a third are short: last chunks of notes, small notes
    for i in rng.choice(len(chunks), size=short, replace=False):
        words = chunks[i].split()
        chunks[i] = " ".join(words[: int(rng.integers(10, 80))])
    return chunks


def baseline(chunks: list[str], emb: BuiltinEmbedder) -> float:
    import onnxruntime as ort

    session = ort.InferenceSession(str(packaged_file(*MODEL_FILE)), providers=["CPUExecutionProvider"])
    t0 = time.perf_counter()
    for i in range(0, len(chunks), 8):
        enc = emb._tokenizer.encode_batch(chunks[i : i + 8])
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        (h,) = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})
        w = mask[:, :, None]
        l2_normalise((h * w).sum(1) / w.sum(1))
    return time.perf_counter() - t0


def one_run_on_all_threads() -> BuiltinEmbedder:
    """The derived model as it ran before: one run at a time, onnxruntime's intra-op threads on every core."""
    import os

    import onnxruntime as ort

    emb = BuiltinEmbedder(threads=1)
    emb.embed_query("load")
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    opts.intra_op_num_threads = os.cpu_count() or 1
    opts.inter_op_num_threads = 1
    emb.__dict__["_session"] = ort.InferenceSession(str(emb.model_path), sess_options=opts,
                                                   providers=["CPUExecutionProvider"])
    return emb


def ours(chunks: list[str], emb: BuiltinEmbedder) -> float:
    t0 = time.perf_counter()
    emb.embed_documents(chunks)
    return time.perf_counter() - t0


def query_p50(e, chunks: list[str]) -> float:
    q = []
    for c in chunks[:64]:
        t0 = time.perf_counter()
        e.embed_query(" ".join(c.split()[:8]))
        q.append(time.perf_counter() - t0)
    return statistics.median(q) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--model", default="all-MiniLM-L6-v2", choices=["all-MiniLM-L6-v2", "multilingual-e5-small"])
    ap.add_argument("--tokens", type=int, default=240, help="chunk size in the model's tokens")
    ap.add_argument("--rss", action="store_true", help="only the memory figures of the embedder as used")
    ap.add_argument("--cpu", action="store_true", help="only chunks per CPU-second of both builtin models, one thread")
    args = ap.parse_args()
    if args.rss:
        return memory(args)
    if args.cpu:
        return per_cpu_second(args)
    if args.model == "multilingual-e5-small":
        from e5_variants import e5_speed

        e5_speed(args)
    else:
        minilm(args)
    rss = subprocess.run([sys.executable, __file__, "--rss", "--model", args.model, "--chunks", str(args.chunks),
                          "--tokens", str(args.tokens)], capture_output=True, text=True, check=True).stdout
    print(rss, end="")


def used_embedder(model: str, **kw):
    if model == "multilingual-e5-small":
        from rag_search.embedders.multilingual import MultilingualEmbedder

        return MultilingualEmbedder(**kw)
    return BuiltinEmbedder(**kw)


def per_cpu_second(args) -> None:
    """Chunks per CPU-second of each builtin model as used, on one thread, over the same texts (packed to --tokens
    of each model's own tokens): process CPU time, so a loaded machine changes it far less than wall time."""
    for model in ("all-MiniLM-L6-v2", "multilingual-e5-small"):
        emb = used_embedder(model, threads=1)
        chunks = make_chunks(emb, args.chunks, args.tokens)
        emb.embed_documents(chunks[:4])
        runs = []
        for _ in range(args.repeats):
            t0 = time.process_time()
            emb.embed_documents(chunks)
            runs.append(time.process_time() - t0)
        cpu = statistics.median(runs)
        print(f"  {model:<24} {len(chunks)} chunks  {len(chunks) / cpu:6.1f} chunks per CPU-second  "
              f"(median of {args.repeats})", flush=True)


def memory(args) -> None:
    """Resident memory (VmRSS / VmHWM) of the embedder as local-rag uses it, in this fresh process."""
    def mb(key: str) -> int:
        return int(Path("/proc/self/status").read_text().split(f"{key}:")[1].split()[0]) // 1024

    base = mb("VmRSS")
    emb = used_embedder(args.model)
    t0 = time.perf_counter()
    emb.embed_query("load")
    load = time.perf_counter() - t0
    loaded = mb("VmRSS")
    emb.embed_documents(make_chunks(emb, args.chunks, args.tokens))
    print(f"  memory ({args.model}, fresh process): interpreter {base} MB; loaded {loaded} MB (load + first query "
          f"{load:.1f} s); after {args.chunks} chunks {mb('VmRSS')} MB; peak {mb('VmHWM')} MB")


def minilm(args) -> None:
    emb = BuiltinEmbedder()
    chunks = make_chunks(emb, args.chunks, args.tokens)
    tokens = sum(min(emb.count_tokens(c) + 2, 256) for c in chunks)
    print(f"{len(chunks)} chunks, {tokens} word-pieces (mean {tokens / len(chunks):.0f}); median of {args.repeats} runs")
    shipped = BuiltinEmbedder(batch_size=4, shipped_only=True)  # what local-rag used before the derived model
    variants = [("baseline (ort defaults, batch 8, input order)", None),
                ("shipped model, batch 4, length-sorted (before)", shipped),
                ("shipped model, batch 1", BuiltinEmbedder(batch_size=1, shipped_only=True)),
                ("derived per-channel int8, batch 1, one run on all cores (before)", one_run_on_all_threads()),
                (f"derived per-channel int8, batch {emb.batch_size}, {emb.threads} one-thread runs at once (now)", emb),
                ("derived per-channel int8, batch 4", BuiltinEmbedder(batch_size=4))]
    vecs = {}
    for name, e in variants:
        if e is None:
            secs = statistics.median(baseline(chunks, shipped) for _ in range(args.repeats))
        else:
            e.embed_documents(chunks[:8])
            secs = statistics.median(ours(chunks, e) for _ in range(args.repeats))
            vecs[name] = e.embed_documents(chunks)
        extra = f"  query p50 {query_p50(e, chunks):5.2f} ms" if e is not None else ""
        print(f"  {name:<72} {len(chunks) / secs:6.1f} chunks/s  {tokens / secs:8.0f} tokens/s{extra}", flush=True)
    ref = vecs[variants[1][0]]
    for name, v in vecs.items():
        cos = (ref * v).sum(axis=1)
        print(f"  cosine to the shipped model's vectors, {name:<72} mean {cos.mean():.4f}  min {cos.min():.4f}")


if __name__ == "__main__":
    main()
