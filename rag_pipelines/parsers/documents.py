"""What the document parsers share: the zip guard and member access of DOCX/EPUB, and HTML pages.

DOCX and EPUB are zip archives: check_zip reads only their table of contents and refuses one that would
unpack past limits.max_unzipped_mb before anything is decompressed. (Python's zipfile never inflates a
member past its declared size, so the declared sizes can be trusted.) Members are named by paths inside
the package; member_path refuses one that leaves it (`../`), and read_xml parses a small part without
DTDs, entity expansion from outside or network access. The formats: pdf.py, docx.py, epub.py.
"""

from __future__ import annotations

import io
import posixpath
import zipfile
import zlib
from urllib.parse import unquote

from rag_search.records import Document

from rag_pipelines.parsers.errors import ParseError
from rag_pipelines.parsers.limits import MB, Limits, human_size
from rag_pipelines.parsers.titles import meta_title
from rag_pipelines.parsers.webpage import html_sections

ZIP_DIRECTORY_MB = 4  # a bigger table of contents (~90k members) is no DOCX/EPUB
ZIP_BOMB_RATIO = 100  # an archive inflating more than this is a bomb, not a document (real ones: ~3-20x)
XML_PART_MB = 16  # a package part read whole (container, OPF, NCX, nav, relationships, properties) is no bigger
# what reading a member can raise: a bad CRC or stream, an unsupported method, a password-protected member
ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, ValueError, OSError)


def stem(filename: str) -> str:
    return filename.rsplit("/", 1)[-1].rsplit(".", 1)[0]


def no_text(what: str) -> str:
    """The parse_warning of an item with no text (a deck or a scan of pictures, an empty workbook): it is indexed
    with its names (title, file name) and not retried; a change to the file (or to its OCR settings) reads it again."""
    return f"{what}; only its name is indexed"


def check_zip(data: bytes, filename: str, limits: Limits) -> None:
    """ParseError("zip_bomb" or "too_large") when the archive would unpack past the limit; nothing is inflated."""
    fix = "exclude the file, or raise limits.max_unzipped_mb in config.yaml if you trust it"
    directory = _zip_directory_size(data)
    if directory is not None and directory > ZIP_DIRECTORY_MB * MB:
        raise ParseError("zip_bomb", f"{filename} lists {human_size(directory)} of archive members, more than any "
                                     "document has; it was not opened; exclude the file")
    members = open_zip(data, filename).infolist()
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


def open_zip(data: bytes, filename: str) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError, EOFError) as exc:
        raise ParseError("corrupt", f"{filename} is not a readable zip archive ({exc}), as DOCX and EPUB files are; "
                                    "re-save it from its application") from exc


def member_path(base: str, href: str) -> str | None:
    """The member an href names (relative to the folder `base`, or to the root when it starts with '/'), or None
    when the path leaves the archive or names nothing."""
    path = unquote(href.partition("#")[0]).replace("\\", "/")
    joined = posixpath.normpath(path.lstrip("/") if path.startswith("/") else posixpath.join(base, path))
    return None if not path or joined == "." or joined == ".." or joined.startswith("../") else joined


def safe_xml_parser():
    """An lxml XML parser that loads no DTD, resolves no external entity and never uses the network."""
    from lxml import etree

    return etree.XMLParser(resolve_entities=False, load_dtd=False, no_network=True, huge_tree=False, recover=True,
                           remove_comments=True, remove_pis=True)


def read_xml(zf: zipfile.ZipFile, name: str, html: bool = False):
    """The root element of a small XML (or HTML) member; None when it is missing, over XML_PART_MB or unreadable."""
    from lxml import etree

    try:
        if zf.getinfo(name).file_size > XML_PART_MB * MB:
            return None
        parser = etree.HTMLParser(no_network=True, recover=True) if html else safe_xml_parser()
        return etree.fromstring(zf.read(name), parser)
    except (KeyError, etree.LxmlError, *ZIP_ERRORS):
        return None


def parse_html(data: bytes, filename: str, mtime_ns: int | None = None) -> Document:
    title, sections = html_sections(data)
    if not sections:
        raise ParseError("no_text", "the page has no text")
    return Document(title=meta_title(title) or stem(filename), sections=tuple(sections),
                    ts=mtime_ns // 1_000_000_000 if mtime_ns else None)
