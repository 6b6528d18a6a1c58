"""The RapidOCR worker: a child process that reads images with the models bundled in the rapidocr wheel.

Run by ocr_engines.RapidOcr as `python -m rag_pipelines.parsers.ocr.worker`; never downloads anything: the
detection and recognition models are named by path (rapidocr's own downloader is only used for files it
cannot find, and here it never gets a name), and a missing one is an error that says to reinstall rapidocr.
Its own process so that a page can be stopped when it takes too long (the parent kills it) and the models'
memory leaves with it: it exits after IDLE_SECONDS without work, or when its input closes.

Protocol on stdin/stdout, each frame an 8-byte big-endian length and its bytes: the worker first sends
{"ready": true} (or {"error": ...}); then per request it reads a JSON frame {"height", "width"} and a frame of
RGB pixels, and answers {"lines": [[text, score, [x0, y0, x1, y1]], ...]} or {"error": message}.
"""

from __future__ import annotations

import json
import os
import select
import sys
from pathlib import Path

IDLE_SECONDS = 120
MAX_SIDE = 2000  # rapidocr scales an image down to this longest side before reading it
MIN_SIDE = 480  # and a small one up to this shortest side for finding text (its default, 736, took 2x the time)
MODELS = {"Det": "PP-OCRv6_det_small.onnx", "Rec": "PP-OCRv6_rec_small.onnx",
          "Cls": "ch_ppocr_mobile_v2.0_cls_mobile.onnx"}
MODEL_NAME = "PP-OCRv6 small (det, rec)"


def model_dir() -> Path | None:
    """The models folder of the installed rapidocr wheel, None when rapidocr is not installed."""
    from importlib.util import find_spec

    spec = find_spec("rapidocr")
    return Path(spec.origin).parent / "models" if spec and spec.origin else None


def missing_models() -> list[str]:
    folder = model_dir()
    return list(MODELS.values()) if folder is None else [f for f in MODELS.values() if not (folder / f).is_file()]


def load():
    missing = missing_models()
    if missing:
        raise RuntimeError(f"rapidocr's bundled models are missing ({', '.join(missing)}); reinstall it: "
                           "pip install --force-reinstall rapidocr==3.10.0")
    from rapidocr import RapidOCR

    folder = model_dir()
    params = {f"{task}.model_path": str(folder / name) for task, name in MODELS.items()}
    params.update({"Global.use_cls": False, "Global.log_level": "error", "Global.max_side_len": MAX_SIDE,
                   "Det.limit_side_len": MIN_SIDE})
    return RapidOCR(params=params)


def read(engine, height: int, width: int, pixels: bytes) -> list:
    import numpy as np

    image = np.frombuffer(pixels, dtype=np.uint8).reshape(height, width, 3)[:, :, ::-1]  # RGB → BGR
    result = engine(np.ascontiguousarray(image), use_cls=False)
    if result.boxes is None or result.txts is None:
        return []
    lines = []
    for box, text, score in zip(result.boxes, result.txts, result.scores):
        xs, ys = [float(p[0]) for p in box], [float(p[1]) for p in box]
        lines.append([str(text), float(score), [min(xs), min(ys), max(xs), max(ys)]])
    return lines


def send(out, message: dict) -> None:
    data = json.dumps(message).encode()
    out.write(len(data).to_bytes(8, "big") + data)
    out.flush()


def receive(fd: int) -> bytes | None:
    """One frame from a file descriptor (unbuffered, so select() sees all that is pending); None at its end."""
    head = read_exact(fd, 8)
    return read_exact(fd, int.from_bytes(head, "big")) if head is not None else None


def read_exact(fd: int, size: int) -> bytes | None:
    pieces, left = [], size
    while left:
        piece = os.read(fd, min(left, 1 << 20))
        if not piece:
            return None
        pieces.append(piece)
        left -= len(piece)
    return b"".join(pieces)


def main() -> int:
    inp, out = sys.stdin.fileno(), os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever a library prints goes to stderr, never into the answers
    try:
        engine = load()
    except Exception as exc:  # noqa: BLE001 - told to the parent, which records it
        send(out, {"error": str(exc)})
        return 1
    send(out, {"ready": True})
    while select.select([inp], [], [], IDLE_SECONDS)[0]:
        header, pixels = receive(inp), None
        pixels = receive(inp) if header is not None else None
        if pixels is None:
            return 0
        request = json.loads(header)
        try:
            send(out, {"lines": read(engine, int(request["height"]), int(request["width"]), pixels)})
        except Exception as exc:  # noqa: BLE001 - one bad image is that image's failure
            send(out, {"error": f"{type(exc).__name__}: {exc}"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
