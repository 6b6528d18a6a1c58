"""The OCR engines: RapidOCR (models bundled in its wheel, the default) and Tesseract (a system program, optional).

Both read an RGB image within a time limit and give its text lines as (text, confidence 0–1, box). RapidOCR
runs in a worker process (ocr_worker.py) started on first use and reused: a page over its time is stopped by
killing the worker (the next page starts a new one). Tesseract runs once per image (`tesseract stdin stdout
tsv`) with the same limit. `key` names what read the text (engine, models or languages, versions): the OCR
cache keeps text per key.
"""

from __future__ import annotations

import atexit
import io
import json
import os
import select
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from functools import lru_cache

LOAD_SECONDS = 60  # the worker's start (loading the models) may take this long, over the page's own limit
TESSERACT_CODES = {"en": "eng", "de": "deu", "fr": "fra", "es": "spa", "it": "ita", "pt": "por", "nl": "nld",
                   "sv": "swe", "da": "dan", "no": "nor", "nb": "nor", "fi": "fin", "pl": "pol", "cs": "ces",
                   "sk": "slk", "hu": "hun", "ro": "ron", "tr": "tur", "el": "ell", "ru": "rus", "uk": "ukr",
                   "bg": "bul", "zh": "chi_sim", "zh-tw": "chi_tra", "ja": "jpn", "ko": "kor", "ar": "ara",
                   "he": "heb", "hi": "hin", "th": "tha", "vi": "vie", "id": "ind", "ca": "cat", "hr": "hrv",
                   "sl": "slv", "et": "est", "lv": "lav", "lt": "lit"}
# Scripts the bundled PP-OCRv6 recognition model reads (its character set: Latin with accents, Greek, Chinese,
# Japanese kana and kanji); others (Cyrillic, Korean, Arabic, ...) need Tesseract's language data.
RAPIDOCR_LANGUAGES = frozenset({"en", "de", "fr", "es", "it", "pt", "nl", "sv", "da", "no", "nb", "fi", "pl", "cs",
                                "sk", "hu", "ro", "tr", "el", "zh", "zh-tw", "ja", "vi", "id", "ca", "hr", "sl",
                                "et", "lv", "lt"})


class OcrTimeout(Exception):
    """An image took longer than its time limit; it was stopped."""


class OcrFailed(Exception):
    """The engine could not read an image (or could not start); the message says why."""


@dataclass(frozen=True)
class Line:
    text: str
    confidence: float
    box: tuple[float, float, float, float]  # x0, y0, x1, y1


def tesseract_code(language: str) -> str:
    return TESSERACT_CODES.get(language.lower(), language)


class RapidOcr:
    """RapidOCR in a worker process; `read` starts it when needed."""

    name = "rapidocr"

    def __init__(self):
        self.proc: subprocess.Popen | None = None

    @staticmethod
    def missing() -> str | None:
        from rag_pipelines.parsers.ocr.worker import missing_models, model_dir

        if model_dir() is None:
            return "rapidocr is not installed (pip install rapidocr==3.10.0)"
        files = missing_models()
        return f"rapidocr's bundled models are missing ({', '.join(files)}); reinstall rapidocr" if files else None

    @staticmethod
    def reads(languages: tuple[str, ...]) -> list[str]:
        """The languages of `languages` its model cannot read."""
        return [lang for lang in languages if lang.lower() not in RAPIDOCR_LANGUAGES]

    def key(self, languages: tuple[str, ...]) -> str:
        from rag_pipelines.parsers.ocr.worker import MAX_SIDE, MODEL_NAME

        return f"rapidocr {_version('rapidocr')} {MODEL_NAME} max{MAX_SIDE}"

    def read(self, rgb: bytes, width: int, height: int, languages: tuple[str, ...], timeout: float) -> list[Line]:
        deadline = time.monotonic() + timeout
        proc = self._started(deadline + LOAD_SECONDS)
        header = json.dumps({"height": height, "width": width}).encode()
        try:
            proc.stdin.write(len(header).to_bytes(8, "big") + header + len(rgb).to_bytes(8, "big") + rgb)
            proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.stop()
            raise OcrFailed("the OCR worker stopped; the next image starts a new one") from None
        answer = self._answer(deadline)
        if "error" in answer:
            raise OcrFailed(answer["error"])
        return [Line(str(t), float(c), tuple(b)) for t, c, b in answer.get("lines", [])]

    def _started(self, deadline: float) -> subprocess.Popen:
        if self.proc is not None and self.proc.poll() is None:
            return self.proc
        self.proc = subprocess.Popen([sys.executable, "-m", "rag_pipelines.parsers.ocr.worker"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        answer = self._answer(deadline)
        if "error" in answer:
            self.stop()
            raise OcrFailed(answer["error"])
        return self.proc

    def _answer(self, deadline: float) -> dict:
        """The worker's next frame; OcrTimeout (the worker killed) past the deadline."""
        fd = self.proc.stdout.fileno()
        head = self._exact(fd, 8, deadline)
        return json.loads(self._exact(fd, int.from_bytes(head, "big"), deadline))

    def _exact(self, fd: int, size: int, deadline: float) -> bytes:
        pieces, left = [], size
        while left:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                self.stop()
                raise OcrTimeout()
            piece = os.read(fd, min(left, 1 << 20))
            if not piece:
                self.stop()
                raise OcrFailed("the OCR worker ended unexpectedly (out of memory?); the next image starts a new one")
            pieces.append(piece)
            left -= len(piece)
        return b"".join(pieces)

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            for stream in (self.proc.stdin, self.proc.stdout):
                stream.close()
            self.proc = None


class Tesseract:
    """The tesseract program, one process per image."""

    name = "tesseract"

    @staticmethod
    def missing() -> str | None:
        return None if shutil.which("tesseract") else ("tesseract is not installed (optional: apt-get install "
                                                       "tesseract-ocr, or brew install tesseract)")

    @staticmethod
    def reads(languages: tuple[str, ...]) -> list[str]:
        have = installed_languages()
        return [lang for lang in languages if tesseract_code(lang) not in have]

    def key(self, languages: tuple[str, ...]) -> str:
        return f"tesseract {tesseract_version()} {'+'.join(tesseract_code(lang) for lang in languages)}"

    def read(self, rgb: bytes, width: int, height: int, languages: tuple[str, ...], timeout: float) -> list[Line]:
        from PIL import Image

        png = io.BytesIO()
        Image.frombytes("RGB", (width, height), rgb).save(png, format="PNG", compress_level=1)
        command = ["tesseract", "stdin", "stdout", "-l", "+".join(tesseract_code(lang) for lang in languages),
                   "--psm", "3", "tsv"]
        try:
            done = subprocess.run(command, input=png.getvalue(), capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise OcrTimeout() from None
        except OSError as exc:
            raise OcrFailed(f"tesseract could not run ({exc})") from exc
        if done.returncode:
            raise OcrFailed(f"tesseract failed: {done.stderr.decode(errors='replace').strip()[:300]}")
        return tsv_lines(done.stdout.decode("utf-8", errors="replace"))


def tsv_lines(tsv: str) -> list[Line]:
    """Tesseract's TSV (one row per word) → lines: words joined, confidence their mean, box their union."""
    lines: dict[tuple[str, str, str], list] = {}
    for row in tsv.splitlines()[1:]:
        cols = row.split("\t")
        if len(cols) < 12 or cols[0] != "5" or not cols[11].strip():
            continue
        x, y, w, h = (float(c) for c in cols[6:10])
        words = lines.setdefault((cols[2], cols[3], cols[4]), [[], [], [x, y, x + w, y + h]])
        words[0].append(cols[11].strip())
        words[1].append(max(float(cols[10]), 0.0) / 100)
        box = words[2]
        words[2] = [min(box[0], x), min(box[1], y), max(box[2], x + w), max(box[3], y + h)]
    return [Line(" ".join(words), sum(confs) / len(confs), tuple(box)) for words, confs, box in lines.values()]


@lru_cache(maxsize=1)
def installed_languages() -> frozenset[str]:
    try:
        out = subprocess.run(["tesseract", "--list-langs"], capture_output=True, timeout=20).stdout.decode()
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    return frozenset(line.strip() for line in out.splitlines()[1:] if line.strip())


@lru_cache(maxsize=1)
def tesseract_version() -> str:
    try:
        out = subprocess.run(["tesseract", "--version"], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    first = (out.stdout or out.stderr).decode(errors="replace").split("\n", 1)[0]
    return first.replace("tesseract", "").strip() or "?"


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "?"


ENGINES = {"rapidocr": RapidOcr(), "tesseract": Tesseract()}  # one worker per process, started on first use


@atexit.register
def _stop_workers() -> None:
    ENGINES["rapidocr"].stop()
