"""What `local-rag status` and `doctor` say about OCR: the engines there are, and which one each source uses.

`engines()` names each engine with its version and models or languages, or what is missing; `sources(collections)`
gives, per folder source, whether OCR is on, the engine its languages get (ocr.choose) and what it cannot
read; `self_test()` reads a small rendered image with the engine the default settings choose, offline.
"""

from __future__ import annotations

import time

from rag_pipelines.parsers.ocr import OcrSettings, choose
from rag_pipelines.parsers.ocr.engines import ENGINES, installed_languages, tesseract_version

SAMPLE = "local rag 42"


def engines() -> dict[str, str]:
    from rag_pipelines.parsers.ocr.engines import _version
    from rag_pipelines.parsers.ocr.worker import MODEL_NAME

    out = {}
    for name, engine in ENGINES.items():
        missing = engine.missing()
        if missing:
            out[name] = missing
        elif name == "rapidocr":
            out[name] = f"rapidocr {_version('rapidocr')} with its bundled {MODEL_NAME} models"
        else:
            out[name] = f"tesseract {tesseract_version()} ({', '.join(sorted(installed_languages())) or 'no languages'})"
    return out


def sources(paths) -> list[dict]:
    """Per obsidian/project source of the configured collections: collection, source, enabled, engine (or None),
    languages, missing."""
    from rag_pipelines.config import load_collections

    rows = []
    for name, cfg in load_collections(paths).items():
        for src in cfg.sources:
            options = getattr(src, "ocr", None)
            if options is None:
                continue
            settings = options.settings()
            engine, note = choose(settings) if settings.enabled else (None, "")
            rows.append({"collection": name, "source": src.label or src.type, "enabled": settings.enabled,
                         "engine": engine.name if engine else None, "languages": list(settings.languages),
                         "missing": note})
    return rows


def self_test(settings: OcrSettings | None = None) -> str:
    """Reads SAMPLE rendered by Pillow; the engine and what it read, or an exception saying what failed."""
    from PIL import Image, ImageDraw, ImageFont

    from rag_pipelines.parsers.ocr.engines import OcrFailed

    settings = settings or OcrSettings()
    engine, note = choose(settings)
    if engine is None:
        raise OcrFailed(note)
    image = Image.new("RGB", (420, 90), "white")
    ImageDraw.Draw(image).text((20, 20), SAMPLE, fill="black", font=ImageFont.load_default(size=40))
    started = time.monotonic()
    lines = engine.read(image.tobytes(), image.width, image.height, settings.languages, 120)
    text = " ".join(line.text for line in lines).strip()
    if text.lower() != SAMPLE:
        raise OcrFailed(f"{engine.name} read {text!r} instead of {SAMPLE!r}")
    return f"{engine.key(settings.languages)} reads a test image offline ({time.monotonic() - started:.1f} s)"
