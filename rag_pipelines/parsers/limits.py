"""Per-item limits: what one file may cost to parse, and what one document may add to tags and metadata.

A file over a size limit is a ParseError("too_large") whose message names the setting to raise;
a document over a count limit is trimmed (first ones kept) and says so in metadata["parse_warning"], as
a PDF, DOCX, EPUB, PPTX, XLSX or OpenDocument file does when its text runs past limits.max_text_mb, a workbook
past limits.max_cells or a deck past limits.max_slides (its parser stops reading there). OCR is bounded per
image (limits.max_image_mpixels, pixels decoded at most) and per item (limits.max_ocr_pages, max_ocr_seconds).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rag_search.records import Document, Section

from rag_pipelines.parsers.errors import ParseError

MB = 1024 * 1024
TEXT_SUFFIXES = frozenset({"md", "markdown", "txt", "rst", "csv", "json", "yaml", "yml", "html", "htm", "canvas"})
TAG_CHARS = 100  # a longer "tag" is dropped: it is text, not a tag
KEY_CHARS = 100  # a longer metadata key is dropped
VALUE_CHARS = 1000  # a longer metadata string is cut here
LIST_ITEMS = 100  # a metadata list keeps its first items only
LABEL_CHARS = 300  # a title or heading longer than this is cut (they prefix every chunk)
MAX_LINKS = 2000  # links to other items kept per document


@dataclass(frozen=True)
class Limits:
    """Per-item limits, set in config.yaml under `limits:`; the defaults suit a laptop."""

    max_file_mb: float = 200  # any file, checked before it is read
    max_text_mb: float = 10  # raw size of text formats (md, txt, csv, json, yaml, rst, html, canvas); the text read
    # from a PDF, DOCX or EPUB (reading stops there), and a PDF's drawing instructions (see pdf.py)
    max_unzipped_mb: float = 300  # total uncompressed size of the members of a zipped document (DOCX, EPUB, PPTX,
    # XLSX, ODT/ODS/ODP)
    max_cells: int = 100_000  # non-empty cells read from one workbook (XLSX, ODS); the rest is not read
    max_slides: int = 2_000  # slides read from one deck (PPTX, ODP); the rest is not read
    max_ocr_pages: int = 100  # images OCR'd for one item (image-only PDF pages, a note's embedded images)
    max_ocr_seconds: float = 45  # time OCR may take for one item; pages after it are not read
    max_image_mpixels: float = 60  # an image over this many megapixels is not decoded (JPEGs are decoded reduced)
    max_chunks: int = 5000  # chunks of one item (enforced by the pipeline after chunking)
    max_metadata_keys: int = 64  # metadata keys kept per item, first ones first
    max_tags: int = 200  # tags kept per item, first ones first


def human_size(n: float) -> str:
    """312 MB, 1.5 MB, 40 KB, 12 bytes."""
    for unit, size in (("MB", MB), ("KB", 1024)):
        if n >= size:
            return f"{n / size:.1f}".removesuffix(".0") + f" {unit}"
    return f"{int(n)} bytes"


def is_text_format(filename: str) -> bool:
    return filename.rsplit(".", 1)[-1].lower() in TEXT_SUFFIXES if "." in filename else False


def check_size(data_len: int, filename: str, limits: Limits) -> None:
    """ParseError("too_large") when a file is over the size limit for its format (text or any)."""
    if is_text_format(filename) and data_len > limits.max_text_mb * MB:
        setting, limit, kind = "max_text_mb", limits.max_text_mb, "text files"
    elif data_len > limits.max_file_mb * MB:
        setting, limit, kind = "max_file_mb", limits.max_file_mb, "any file"
    else:
        return
    size, most = human_size(data_len), human_size(limit * MB)
    if size == most:
        size, most = f"{data_len:,} bytes", f"{int(limit * MB):,} bytes"
    raise ParseError("too_large", f"{filename} is {size}, over the {most} limit for {kind}; "
                                  f"raise limits.{setting} in config.yaml or exclude the file")


def bound_document(doc: Document, limits: Limits) -> Document:
    """The document with tags, metadata, links, title, author and headings capped; the cuts go in parse_warning."""
    dropped: list[str] = []
    tags = _bound_tags(doc.tags, limits.max_tags, dropped)
    links = doc.links[:MAX_LINKS]
    if len(links) < len(doc.links):
        dropped.append(f"{len(doc.links) - MAX_LINKS} links over {MAX_LINKS} dropped")
    meta = _bound_metadata(doc.metadata, limits.max_metadata_keys, dropped)
    title = _label(doc.title, dropped, "title")
    author = _label(doc.author, dropped, "author") if doc.author else doc.author
    sections = tuple(s if all(len(h) <= LABEL_CHARS for h in s.heading_path) else
                     Section(s.text, tuple(_label(h, dropped, "heading") for h in s.heading_path), s.page)
                     for s in doc.sections)
    if not dropped:
        return doc
    warning = "; ".join(dict.fromkeys(filter(None, [meta.pop("parse_warning", None), *dropped])))
    meta["parse_warning"] = warning
    return replace(doc, title=title, author=author, sections=sections, tags=tags, links=links, metadata=meta)


def _label(text: str, dropped: list[str], what: str) -> str:
    if len(text) <= LABEL_CHARS:
        return text
    dropped.append(f"{what} cut to {LABEL_CHARS} characters")
    return text[:LABEL_CHARS] + "…"


def _bound_tags(tags: tuple[str, ...], max_tags: int, dropped: list[str]) -> tuple[str, ...]:
    short = tuple(t for t in tags if isinstance(t, str) and len(t) <= TAG_CHARS)
    if len(short) < len(tags):
        dropped.append(f"{len(tags) - len(short)} tags longer than {TAG_CHARS} characters dropped")
    if len(short) > max_tags:
        dropped.append(f"{len(short) - max_tags} tags over the limit of {max_tags} dropped (limits.max_tags)")
    return short[:max_tags]


def _bound_metadata(meta: dict, max_keys: int, dropped: list[str]) -> dict:
    """First max_keys keys (parse_warning aside), each value a bounded scalar or list of scalars."""
    warning = meta.get("parse_warning")
    keys = [k for k in meta if k != "parse_warning" and isinstance(k, str) and len(k) <= KEY_CHARS]
    if len(keys) < len(meta) - (warning is not None):
        dropped.append(f"{len(meta) - (warning is not None) - len(keys)} metadata keys longer than {KEY_CHARS} "
                       "characters dropped")
    if len(keys) > max_keys:
        dropped.append(f"{len(keys) - max_keys} metadata keys over the limit of {max_keys} dropped "
                       "(limits.max_metadata_keys)")
    out = {k: _bound_value(meta[k], k, dropped) for k in keys[:max_keys]}
    if warning is not None:
        out["parse_warning"] = warning
    return {k: v for k, v in out.items() if v is not None}


def _bound_value(value, key: str, dropped: list[str]):
    if isinstance(value, str):
        if len(value) > VALUE_CHARS:
            dropped.append(f"metadata '{key}' cut to {VALUE_CHARS} characters")
            return value[:VALUE_CHARS] + "…"
        return value
    if isinstance(value, (list, tuple)):
        items = [v for v in value if v is None or isinstance(v, (str, int, float, bool))]
        if len(items) > LIST_ITEMS or len(items) < len(value):
            dropped.append(f"metadata '{key}' kept {min(len(items), LIST_ITEMS)} of {len(value)} values")
        return [v[:VALUE_CHARS] if isinstance(v, str) else v for v in items[:LIST_ITEMS]]
    if value is None or isinstance(value, (int, float, bool)):
        return value
    dropped.append(f"metadata '{key}' dropped (not a value or a list of values)")
    return None
