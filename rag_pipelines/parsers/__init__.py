"""Parsers: bytes of an item → Document. Plain functions, no Dagster; chosen by file suffix."""

from __future__ import annotations

from typing import Callable

from rag_search.records import Document, Section

from rag_pipelines.parsers.documents import parse_docx, parse_epub, parse_html, parse_pdf
from rag_pipelines.parsers.errors import ParseError
from rag_pipelines.parsers.markdown import decode, parse_markdown

Parser = Callable[[bytes, str, "int | None"], Document]


def parse_text(data: bytes, filename: str, mtime_ns: int | None = None) -> Document:
    text = decode(data).strip()
    if not text:
        raise ParseError("no_text", "the file is empty")
    stem = filename.rsplit("/", 1)[-1]
    return Document(title=stem, sections=(Section(text=text),), ts=mtime_ns // 1_000_000_000 if mtime_ns else None)


PARSERS: dict[str, tuple[str, Parser]] = {
    "md": ("markdown", parse_markdown),
    "markdown": ("markdown", parse_markdown),
    "pdf": ("pdf", parse_pdf),
    "docx": ("docx", parse_docx),
    "html": ("html", parse_html),
    "htm": ("html", parse_html),
    "epub": ("epub", parse_epub),
    "txt": ("text", parse_text),
    "rst": ("text", parse_text),
    "csv": ("csv", parse_text),
    "json": ("json", parse_text),
    "yaml": ("yaml", parse_text),
    "yml": ("yaml", parse_text),
}


def source_type(suffix: str) -> str:
    return PARSERS.get(suffix.lower(), ("unsupported", None))[0]


def parse(data: bytes, filename: str, mtime_ns: int | None = None) -> Document:
    suffix = filename.rsplit(".", 1)[-1].lower() if "." in filename else ""
    if suffix not in PARSERS:
        raise ParseError("unsupported", f"no parser for '.{suffix}' files; remove it from the include globs")
    return PARSERS[suffix][1](data, filename, mtime_ns)


__all__ = ["PARSERS", "ParseError", "parse", "source_type"]
