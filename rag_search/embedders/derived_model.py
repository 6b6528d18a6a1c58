"""The builtin embedder's fast model, derived on this machine from the shipped one (no download, no opaque blob).

The shipped all-MiniLM-L6-v2 stores int8 weights but computes in fp32 (DequantizeLinear feeding fp32 MatMuls).
The recipe: fold it (onnxruntime's BASIC graph optimisation turns the int8 weights into fp32 initializers),
then quantise dynamically with per-channel int8 weights (`quantize_dynamic(per_channel=True)`), so the
MatMuls run as integer kernels. Measured (bench/embedder_speed.py): ~1.5x chunks/s, queries 2.7 ms vs
4.1 ms, cosine to the shipped model's vectors mean 0.995 (min 0.990); per-tensor quantisation was faster but
drifted (cosine 0.94) and is not used.

The result is written once to the model cache (LOCAL_RAG_MODEL_CACHE, else $XDG_CACHE_HOME/local-rag/models,
else ~/.cache/local-rag/models) by derive_once (which the multilingual model's derivation uses too), named by the recipe version and the source model's hash, and checked against
DERIVED_SHA256 (the file this recipe produced with the pinned onnx/onnxruntime). Other library versions may
produce different bytes: such a file is used only if its vectors agree with the shipped model's on fixed
sentences (cosine >= SELF_CHECK_MIN); otherwise the shipped model is used. Two processes deriving at once each
write a temporary file and rename it into place.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from rag_search.embedders.model_files import cache_dir, sha256_of

RECIPE = "fold-basic+dynamic-int8-per-channel-v1"
DERIVED_SHA256 = "9e80251537633bab7d98c9a4f07070371d83f1d28e6994a1f5d93c53de3c5454"  # onnx 1.23, onnxruntime 1.32
SELF_CHECK_MIN = 0.985
SELF_CHECK_TEXTS = (
    "How do I roll back the kube-proxy upgrade?",
    "Grocery list: lentils, rye bread, roasted vegetables.",
    "The quarterly budget review moved to Thursday afternoon.",
    "Leader election and log replication in distributed consensus.",
)

log = logging.getLogger(__name__)


def derived_path(source_sha256: str) -> Path:
    return cache_dir() / f"all-MiniLM-L6-v2-{RECIPE}-{source_sha256[:12]}.onnx"


def ensure_derived(source: Path, source_sha256: str, vectors_for) -> Path | None:
    """The derived model's path (deriving it first if needed), or None when it cannot be used here.

    vectors_for(model path, texts) -> their vectors; used for the self-check of a file whose hash differs.
    """
    target = derived_path(source_sha256)
    if target.is_file():
        return target
    try:
        import onnxruntime.quantization  # noqa: F401  (needs the onnx package)
    except ImportError as exc:
        say(f"the fast embedder model cannot be derived ({exc}); using the shipped model. "
             "Install onnx (`pip install onnx`) to get ~1.5x faster indexing.")
        return None

    def build(tmp: Path) -> Path | None:
        candidate = tmp / "model.onnx"
        _derive(source, tmp / "folded.onnx", candidate)
        digest = sha256_of(candidate)
        if digest != DERIVED_SHA256 and not _agrees(source, candidate, vectors_for, digest):
            return None
        return candidate

    return derive_once(target, "the fast embedder model", build, "using the shipped model")


def derive_once(target: Path, what: str, build: Callable[[Path], Path | None], fallback: str) -> Path | None:
    """Make `target` once: build(tmp) writes a candidate in a temporary folder beside it (None: not usable), which is
    then renamed into place, so two processes deriving at once never see half a file. None when it could not be
    written (`fallback` says what happens then)."""
    t0 = time.monotonic()
    say(f"deriving {what} once into {target.parent} (a few seconds) ...")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".derive-") as tmp:
            candidate = build(Path(tmp))
            if candidate is None:
                return None
            os.replace(candidate, target)
    except OSError as exc:
        say(f"could not write {what} to {target.parent} ({exc}); {fallback}. "
             "Set LOCAL_RAG_MODEL_CACHE to a writable folder.")
        return None
    say(f"derived in {time.monotonic() - t0:.1f} s")
    return target


def _derive(source: Path, folded: Path, out: Path) -> None:
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    opts.optimized_model_filepath = str(folded)
    opts.log_severity_level = 3
    ort.InferenceSession(str(source), sess_options=opts, providers=["CPUExecutionProvider"])
    quiet = logging.getLogger()
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # quantize_dynamic logs a pre-processing suggestion on the root logger
    try:
        quantize_dynamic(str(folded), str(out), per_channel=True, weight_type=QuantType.QInt8)
    finally:
        quiet.setLevel(level)


def _agrees(source: Path, candidate: Path, vectors_for, digest: str) -> bool:
    """A derived file with other bytes than the recipe's: use it only if its vectors match the shipped model's."""
    texts = list(SELF_CHECK_TEXTS)
    cos = (vectors_for(source, texts) * vectors_for(candidate, texts)).sum(axis=1)
    if float(cos.min()) >= SELF_CHECK_MIN:
        say(f"the derived model's bytes differ from the recipe's (sha256 {digest[:16]}, other onnx/onnxruntime "
             f"versions) but its vectors agree with the shipped model's (cosine >= {float(cos.min()):.3f}); using it")
        return True
    say(f"the derived model's vectors drift from the shipped model's (cosine {float(cos.min()):.3f} < "
         f"{SELF_CHECK_MIN}) with these onnx/onnxruntime versions; using the shipped model")
    return False


def say(message: str) -> None:
    log.info(message)
    print(f"local-rag: {message}", file=sys.stderr, flush=True)
