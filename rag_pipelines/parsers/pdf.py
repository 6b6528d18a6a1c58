"""PDF → one section per page with text (pymupdf), the work bounded by limits.max_text_mb before MuPDF does it.

MuPDF holds every character a page's drawing instructions show while it reads that page (~30 bytes each, ~100
when they are on the page), and takes ~1 µs per character: a page showing one 20 MB line took 19 s and 680 MB
(2.2 GB when all of it was extracted). So each page's instructions (its content streams and form XObjects) are
measured first, decompressing at most the limit and keeping none of it: a page whose instructions exceed half
of limits.max_text_mb is not read, and reading stops when the pages read so far reach 4 x limits.max_text_mb
of instructions, or max_text_mb of text. What was not read is said in metadata["parse_warning"].
Given an OcrRun, pages without text that show an image are read by OCR (pdf_ocr.py).
"""

from __future__ import annotations

import re
import zlib
from datetime import datetime, timezone

from rag_search.records import Document, Section

from rag_pipelines.parsers.documents import no_text, stem
from rag_pipelines.parsers.errors import ParseError
from rag_pipelines.parsers.limits import MB, Limits, human_size
from rag_pipelines.parsers.titles import meta_title

PAGE_SHARE = 0.5  # a page may have instructions of up to this share of limits.max_text_mb
TOTAL_FACTOR = 4  # the pages read may have instructions of up to this many times limits.max_text_mb
FLATE = frozenset({"FlateDecode", "Fl"})
PIECE = 1 << 20  # bytes inflated at a time while measuring a stream


def parse_pdf(data: bytes, filename: str, mtime_ns: int | None = None, limits: Limits | None = None,
              ocr=None) -> Document:
    import pymupdf

    limits = limits or Limits()
    try:
        doc = pymupdf.open(stream=data, filetype="pdf")
    except Exception as exc:
        raise ParseError("corrupt", f"not a readable PDF ({exc})") from exc
    with doc:
        if doc.needs_pass:
            raise ParseError("encrypted", "the PDF is password-protected; remove the password to index it")
        sections, warnings, blank = _pages(doc, limits)
        extra = _ocr(doc, sections, blank, warnings, ocr)
        meta = doc.metadata or {}
    if not sections:
        _no_text(warnings, ocr)
    return Document(
        title=meta_title(meta.get("title")) or stem(filename),
        sections=tuple(sections),
        ts=_pdf_date(meta.get("creationDate")) or (mtime_ns // 1_000_000_000 if mtime_ns else None),
        author=(meta.get("author") or "").strip() or None,
        metadata={"pages": len(sections), **extra, **({"parse_warning": "; ".join(warnings)} if warnings else {})},
    )


def _no_text(warnings: list[str], ocr) -> None:
    """A PDF without text whose pages were all read is an item with no text, said in `warnings`; one that could not
    be read (over the limits, OCR failing) is a ParseError, retried by the next run."""
    if ocr is not None and ocr.why and not ocr.found:
        raise ParseError("no_text", f"no extractable text (a scanned PDF?) and OCR could not read it ({ocr.why})")
    limited = [w for w in warnings if ocr is None or w != ocr.warning()]
    if limited:
        raise ParseError("too_large", f"no page could be read within the limits: {'; '.join(limited)}")
    warnings.insert(0, no_text("no extractable text (a scanned PDF?) " + (
        "and OCR found none either" if ocr is not None else
        "and OCR is off for this source: turn it on (ocr: true) to read its pages, or run OCR on it first "
        "(e.g. ocrmypdf)")))


def _ocr(doc, sections: list[Section], blank: list[int], warnings: list[str], ocr) -> dict:
    """Adds the OCR'd text of the blank pages that show an image to sections (in page order); its metadata."""
    if ocr is None or not blank:
        return {}
    from rag_pipelines.parsers.pdf_ocr import ocr_metadata, ocr_pages

    found = ocr_pages(doc, blank, ocr)
    sections[:] = sorted(sections + found, key=lambda s: s.page or 0)
    warnings += [ocr.warning()] if ocr.warning() else []
    return ocr_metadata(ocr, sections, found)


def _pages(doc, limits: Limits) -> tuple[list[Section], list[str], list[int]]:
    """The sections of the pages read, what was not read (over a page's or the document's budget), and the
    pages read that have no text."""
    page_cap, budget = int(limits.max_text_mb * MB * PAGE_SHARE), int(limits.max_text_mb * MB * TOTAL_FACTOR)
    max_text, sections, too_big, read, text_size, blank = int(limits.max_text_mb * MB), [], [], 0, 0, []
    for number, page in enumerate(doc, start=1):
        size = instructions_size(doc, page, min(page_cap, budget - read) + 1)
        if size > page_cap:
            too_big.append(number)
            continue
        if read + size > budget or text_size > max_text:
            stopped = _stopped(number, len(doc), read + size > budget, limits)
            return sections, _warnings(too_big, page_cap) + [stopped], blank
        read += size
        text = page.get_text("text").strip()
        if text:
            text_size += len(text)
            sections.append(Section(text=text, page=number))
        else:
            blank.append(number)
    return sections, _warnings(too_big, page_cap), blank


def _warnings(too_big: list[int], page_cap: int) -> list[str]:
    if not too_big:
        return []
    pages = ", ".join(map(str, too_big[:10])) + (f" and {len(too_big) - 10} more" if len(too_big) > 10 else "")
    return [f"page(s) {pages} not read: their drawing instructions are over {human_size(page_cap)} (half of "
            "limits.max_text_mb), too much to extract safely; raise limits.max_text_mb to read them"]


def _stopped(number: int, count: int, instructions: bool, limits: Limits) -> str:
    what = (f"the pages before it hold {TOTAL_FACTOR} x limits.max_text_mb of drawing instructions" if instructions
            else f"the pages before it hold over {human_size(limits.max_text_mb * MB)} of text (limits.max_text_mb)")
    pages = f"pages {number}-{count}" if number < count else f"page {number}"
    return f"{pages} not read: {what}; raise limits.max_text_mb to read the whole PDF"


def instructions_size(doc, page, cap: int) -> int:
    """Bytes of drawing instructions a page makes MuPDF read: its content streams and form XObjects, decoded.
    Counting stops past `cap`; a flate stream is inflated piece by piece and never kept."""
    xrefs = [*page.get_contents(), *(x[0] for x in page.get_xobjects())]
    total = 0
    for xref in dict.fromkeys(xrefs):
        try:
            total += _stream_size(doc, xref, cap - total)
        except (ValueError, RuntimeError):
            continue  # a broken reference in a damaged file: MuPDF has nothing to read there either
        if total > cap:
            break
    return total


def _stream_size(doc, xref: int, cap: int) -> int:
    kind, value = doc.xref_get_key(xref, "Filter")
    filters = re.findall(r"/(\w+)", value) if kind in ("name", "array") else None
    raw = doc.xref_stream_raw(xref) or b""
    if kind == "null":
        return len(raw)
    if filters and len(filters) == 1 and filters[0] in FLATE:
        return _inflated_size(raw, cap)
    if len(raw) * 64 > cap:  # another filter (LZW, run-length, ...) or an odd /Filter: decoded only when small
        return cap + 1
    return len(doc.xref_stream(xref) or b"")


def _inflated_size(raw: bytes, cap: int) -> int:
    inflater, size = zlib.decompressobj(), 0
    try:
        size += len(inflater.decompress(raw, PIECE))
        while inflater.unconsumed_tail and size <= cap:
            size += len(inflater.decompress(inflater.unconsumed_tail, PIECE))
    except zlib.error:
        pass  # MuPDF reads a damaged stream up to the damage too
    return size


def _pdf_date(value: str | None) -> int | None:
    m = re.match(r"D:(\d{4})(\d{2})?(\d{2})?", value or "")
    if not m:
        return None
    y, mo, d = int(m.group(1)), int(m.group(2) or 1), int(m.group(3) or 1)
    try:
        return int(datetime(y, mo, d, tzinfo=timezone.utc).timestamp())
    except ValueError:
        return None
