"""Image files (PNG, JPEG, TIFF, WebP, HEIC) → their text by OCR, or just their name when there is none.

An image is opened with Pillow (HEIC/HEIF through pillow-heif) and checked before it is decoded: one over
limits.max_image_mpixels is not decoded (a JPEG is decoded reduced instead, which costs a fraction), so a
decompression bomb never reaches memory. It is turned as its EXIF orientation says, and each frame of a
multi-page TIFF (a fax, a scanner's output) is a page. The text comes from OCR (ocr.py) through the OCR cache;
it is marked in metadata (`text_source: ocr`, `ocr_engine`, `ocr_confidence`). A photo without text, or an image
read with OCR off, is still indexed, by its name (and EXIF date), like an empty note.
"""

from __future__ import annotations

import hashlib
import io
import math
from datetime import datetime, timezone
from functools import lru_cache

from rag_search.records import Document, Section

from rag_pipelines.parsers.documents import stem
from rag_pipelines.parsers.errors import ParseError
from rag_pipelines.parsers.limits import Limits

SUFFIXES = ("png", "jpg", "jpeg", "tif", "tiff", "webp", "heic", "heif")
EXIF_DATES = ((0x8769, 36867), (0x8769, 36868), (None, 306))  # DateTimeOriginal, DateTimeDigitized, DateTime
FIX = "re-save it from an image editor, or exclude it"


def parse_image(data: bytes, filename: str, mtime_ns: int | None = None, limits: Limits | None = None,
                ocr=None) -> Document:
    limits = limits or Limits()
    image = open_image(data, filename, limits)
    ts = _exif_time(image) or (mtime_ns // 1_000_000_000 if mtime_ns else None)
    width, height = image.info.get("full_size", image.size)
    meta: dict = {"image_size": f"{width}x{height}"}
    if ocr is None:
        meta["parse_warning"] = ("OCR is off for this source, so only the image's name is indexed; turn it on "
                                 "(ocr: true) to index its text")
        return Document(title=stem(filename), sections=(), ts=ts, metadata=meta)
    sections = read_frames(image, hashlib.sha256(data).hexdigest(), filename.rsplit("/", 1)[-1], ocr)
    meta.update(ocr.metadata())
    if ocr.warning():
        meta["parse_warning"] = ocr.warning()
    return Document(title=stem(filename), sections=tuple(sections), ts=ts, metadata=meta)


def read_frames(image, sha256: str, name: str, ocr) -> list[Section]:
    """Sections of the text OCR finds in each frame (page N of a multi-page image)."""
    frames = getattr(image, "n_frames", 1) or 1
    sections = []
    for index in range(frames):
        if frames > 1:
            try:
                image.seek(index)
            except EOFError:
                break
        found = ocr.read(_oriented(image), sha256 if index == 0 else f"{sha256}#{index}",
                         f"{name} page {index + 1}" if frames > 1 else name)
        if found is not None and found.text:
            sections.append(Section(text=found.text, page=index + 1 if frames > 1 else None))
    return sections


def open_image(data: bytes, filename: str, limits: Limits):
    """The image, checked against limits.max_image_mpixels before it is decoded (JPEGs decoded reduced)."""
    from PIL import Image, UnidentifiedImageError

    _register_heif()
    try:
        image = Image.open(io.BytesIO(data))
        _bound(image, filename, limits)
        image.load()
    except Image.DecompressionBombError as exc:
        raise ParseError("too_large", f"{filename} is an image of too many pixels to decode ({exc}); exclude it") \
            from exc
    except UnidentifiedImageError as exc:
        raise ParseError(*_unreadable(data, filename)) from exc
    except (OSError, ValueError, SyntaxError) as exc:  # truncated or damaged data
        raise ParseError("corrupt", f"{filename} is a damaged image ({exc}); {FIX}") from exc
    return image


def _bound(image, filename: str, limits: Limits) -> None:
    width, height = image.size
    most = limits.max_image_mpixels * 1_000_000
    if width * height <= most:
        return
    if image.format == "JPEG":  # decoded at 1/2, 1/4 or 1/8 of its size: the largest the limit allows
        for scale in (2, 4, 8):
            if math.ceil(width / scale) * math.ceil(height / scale) <= most:
                image.info["full_size"] = (width, height)
                image.draft(image.mode if image.mode in ("L", "RGB") else "RGB",
                            (math.ceil(width / scale), math.ceil(height / scale)))
                if image.size[0] * image.size[1] <= most:
                    return
                break
    raise ParseError("too_large", f"{filename} is {width}x{height} pixels ({width * height / 1e6:,.0f} megapixels), "
                                  f"over limits.max_image_mpixels ({limits.max_image_mpixels:g}); it was not decoded; "
                                  "raise the limit or exclude it")


def _unreadable(data: bytes, filename: str) -> tuple[str, str]:
    if data[4:12] in (b"ftypheic", b"ftypheix", b"ftypmif1", b"ftyphevc") and not _register_heif():
        return "unsupported", (f"{filename} is a HEIC image and pillow-heif is not installed; install it "
                               "(pip install pillow-heif) or exclude it")
    return "corrupt", f"{filename} is not an image Pillow can read; {FIX}"


@lru_cache(maxsize=1)
def _register_heif() -> bool:
    try:
        import pillow_heif
    except ImportError:
        return False
    pillow_heif.register_heif_opener()
    return True


def _oriented(image):
    """The current frame as its EXIF orientation says it is shown."""
    from PIL import ImageOps

    try:
        return ImageOps.exif_transpose(image)
    except (OSError, ValueError, TypeError, ZeroDivisionError):
        return image.copy()  # a damaged EXIF block: as stored


def _exif_time(image) -> int | None:
    try:
        exif = image.getexif()
        values = [(exif.get_ifd(ifd) if ifd else exif).get(tag) for ifd, tag in EXIF_DATES]
    except (OSError, ValueError, TypeError, KeyError):
        return None
    for value in filter(None, values):
        try:
            return int(datetime.strptime(str(value).strip()[:19], "%Y:%m:%d %H:%M:%S")
                       .replace(tzinfo=timezone.utc).timestamp())
        except ValueError:
            continue
    return None
