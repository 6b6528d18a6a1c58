"""PPTX → one section per slide ("Slide 3: Title", page 3) with its text, tables and speaker notes.

The slides are taken in the order of presentation.xml's slide list, each slide part read on its own (parts
over documents.XML_PART_MB are skipped and named). On a slide: the title placeholder (title, ctrTitle) is its
title; every other shape's paragraphs, group shapes included, and each table row (cells joined by " | ")
are its body, in the order of the slide's shape tree; date, footer and slide-number placeholders are left
out. Speaker notes are the body placeholder of the slide's notes slide. Bounded by limits.max_slides and
max_text_mb (see slides.py); the zip itself by limits.max_unzipped_mb (checked before this runs).
"""

from __future__ import annotations

import zipfile

from rag_search.records import Document

from rag_pipelines.parsers.documents import no_text, read_xml, stem
from rag_pipelines.parsers.errors import ParseError
from rag_pipelines.parsers.limits import Limits
from rag_pipelines.parsers.ooxml import core_properties, iso_date, open_package, relationships
from rag_pipelines.parsers.slides import DeckText
from rag_pipelines.parsers.titles import meta_title

LEFT_OUT = frozenset({"dt", "ftr", "sldNum", "hdr", "sldImg"})  # placeholders that hold no content of the slide
TITLES = frozenset({"title", "ctrTitle"})
FIX = "re-save it from PowerPoint, Keynote or LibreOffice Impress"


def parse_pptx(data: bytes, filename: str, mtime_ns: int | None = None, limits: Limits | None = None) -> Document:
    limits = limits or Limits()
    zf, main, root = open_package(data, filename, "ppt/presentation.xml", "PPTX", "presentation", FIX)
    rels = relationships(zf, main)
    slides = [rels[rid][1] for rid in _slide_ids(root) if rid in rels]
    deck, skipped = DeckText(limits, len(slides)), []
    for number, part in enumerate(slides, start=1):
        if not deck.room(number):
            break
        if not _read_slide(zf, part, number, deck):
            skipped.append(number)
    warnings = ([f"slide(s) {', '.join(map(str, skipped[:10]))} could not be read (damaged or over "
                 "16 MB of XML)"] if skipped else []) + ([deck.warning()] if deck.warning() else [])
    if not deck.sections and skipped:
        raise ParseError("corrupt", f"{filename}: {warnings[0]}, and the others hold no text; {FIX}")
    if not deck.sections:
        warnings.insert(0, no_text(f"no text on its {len(slides)} slide(s) (pictures only?)"))
    props = core_properties(zf)
    return Document(title=meta_title(props.get("title")) or (deck.titles[0] if deck.titles else stem(filename)),
                    sections=tuple(deck.sections), author=props.get("creator"),
                    ts=iso_date(props.get("modified")) or iso_date(props.get("created"))
                    or (mtime_ns // 1_000_000_000 if mtime_ns else None),
                    metadata={"slides": len(slides), **({"parse_warning": "; ".join(warnings)} if warnings else {})})


def _slide_ids(root) -> list[str]:
    """The relationship ids of the slide list, in presentation order."""
    return [next((v for k, v in el.attrib.items() if k.endswith("}id")), "") for el in root.iter("{*}sldId")]


def _read_slide(zf: zipfile.ZipFile, part: str, number: int, deck: DeckText) -> bool:
    root = read_xml(zf, part)
    if root is None:
        return False
    title, body = _shapes(root)
    notes_part = next((target for kind, target in relationships(zf, part).values() if kind.endswith("/notesSlide")),
                      None)
    notes_root = read_xml(zf, notes_part) if notes_part else None
    notes = _shapes(notes_root, only="body")[1] if notes_root is not None else []
    deck.add(number, title, body, notes)
    return True


def _shapes(root, only: str | None = None) -> tuple[str, list[str]]:
    """(the title placeholder's text, the other shapes' paragraphs and table rows) in shape-tree order; with
    `only`, just the placeholders of that type (a notes slide's body)."""
    title, body = "", []
    for shape in root.iter("{*}sp", "{*}graphicFrame"):
        if shape.tag.endswith("}graphicFrame"):
            body += [] if only else _table_rows(shape)
            continue
        ph = shape.find("{*}nvSpPr/{*}nvPr/{*}ph")
        kind = ph.get("type", "body" if ph.get("idx") else "") if ph is not None else ""
        if kind in LEFT_OUT or (only and kind != only):
            continue
        paragraphs = [p for p in (_paragraph(p) for p in shape.iterfind("{*}txBody/{*}p")) if p.strip()]
        if kind in TITLES and not title:
            title = " ".join(paragraphs)
        else:
            body += paragraphs
    return title, body


def _paragraph(p) -> str:
    return "".join("\n" if el.tag.endswith("}br") else (el.text or "") for el in p.iter("{*}t", "{*}br")).strip()


def _table_rows(frame) -> list[str]:
    rows = []
    for row in frame.iterfind(".//{*}tbl/{*}tr"):
        cells = (" ".join(filter(None, map(_paragraph, cell.iterfind(".//{*}p")))) for cell in row.iterfind("{*}tc"))
        line = " | ".join(c for c in cells if c)
        if line:
            rows.append(line)
    return rows
