"""OCR for one item: the engine for the source's languages, the OCR cache, and the item's budget.

Engines (ocr_engines.py): `rapidocr` (PP-OCRv6 models inside the rapidocr wheel: Latin-script languages, Greek,
Chinese, Japanese; always there) and `tesseract` (optional, the system program with its language data).
`auto` takes RapidOCR when its model reads every configured language, else Tesseract when it is installed with
them all, else whichever covers more (the rest is said in `local-rag status`).

An OcrRun reads the images of one item (an image file, the image-only pages of a PDF, a note's embedded
images): each through the cache first (by image sha256 and engine key), then the engine, with what is left of
limits.max_ocr_seconds as its time limit, and at most limits.max_ocr_pages engine reads per item. A page whose
text sits in tall boxes (turned on its side: its lines come out in the wrong order) is read turned by 90°, and
by 270° unless that reading is upright and confident; the better turned reading wins. One read with low
confidence is tried turned by 180°, the better reading wins. What was not read is listed for the item's
parse_warning. Pages already in the cache cost nothing, so a forced re-index of a long scan goes on where the
budget stopped the last one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from rag_pipelines.parsers.ocr import text as ocr_text
from rag_pipelines.parsers.limits import Limits
from rag_pipelines.parsers.ocr.cache import CachedText, OcrCache, default_path
from rag_pipelines.parsers.ocr.engines import ENGINES, OcrFailed, OcrTimeout

ROTATE_BELOW = 0.75  # a reading less confident than this is tried upside down too
AGAIN = "; raise the limit, or index it again with --force: what was read is kept in the OCR cache"
MAX_SIDE = 2500  # an image is scaled down to this longest side before it is read (its memory is bounded)


@dataclass(frozen=True)
class OcrSettings:
    """What a source asks of OCR (the `ocr:` option of obsidian and project sources)."""

    enabled: bool = True
    engine: str = "auto"  # auto | rapidocr | tesseract
    languages: tuple[str, ...] = ("en",)
    cache_path: Path | None = None  # default: cache/ocr.sqlite in the local-rag home


@dataclass(frozen=True)
class OcrText:
    text: str
    confidence: float  # 0–1, the engine's scores averaged over characters
    engine: str  # the engine key: engine, models or languages, version
    cached: bool = False


def choose(settings: OcrSettings):
    """(engine or None, why none / what it cannot read): see the module docstring for `auto`."""
    langs = settings.languages
    if settings.engine != "auto":
        engine = ENGINES.get(settings.engine)
        if engine is None:
            return None, f"unknown OCR engine '{settings.engine}' (auto, rapidocr or tesseract)"
        missing = engine.missing()
        return (None, missing) if missing else (engine, _unread(engine, langs))
    usable = [e for e in (ENGINES["rapidocr"], ENGINES["tesseract"]) if not e.missing()]
    if not usable:
        return None, "; ".join(filter(None, (e.missing() for e in ENGINES.values())))
    best = min(usable, key=lambda e: len(e.reads(langs)))
    return best, _unread(best, langs)


def _unread(engine, languages: tuple[str, ...]) -> str:
    gaps = engine.reads(languages)
    if not gaps:
        return ""
    hint = ("install Tesseract's data for them (e.g. apt-get install " + " ".join(
        f"tesseract-ocr-{lang}" for lang in gaps) + ")") if engine.name == "tesseract" else (
        "install tesseract with their language data and set the engine to auto or tesseract")
    return f"{engine.name} cannot read {', '.join(gaps)}: {hint}"


@dataclass
class OcrRun:
    """The OCR of one item, within its limits."""

    settings: OcrSettings
    limits: Limits = field(default_factory=Limits)

    def __post_init__(self):
        self.engine, self.note = choose(self.settings) if self.settings.enabled else (None, "OCR is off")
        self.cache = OcrCache(self.settings.cache_path or default_path())
        self.reads, self.spent = 0, 0.0
        self.skipped: list[str] = []  # what was not read (page 3, scan.png)
        self.why = ""  # why it was not read
        self.found: list[OcrText] = []

    @property
    def key(self) -> str:
        return self.engine.key(self.settings.languages) if self.engine else ""

    def read(self, image, sha256: str, what: str) -> OcrText | None:
        """The text of one image (a PIL image), None when it could not be read within the limits."""
        if self.engine is None:
            return self._skip(what, f"no OCR engine: {self.note}")
        hit = self.cache.get(sha256, self.key)
        if hit is not None:
            return self._found(OcrText(hit.text, hit.confidence, self.key, cached=True))
        if self.why or self.reads >= self.limits.max_ocr_pages:
            return self._skip(what, self.why or f"{self.limits.max_ocr_pages} images were read for this item "
                                                 f"(limits.max_ocr_pages){AGAIN}")
        started = self._start = time.monotonic()
        try:
            lines = self._best(_prepared(image))
        except OcrTimeout:
            return self._stop(what, started, f"OCR took {self.limits.max_ocr_seconds:g} s for this item "
                                             f"(limits.max_ocr_seconds){AGAIN}")
        except OcrFailed as exc:
            return self._stop(what, started, f"the OCR engine failed ({exc})")
        seconds = self._spend(started)
        text = OcrText(ocr_text.layout(lines), round(ocr_text.confidence(lines), 4), self.key)
        self.cache.put(sha256, self.key, CachedText(text.text, text.confidence, seconds))
        return self._found(text)

    def _best(self, image) -> list:
        """The lines of the best orientation tried (see the module docstring)."""
        lines = self._lines(image)
        if ocr_text.sideways(lines):  # its reading order is wrong whatever its score: a turned reading wins
            return self._turned(image) or lines
        if lines and ocr_text.confidence(lines) < ROTATE_BELOW:
            other = self._lines(image.rotate(180, expand=True))
            return other if ocr_text.score(other) > ocr_text.score(lines) else lines
        return lines

    def _turned(self, image) -> list:
        """The better reading of the image turned by 90° and by 270° (the second only when the first is poor)."""
        best: list = []
        for turn in (90, 270):
            lines = self._lines(image.rotate(turn, expand=True))
            best = lines if ocr_text.score(lines) > ocr_text.score(best) else best
            if lines and not ocr_text.sideways(lines) and ocr_text.confidence(lines) >= ROTATE_BELOW:
                break
        return best

    def _lines(self, image) -> list:
        left = self.limits.max_ocr_seconds - self.spent - (time.monotonic() - self._start)
        if left <= 0:
            raise OcrTimeout()
        return self.engine.read(image.tobytes(), image.width, image.height, self.settings.languages, left)

    def _spend(self, started: float) -> float:
        seconds = time.monotonic() - started
        self.spent += seconds
        self.reads += 1
        return seconds

    def _stop(self, what: str, started: float, why: str) -> None:
        self._spend(started)
        self.why = why
        return self._skip(what, why)

    def _skip(self, what: str, why: str) -> None:
        self.skipped.append(what)
        self.why = self.why or why
        return None

    def _found(self, text: OcrText) -> OcrText:
        self.found.append(text)
        return text

    def metadata(self) -> dict:
        """text_source, ocr_engine and ocr_confidence (over all text read) for the item's metadata."""
        chars = sum(len(t.text) for t in self.found)
        mean = sum(t.confidence * len(t.text) for t in self.found) / chars if chars else 0.0
        return {"text_source": "ocr", "ocr_engine": self.key, "ocr_confidence": round(mean, 3)} if self.found else {}

    def warning(self) -> str | None:
        if not self.skipped:
            return None
        names = ", ".join(self.skipped[:10]) + (f" and {len(self.skipped) - 10} more" if len(self.skipped) > 10 else "")
        return f"not read by OCR: {names}: {self.why}"


def _prepared(image):
    """RGB, at most MAX_SIDE on its longest side."""
    image = image.convert("RGB") if image.mode != "RGB" else image
    if max(image.size) > MAX_SIDE:
        scale = MAX_SIDE / max(image.size)
        image = image.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))))
    return image
