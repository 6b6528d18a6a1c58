"""Builtin embedder throughput: tokens/s and chunks/s on real prose, our settings vs a plain baseline.

    python bench/embedder_speed.py [--chunks 256] [--repeats 3]

Chunks are real docstrings packed to about 240 word-pieces (the size the chunker aims for) plus a
tail of shorter ones, as a vault produces. Baseline = onnxruntime defaults, batches of 8 in input
order; ours = BuiltinEmbedder as shipped (length-sorted batches, graph optimisation, all cores).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from docstrings import docstrings

from rag_search.embedders.base import l2_normalise
from rag_search.embedders.builtin import MODEL_FILE, BuiltinEmbedder, packaged_file


def make_chunks(emb: BuiltinEmbedder, n: int) -> list[str]:
    texts, chunks, buf = docstrings(4 * n), [], ""
    for t in texts:
        candidate = (buf + " " + t).strip()
        if emb.count_tokens(candidate) > 240:
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


def ours(chunks: list[str], emb: BuiltinEmbedder) -> float:
    t0 = time.perf_counter()
    emb.embed_documents(chunks)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    emb = BuiltinEmbedder()
    chunks = make_chunks(emb, args.chunks)
    tokens = sum(min(emb.count_tokens(c) + 2, 256) for c in chunks)
    print(f"{len(chunks)} chunks, {tokens} word-pieces (mean {tokens / len(chunks):.0f}); median of {args.repeats} runs")
    emb.embed_documents(chunks[:8])
    for name, fn in (("baseline (ort defaults, batch 8, input order)", baseline),
                     (f"builtin as shipped (batch {emb.batch_size}, length-sorted)", ours)):
        secs = statistics.median(fn(chunks, emb) for _ in range(args.repeats))
        print(f"  {name:<52} {len(chunks) / secs:6.1f} chunks/s  {tokens / secs:8.0f} tokens/s")
    for bs in (4, 8, 32):
        emb.batch_size = bs
        secs = statistics.median(ours(chunks, emb) for _ in range(args.repeats))
        print(f"  {'length-sorted, batch ' + str(bs):<52} {len(chunks) / secs:6.1f} chunks/s  {tokens / secs:8.0f} tokens/s")


if __name__ == "__main__":
    main()
