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


def parse_canvas(data: bytes, filename: str, mtime_ns: int | None = None) -> Document:
    """JSON Canvas 1.0: text nodes are Markdown; file nodes link to notes; link nodes keep their URL."""
    import json

    try:
        canvas = json.loads(decode(data) or "{}")
    except ValueError as exc:
        raise ParseError("corrupt", f"not valid JSON Canvas ({exc})") from exc
    nodes = canvas.get("nodes", []) if isinstance(canvas, dict) else []
    texts = [n.get("text", "") for n in nodes if n.get("type") == "text"]
    texts += [n.get("label", "") for n in nodes if n.get("type") == "group"]
    texts += [n.get("url", "") for n in nodes if n.get("type") == "link"]
    links = tuple(n["file"].rsplit(".", 1)[0] for n in nodes if n.get("type") == "file" and n.get("file"))
    sections = tuple(Section(text=t.strip()) for t in texts if t and t.strip())
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
    "txt": ("text", parse_text),
    "rst": ("text", parse_text),
    "csv": ("csv", parse_text),
    "json": ("json", parse_text),
    "yaml": ("yaml", parse_text),
    "yml": ("yaml", parse_text),
}


def source_type(suffix: str) -> str:
    return PARSERS.get(suffix.lower(), ("unsupported", None))[0]


def parse(data: bytes, filename: str, mtime_ns: int | None = None, limits=None) -> Document:
    suffix = filename.rsplit(".", 1)[-1].lower() if "." in filename else ""
    if suffix not in PARSERS:
        raise ParseError("unsupported", f"no parser for '.{suffix}' files; remove it from the include globs")
    return PARSERS[suffix][1](data, filename, mtime_ns)


__all__ = ["PARSERS", "ParseError", "parse", "source_type"]
