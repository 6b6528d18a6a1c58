"""Parsers: bytes of an item → Document. Plain functions, no Dagster; chosen by file suffix.

`parse` guards every parser: size limits first, an empty file (0 bytes) of a format that cannot be empty,
then binary detection for text formats and a zip-bomb check for the zipped ones (DOCX, EPUB, PPTX, XLSX,
ODT/ODS/ODP), all before any parser sees the bytes; the document parsers get the limits to bound their own
work; afterwards what the document adds to tags, metadata and links is bounded (see limits.py). Given
OcrSettings, image files and the image-only pages of PDFs are read by OCR (ocr.py), one OcrRun per item.
Legacy binary Office files (.doc, .xls, .ppt) are recorded as `unsupported` with how to convert them. A document
with no text (a deck or a workbook of pictures, a scan OCR finds nothing on or that OCR is off for) is a Document
without sections, indexed by its names and said in its parse_warning: an item, not a failure retried every run.
Generic metadata titles ("PowerPoint Presentation", "Adobe Photoshop PDF") give way to the file name (titles.py).
"""

from __future__ import annotations

import re
from typing import Callable

from rag_search.records import Document, Section

from rag_pipelines.parsers.documents import check_zip, parse_html
from rag_pipelines.parsers.docx import parse_docx
from rag_pipelines.parsers.epub import parse_epub
from rag_pipelines.parsers.errors import ParseError
from rag_pipelines.parsers.images import SUFFIXES as IMAGE_SUFFIXES, parse_image
from rag_pipelines.parsers.limits import Limits, bound_document, check_size, is_text_format
from rag_pipelines.parsers.markdown import parse_markdown
from rag_pipelines.parsers.ocr import OcrRun, OcrSettings
from rag_pipelines.parsers.odf import parse_odf
from rag_pipelines.parsers.pdf import parse_pdf
from rag_pipelines.parsers.pptx import parse_pptx
from rag_pipelines.parsers.text import binary_reason, decode
from rag_pipelines.parsers.xlsx import parse_xlsx

Parser = Callable[[bytes, str, "int | None"], Document]


def parse_text(data: bytes, filename: str, mtime_ns: int | None = None) -> Document:
    text = decode(data).strip()
    if not text:
        raise ParseError("no_text", "the file is empty")
    stem = filename.rsplit("/", 1)[-1]
    return Document(title=stem, sections=(Section(text=text),), ts=mtime_ns // 1_000_000_000 if mtime_ns else None)


def parse_plain(data: bytes, filename: str, mtime_ns: int | None = None) -> Document:
    """A .txt/.rst note: a short first line set off by a blank line (or an RST underline) is its title, as note apps
    treat it; otherwise the file name is."""
    doc = parse_text(data, filename, mtime_ns)
    text = doc.sections[0].text
    head, _, rest = text.partition("\n")
    underline, _, after = rest.partition("\n")
    if _RST_UNDERLINE.fullmatch(underline.strip()) and len(underline.strip()) >= len(head.strip()) > 0:
        rest = after  # Title\n=====
    elif underline.strip():
        return doc
    head, rest = head.strip(), rest.strip()
    if not rest or not _is_title(head):
        return doc
    return Document(title=head, sections=(Section(text=rest),), ts=doc.ts)


_RST_UNDERLINE = re.compile(r"([=\-~^\"'`#*+])\1{2,}")


def _is_title(line: str) -> bool:
    return 0 < len(line) <= 150 and len(line.split()) <= 25 and line[-1] not in ",;:" and not line.startswith(("-", "*"))


def parse_canvas(data: bytes, filename: str, mtime_ns: int | None = None) -> Document:
    """JSON Canvas 1.0: text nodes are Markdown; file nodes link to notes; link nodes keep their URL."""
    import json

    try:
        canvas = json.loads(decode(data) or "{}")
    except (ValueError, RecursionError) as exc:
        raise ParseError("corrupt", f"not valid JSON Canvas ({exc})") from exc
    nodes = canvas.get("nodes", []) if isinstance(canvas, dict) else []
    nodes = [n for n in nodes if isinstance(n, dict)] if isinstance(nodes, list) else []
    texts = [n.get("text", "") for n in nodes if n.get("type") == "text"]
    texts += [n.get("label", "") for n in nodes if n.get("type") == "group"]
    texts += [n.get("url", "") for n in nodes if n.get("type") == "link"]
    files = [n.get("file") for n in nodes if n.get("type") == "file"]
    links = tuple(f.rsplit(".", 1)[0] for f in files if isinstance(f, str) and f)
    sections = tuple(Section(text=t.strip()) for t in texts if isinstance(t, str) and t.strip())
    stem = filename.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    return Document(title=stem, sections=sections, links=links,
                    ts=mtime_ns // 1_000_000_000 if mtime_ns else None)


PARSERS: dict[str, tuple[str, Parser]] = {
    "md": ("markdown", parse_markdown),
    "markdown": ("markdown", parse_markdown),
    "pdf": ("pdf", parse_pdf),
    "docx": ("docx", parse_docx),
    "html": ("html", parse_html),
    "htm": ("html", parse_html),
    "epub": ("epub", parse_epub),
    "canvas": ("canvas", parse_canvas),
    "txt": ("text", parse_plain),
    "rst": ("text", parse_plain),
    "csv": ("csv", parse_text),
    "json": ("json", parse_text),
    "yaml": ("yaml", parse_text),
    "yml": ("yaml", parse_text),
    "pptx": ("pptx", parse_pptx),
    "xlsx": ("xlsx", parse_xlsx),
    "xlsm": ("xlsx", parse_xlsx),
    "odt": ("odt", parse_odf),
    "ods": ("ods", parse_odf),
    "odp": ("odp", parse_odf),
    **{suffix: ("image", parse_image) for suffix in IMAGE_SUFFIXES},
}
# Word, Excel and PowerPoint 97-2003 files: binary formats no parser here reads; each is a clear failure.
LEGACY = {"doc": ("Word", "docx"), "xls": ("Excel", "xlsx"), "ppt": ("PowerPoint", "pptx")}
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # a compound file: legacy Office, or an encrypted DOCX/XLSX/PPTX


# A parser whose Document for the same bytes changed gets a higher version: it is part of the content identity
# of its files (content_id), so files indexed by the older parser are parsed again once (vectors come from the
# cache). 2: streaming DOCX (text after an entity kept), EPUB chapters split at the table of contents' anchors,
# PDF reading bounded by the limits. 3 (2 for the others): a generic metadata title ("PowerPoint Presentation",
# "Adobe Photoshop PDF", "Microsoft Word - x.doc": parsers/titles.py) gives way to the file's own name; a file with
# no text is an item with no text, not a failure. Markdown 2: its inline HTML read as its text (issue 35).
PARSER_VERSIONS = {"pdf": 3, "docx": 3, "epub": 3, "pptx": 2, "xlsx": 2, "odt": 2, "ods": 2, "odp": 2, "html": 2,
                   "markdown": 2}
BOUNDED = frozenset({"pdf", "docx", "epub", "pptx", "xlsx", "odt", "ods", "odp", "image"})  # take the limits
ZIPPED = frozenset({"docx", "epub", "pptx", "xlsx", "odt", "ods", "odp"})  # checked for zip bombs first
READS_IMAGES = frozenset({"pdf", "image"})  # parsers that take an OcrRun
MAY_BE_EMPTY = frozenset({"markdown", "canvas"})  # an empty note or canvas is still a note (its name is its title)


def source_type(suffix: str) -> str:
    suffix = suffix.lower()
    return suffix if suffix in LEGACY else PARSERS.get(suffix, ("unsupported", None))[0]


def content_id(sha256: str, suffix: str, ocr: OcrSettings | None = None) -> str:
    """A file's content identity: its bytes' sha256, plus its parser's version when that is past the first, plus
    for a PDF or an image the OCR settings that read it (ocr_tag)."""
    return sha256 + version_tag(suffix) + ocr_tag(suffix, ocr)


def version_tag(suffix: str) -> str:
    """The parser's version past the first ("~p2"), else "": part of a file's content identity and change stamp, so
    files an older parser read are read again once."""
    version = PARSER_VERSIONS.get(source_type(suffix), 1)
    return "" if version == 1 else f"~p{version}"


def ocr_tag(suffix: str, ocr: OcrSettings | None) -> str:
    """What OCR reads a file of this suffix with ("" for none): part of its change stamp and content identity, so
    that turning OCR on or changing its engine or languages reads PDFs and images again (once)."""
    if source_type(suffix) not in READS_IMAGES or ocr is None or not ocr.enabled:
        return ""
    return f"~ocr-{ocr.engine}-{'+'.join(ocr.languages)}"


def parse(data: bytes, filename: str, mtime_ns: int | None = None, limits: Limits | None = None,
          ocr: OcrSettings | None = None) -> Document:
    """The Document of one file's bytes, or ParseError (too_large, empty, binary, zip_bomb, corrupt, ...).
    With `ocr` (enabled), images and image-only PDF pages are read by OCR."""
    limits = limits or Limits()
    suffix = filename.rsplit(".", 1)[-1].lower() if "." in filename else ""
    if suffix in LEGACY:
        raise ParseError("unsupported", _legacy(filename, suffix))
    if suffix not in PARSERS:
        raise ParseError("unsupported", f"no parser for '.{suffix}' files; remove it from the include globs")
    stype, parser = PARSERS[suffix]
    check_size(len(data), filename, limits)
    if not data and stype not in MAY_BE_EMPTY:
        raise ParseError("empty", f"{filename} is empty (0 bytes), so there is nothing to index; if it should have "
                                  "content, restore it from a backup or save it again from its application, "
                                  "otherwise delete it or exclude it")
    if is_text_format(filename) and (reason := binary_reason(data)):
        raise ParseError("binary", f"{filename} looks like binary data ({reason}), not {stype}; exclude it from "
                                   "the collection or give it the suffix of its real format")
    if stype in ZIPPED:
        if data.startswith(OLE_MAGIC):
            raise ParseError("encrypted", f"{filename} is not a zip archive as .{suffix} files are but an OLE compound "
                                          "file: password-protected (remove the password and save it again to index "
                                          f"it), or an old binary file renamed (save it as .{suffix})")
        check_zip(data, filename, limits)
    if stype in READS_IMAGES:
        run = OcrRun(ocr, limits) if ocr is not None and ocr.enabled else None
        doc = parser(data, filename, mtime_ns, limits, run)
    else:
        doc = parser(data, filename, mtime_ns, limits) if stype in BOUNDED else parser(data, filename, mtime_ns)
    return bound_document(doc, limits)


def _legacy(filename: str, suffix: str) -> str:
    app, modern = LEGACY[suffix]
    return (f"{filename} is a {app} 97-2003 file (.{suffix}), a binary format local-rag does not read; save it as "
            f".{modern} ({app}: File > Save As; or `soffice --headless --convert-to {modern} FILE`), or exclude "
            f"**/*.{suffix}")


__all__ = ["PARSERS", "PARSER_VERSIONS", "Limits", "OcrSettings", "ParseError", "content_id", "ocr_tag", "parse", "parse_canvas",
           "parse_plain", "parse_text", "source_type", "version_tag"]
