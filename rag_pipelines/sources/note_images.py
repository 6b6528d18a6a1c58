"""Images a note embeds (`![[scan.png]]`, `![](scan.png)`): their OCR'd text becomes part of the note.

So a search for words on a scan finds the note that shows it, cited as "Note > image: scan.png", with the note's
title, tags and dates. (The image file is also an item of its own when the source includes images, so an
attachment no note embeds is still found; the OCR cache reads each image once for both.) A target is resolved as
Obsidian does: a path from the vault's root, else relative to the note's folder, else the file of that name
anywhere in the vault (the shortest path first). Only files inside the source's roots are read, each within
limits.max_file_mb and the note's OCR budget; a missing or unreadable image is named in parse_warning.
"""

from __future__ import annotations

import hashlib
import posixpath
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterable

from rag_search.records import Document, Section

from rag_pipelines.parsers.errors import ParseError
from rag_pipelines.parsers.images import SUFFIXES, open_image, read_frames
from rag_pipelines.parsers.limits import MB, Limits
from rag_pipelines.parsers.ocr import OcrRun, OcrSettings

Resolver = Callable[[str, str], "Path | None"]  # (target, the note's relative path) → the image file


def image_targets(doc: Document) -> list[str]:
    """The embeds of a note that name an image, without #fragments, each once."""
    out = []
    for target in doc.metadata.get("embeds", []) if isinstance(doc.metadata.get("embeds"), list) else []:
        name = str(target).split("#", 1)[0].split("|", 1)[0].strip()
        if name.rsplit(".", 1)[-1].lower() in SUFFIXES and name not in out:
            out.append(name)
    return out


def with_embedded_images(doc: Document, note: str, resolve: Resolver, limits: Limits,
                         settings: OcrSettings) -> Document:
    """The note with a section per embedded image that has text ("image: scan.png"), and what OCR says of it."""
    targets = image_targets(doc)
    if not targets or not settings.enabled:
        return doc
    run, sections, problems = OcrRun(settings, limits), [], []
    for target in targets:
        path = resolve(target, note)
        if path is None:
            problems.append(f"{target} (not found)")
            continue
        try:
            sections += _image_sections(path, target, limits, run)
        except (ParseError, OSError) as exc:
            problems.append(f"{target} ({getattr(exc, 'kind', None) or 'unreadable'})")
    return _merged(doc, sections, run, problems)


def _image_sections(path: Path, target: str, limits: Limits, run: OcrRun) -> list[Section]:
    if path.stat().st_size > limits.max_file_mb * MB:
        raise ParseError("too_large", f"{target} is over limits.max_file_mb")
    data = path.read_bytes()
    name = posixpath.basename(target)
    image = open_image(data, name, limits)
    found = read_frames(image, hashlib.sha256(data).hexdigest(), name, run)
    return [Section(text=s.text, heading_path=(f"image: {name}",)) for s in found]


def _merged(doc: Document, sections: list[Section], run: OcrRun, problems: list[str]) -> Document:
    meta = dict(doc.metadata)
    if sections:
        meta.update({**run.metadata(), "text_source": "text+ocr",
                     "ocr_images": [s.heading_path[0].removeprefix("image: ") for s in sections]})
    warnings = [meta.get("parse_warning"), run.warning(),
                f"embedded images not read: {', '.join(problems[:10])}" if problems else None]
    if any(warnings):
        meta["parse_warning"] = "; ".join(w for w in warnings if w)
    return replace(doc, sections=doc.sections + tuple(sections), metadata=meta)


def shortest(paths: Iterable[str]) -> str | None:
    """Obsidian's pick among files of the same name: the shortest path, then the first in order."""
    return min(paths, key=lambda p: (p.count("/"), p), default=None)
