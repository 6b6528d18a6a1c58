"""OpenDocument (ODT, ODS, ODP: LibreOffice, OpenOffice, Google Docs exports) → Document, content.xml streamed.

A text document is split at its headings (text:h outline levels, like DOCX); a spreadsheet's sheets read row by
row with their headers (sheets.py); a presentation's pages become slides with their notes (slides.py). Title,
author and date come from meta.xml. A password-protected file (its manifest lists encryption data) is
recorded as `encrypted`. The content is fed to lxml a piece at a time (see odf_content.py), bounded by
limits.max_text_mb, max_cells and max_slides; the zip by limits.max_unzipped_mb (checked before this runs).
"""

from __future__ import annotations

import zipfile

from rag_search.records import Document

from rag_pipelines.parsers.docx import _sections as heading_sections
from rag_pipelines.parsers.documents import ZIP_ERRORS, no_text, open_zip, read_xml, stem
from rag_pipelines.parsers.errors import ParseError
from rag_pipelines.parsers.limits import MB, Limits, human_size
from rag_pipelines.parsers.odf_content import Content
from rag_pipelines.parsers.ooxml import feed_part, iso_date
from rag_pipelines.parsers.titles import meta_title
from rag_pipelines.parsers.webpage import label

MODES = {"odt": "text", "ods": "spreadsheet", "odp": "presentation"}
FIX = "re-save it from LibreOffice (or the application that made it)"


def parse_odf(data: bytes, filename: str, mtime_ns: int | None = None, limits: Limits | None = None) -> Document:
    limits = limits or Limits()
    mode = MODES.get(filename.rsplit(".", 1)[-1].lower(), "text")
    zf = open_zip(data, filename)
    if _encrypted(zf):
        raise ParseError("encrypted", f"{filename} is password-protected; save it without a password to index it")
    content = Content(mode, limits)
    try:
        found = feed_part(zf, "content.xml", content)
    except ZIP_ERRORS as exc:
        raise ParseError("corrupt", f"{filename}: its content.xml could not be unpacked ({exc}); {FIX}") from exc
    if not found:
        raise ParseError("corrupt", f"{filename} is not a readable OpenDocument file (no content.xml); {FIX}")
    content.close()
    title, sections, warning = _sections(content, mode, limits)
    if not sections:
        warning = "; ".join(filter(None, [no_text("it holds no text (pictures only?)"), warning]))
    meta = _meta(zf)
    extra = {"sheets": content.book.sheets[:100]} if mode == "spreadsheet" else \
        {"slides": content.slide_number} if mode == "presentation" else {}
    return Document(title=meta_title(meta.get("title")) or title or stem(filename), sections=tuple(sections),
                    author=meta.get("creator") or meta.get("initial-creator"),
                    ts=iso_date(meta.get("date")) or iso_date(meta.get("creation-date"))
                    or (mtime_ns // 1_000_000_000 if mtime_ns else None),
                    metadata={**extra, **({"parse_warning": warning} if warning else {})})


def _sections(content: Content, mode: str, limits: Limits):
    """(a title found in the content, sections, what was not read)."""
    if mode == "spreadsheet":
        return None, content.book.sections, content.book.warning()
    if mode == "presentation":
        return (content.deck.titles or [None])[0], content.deck.sections, content.deck.warning()
    title, sections = heading_sections(content.lines, {})
    cut = (f"the text after {human_size(limits.max_text_mb * MB)} was not read (limits.max_text_mb; raise it to "
           "index the whole document)") if content.full else None
    return title, sections, cut


def _encrypted(zf: zipfile.ZipFile) -> bool:
    root = read_xml(zf, "META-INF/manifest.xml")
    return root is not None and next(root.iter("{*}encryption-data"), None) is not None


def _meta(zf: zipfile.ZipFile) -> dict[str, str]:
    """title, creator, initial-creator, date, creation-date of meta.xml (those present and not empty)."""
    from lxml import etree

    root = read_xml(zf, "meta.xml")
    wanted = {"title", "creator", "initial-creator", "date", "creation-date"}
    found = ((etree.QName(el).localname, label(el.text or "")) for el in root.iter() if isinstance(el.tag, str)) \
        if root is not None else ()
    out: dict[str, str] = {}
    for name, text in found:
        if name in wanted and text:
            out.setdefault(name, text)
    return out
