"""OCR of a PDF's image-only pages: a page with no text layer that shows an image is rendered and read.

Pages are rendered at DPI dots per inch, less when that would pass ocr.MAX_SIDE pixels on the longest side, in
RGB without alpha; the OCR cache key is the sha256 of the rendered pixels, so the same scan in another file (or
a re-saved PDF) is not read twice. The text is a section with its page number; the item's metadata says which
pages were read by OCR (`ocr_pages`), `text_source` (`ocr`, or `text+ocr` when some pages had text) and the
OCR confidence. Bounded by the item's OCR budget (limits.max_ocr_pages, max_ocr_seconds: see ocr.py).
"""

from __future__ import annotations

import hashlib

from rag_search.records import Section

from rag_pipelines.parsers.ocr import MAX_SIDE

DPI = 200  # 12 pt text is ~33 pixels tall


def has_image(page) -> bool:
    try:
        return bool(page.get_image_info())
    except (ValueError, RuntimeError):
        return False


def render(page):
    """The page as a PIL RGB image and the sha256 of its pixels."""
    import pymupdf
    from PIL import Image

    scale = min(DPI / 72, MAX_SIDE / max(page.rect.width, page.rect.height, 1))
    pix = page.get_pixmap(matrix=pymupdf.Matrix(scale, scale), colorspace=pymupdf.csRGB, alpha=False)
    digest = hashlib.sha256(f"{pix.width}x{pix.height}:".encode() + pix.samples).hexdigest()
    return Image.frombytes("RGB", (pix.width, pix.height), pix.samples), digest


def ocr_pages(doc, numbers: list[int], ocr) -> list[Section]:
    """Sections of the text OCR finds on the given pages (1-based) that show an image."""
    sections = []
    for number in numbers:
        page = doc[number - 1]
        if not has_image(page):
            continue
        try:
            image, digest = render(page)
        except (ValueError, RuntimeError, MemoryError) as exc:
            ocr.skipped.append(f"page {number}")
            ocr.why = ocr.why or f"it could not be rendered ({exc})"
            continue
        found = ocr.read(image, digest, f"page {number}")
        if found is not None and found.text:
            sections.append(Section(text=found.text, page=number))
    return sections


def ocr_metadata(ocr, sections: list[Section], from_ocr: list[Section]) -> dict:
    if not from_ocr:
        return {}
    meta = ocr.metadata()
    meta["text_source"] = "ocr" if len(from_ocr) == len(sections) else "text+ocr"
    meta["ocr_pages"] = [s.page for s in from_ocr]
    return meta
