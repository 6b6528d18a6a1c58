"""PDF (pymupdf, page numbers kept), DOCX (python-docx, headings and tables), HTML (headings), EPUB (chapters).

DOCX and EPUB are zip archives: check_zip reads only their table of contents and refuses one that would
unpack past limits.max_unzipped_mb before python-docx or ebooklib decompress anything. (Python's zipfile
never inflates a member past its declared size, so the declared sizes can be trusted.)
"""

from __future__ import annotations

import io
import re
import zipfile
from datetime import timezone

from rag_search.records import Document, Section

from rag_pipelines.parsers.errors import ParseError
from rag_pipelines.parsers.limits import MB, Limits, human_size
from rag_pipelines.parsers.webpage import html_sections

ZIP_DIRECTORY_MB = 4  # a bigger table of contents (~90k members) is no DOCX/EPUB
ZIP_BOMB_RATIO = 100  # an archive inflating more than this is a bomb, not a document (real ones: ~3-20x)


def _stem(filename: str) -> str:
    return filename.rsplit("/", 1)[-1].rsplit(".", 1)[0]


def check_zip(data: bytes, filename: str, limits: Limits) -> None:
    """ParseError("zip_bomb" or "too_large") when the archive would unpack past the limit; nothing is inflated."""
    fix = "exclude the file, or raise limits.max_unzipped_mb in config.yaml if you trust it"
    directory = _zip_directory_size(data)
    if directory is not None and directory > ZIP_DIRECTORY_MB * MB:
        raise ParseError("zip_bomb", f"{filename} lists {human_size(directory)} of archive members, more than any "
                                     "document has; it was not opened; exclude the file")
    try:
        members = zipfile.ZipFile(io.BytesIO(data)).infolist()
    except (zipfile.BadZipFile, ValueError, EOFError) as exc:
        raise ParseError("corrupt", f"{filename} is not a readable zip archive ({exc}), as DOCX and EPUB files are; "
                                    "re-save it from its application") from exc
    total = sum(m.file_size for m in members)
    if total <= limits.max_unzipped_mb * MB:
        return
    ratio = total / max(sum(m.compress_size for m in members), 1)
    if ratio > ZIP_BOMB_RATIO:
        biggest = max(members, key=lambda m: m.file_size)
        raise ParseError("zip_bomb", f"{filename} would unpack {ratio:,.0f}x to {human_size(total)} (its member "
                                     f"{biggest.filename} alone to {human_size(biggest.file_size)}), like a zip bomb; "
                                     f"it was not unpacked; {fix}")
    raise ParseError("too_large", f"{filename} would unpack to {human_size(total)}, over the "
                                  f"{human_size(limits.max_unzipped_mb * MB)} limit for DOCX/EPUB contents; {fix}")


def _zip_directory_size(data: bytes) -> int | None:
    """Size of a zip's central directory from its end record (all ones for ZIP64), or None when there is none."""
    end = data.rfind(b"PK\x05\x06", max(0, len(data) - 22 - 65535))
    if end < 0 or end + 22 > len(data):
        return None
    return int.from_bytes(data[end + 12 : end + 16], "little")


def parse_pdf(data: bytes, filename: str, mtime_ns: int | None = None) -> Document:
    import pymupdf

    try:
        doc = pymupdf.open(stream=data, filetype="pdf")
    except Exception as exc:
        raise ParseError("corrupt", f"not a readable PDF ({exc})") from exc
    with doc:
        if doc.needs_pass:
            raise ParseError("encrypted", "the PDF is password-protected; remove the password to index it")
        sections = []
        for number, page in enumerate(doc, start=1):
            text = page.get_text("text").strip()
            if text:
                sections.append(Section(text=text, page=number))
        meta = doc.metadata or {}
    if not sections:
        raise ParseError("no_text", "no extractable text (a scanned PDF? run OCR on it first, e.g. ocrmypdf)")
    return Document(
        title=(meta.get("title") or "").strip() or _stem(filename),
        sections=tuple(sections),
        ts=_pdf_date(meta.get("creationDate")) or (mtime_ns // 1_000_000_000 if mtime_ns else None),
        author=(meta.get("author") or "").strip() or None,
        metadata={"pages": len(sections)},
    )


def _pdf_date(value: str | None) -> int | None:
    m = re.match(r"D:(\d{4})(\d{2})?(\d{2})?", value or "")
    if not m:
        return None
    from datetime import datetime

    y, mo, d = int(m.group(1)), int(m.group(2) or 1), int(m.group(3) or 1)
    try:
        return int(datetime(y, mo, d, tzinfo=timezone.utc).timestamp())
    except ValueError:
        return None


def parse_docx(data: bytes, filename: str, mtime_ns: int | None = None) -> Document:
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    try:
        d = docx.Document(io.BytesIO(data))
    except Exception as exc:
        raise ParseError("corrupt", f"not a readable DOCX ({exc})") from exc
    sections, path, lines, title = [], [], [], None

    def flush():
        text = "\n".join(lines).strip()
        if text:
            sections.append(Section(text=text, heading_path=tuple(h for _, h in path)))
        lines.clear()

    for block in d.iter_inner_content():
        if isinstance(block, Paragraph):
            style = (block.style.name if block.style is not None else "") or ""
            text = block.text.strip()
            level = _heading_level(style)
            if level and text:
                flush()
                path = [(lv, h) for lv, h in path if lv < level] + [(level, text)]
                title = title or (text if style == "Title" or level == 1 else None)
            elif text:
                lines.append(text)
        elif isinstance(block, Table):
            for row in block.rows:
                cells = [c.text.strip() for c in row.cells]
                lines.append(" | ".join(dict.fromkeys(cells)))
    flush()
    props = d.core_properties
    when = props.modified or props.created
    return Document(
        title=(props.title or "").strip() or title or _stem(filename),
        sections=tuple(sections),
        ts=int(when.replace(tzinfo=when.tzinfo or timezone.utc).timestamp()) if when else
        (mtime_ns // 1_000_000_000 if mtime_ns else None),
        author=(props.author or "").strip() or None,
    )


def _heading_level(style: str) -> int:
    if style == "Title":
        return 1
    m = re.match(r"Heading (\d)", style)
    return int(m.group(1)) if m else 0


def parse_html(data: bytes, filename: str, mtime_ns: int | None = None) -> Document:
    title, sections = html_sections(data)
    if not sections:
        raise ParseError("no_text", "the page has no text")
    return Document(title=title or _stem(filename), sections=tuple(sections),
                    ts=mtime_ns // 1_000_000_000 if mtime_ns else None)


def parse_epub(data: bytes, filename: str, mtime_ns: int | None = None) -> Document:
    import ebooklib
    from ebooklib import epub

    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".epub") as tmp:
        tmp.write(data)
        tmp.flush()
        try:
            book = epub.read_epub(tmp.name, options={"ignore_ncx": True})
        except Exception as exc:
            raise ParseError("corrupt", f"not a readable EPUB ({exc})") from exc
    titles = {}
    for link in _flatten_toc(book.toc):
        titles.setdefault(link.href.split("#")[0], link.title)
    sections = []
    for idref, _ in book.spine:
        item = book.get_item_with_id(idref)
        if item is None or item.get_type() != ebooklib.ITEM_DOCUMENT:
            continue
        chapter_title, chapter = html_sections(item.get_content())
        name = titles.get(item.get_name()) or chapter_title
        for s in chapter:
            path = s.heading_path if (s.heading_path[:1] == (name,) or not name) else (name,) + s.heading_path
            sections.append(Section(text=s.text, heading_path=path))
    if not sections:
        raise ParseError("no_text", "the book has no text chapters")
    meta = lambda field: (book.get_metadata("DC", field) or [[None]])[0][0]  # noqa: E731
    return Document(title=meta("title") or _stem(filename), sections=tuple(sections), author=meta("creator"),
                    ts=mtime_ns // 1_000_000_000 if mtime_ns else None)


def _flatten_toc(toc):
    for entry in toc:
        if isinstance(entry, tuple):
            yield entry[0]
            yield from _flatten_toc(entry[1])
        else:
            yield entry
