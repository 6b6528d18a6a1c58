"""What the bundled ONNX embedders share: their data files, one onnxruntime session, one-thread runs, pooling.

Each text is one run on one intra-op thread and `threads` runs go at once (onnxruntime lets go of the GIL);
the hidden states are mean-pooled over the attention mask and L2-normalised.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

import numpy as np

from rag_search.embedders.base import Progress, batched, l2_normalise
from rag_search.errors import EmbedderError


def open_session(model: Path):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    # BASIC is as fast as ALL on these int8 models. Constant folding stays on: without it the resident size
    # at load is smaller but the peak while embedding is not, and embedding is slower
    # (bench/embedder_memory.py).
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    # One thread a run, `threads` runs at once (embed_documents): 1.3x the texts a second of one run on two
    # threads, whose workers spin and wait on each other over such small matrices (bench/embedder_speed.py).
    # A query alone is 0.2 ms slower (1.37 vs 1.17 ms).
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.log_severity_level = 3
    try:
        return ort.InferenceSession(str(model), sess_options=opts, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise EmbedderError(f"onnxruntime could not load {model}: {exc}. Run `local-rag doctor`.") from exc


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    weights = mask[:, :, None].astype(np.float32)
    pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
    return l2_normalise(pooled)


class OnnxRuns:
    """Embedding on a session (`_session`, set up by the subclass) through `_run(texts)`: texts batched by length,
    `threads` batches at once, results in input order."""

    dimensions: int

    def __init__(self, batch_size: int, threads: int | None):
        self.batch_size = batch_size
        self.threads = threads or os.cpu_count() or 1
        self._pool: ThreadPoolExecutor | None = None

    def _open(self, model: Path):
        return open_session(model)

    def _run(self, texts: Sequence[str]) -> np.ndarray:
        raise NotImplementedError

    def embed_documents(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        """Texts are batched by length so a batch pads little; `threads` batches run at once (onnxruntime
        lets go of the GIL); results come back in input order."""
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        lengths = [len(t) for t in texts]
        order = sorted(range(len(texts)), key=lengths.__getitem__, reverse=True)  # longest first: no long tail
        batches = [idx for _, idx in batched(order, self.batch_size)]
        if self.threads > 1 and len(batches) > 1:
            self._session  # loaded once, before the workers share it
            runs = self._workers().map(lambda idx: self._run([texts[i] for i in idx]), batches)
        else:
            runs = (self._run([texts[i] for i in idx]) for idx in batches)
        for idx, vectors in zip(batches, runs):
            out[idx] = vectors
            if progress:
                progress(len(idx))
        return out

    def _workers(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="embed")
        return self._pool

    def _run_each(self, texts: Sequence[str]) -> np.ndarray:
        return np.vstack([self._run([t]) for t in texts])
