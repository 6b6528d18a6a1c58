"""What the Office Open XML parsers (DOCX, PPTX, XLSX) share: relationships, core properties, streamed parts.

A package's parts point to each other through relationship parts (`_rels/x.xml.rels`); only targets inside the
package are followed (member_path refuses `../`). feed_part streams one member into an lxml parser target a
piece at a time (no tree, no DTD, no external entity, no network) until the target says it is full: the
OpenDocument parser reads its content.xml the same way.
"""

from __future__ import annotations

import posixpath
import zipfile
from datetime import datetime, timezone

from rag_pipelines.parsers.documents import member_path, read_xml
from rag_pipelines.parsers.webpage import label

RELS = "{http://schemas.openxmlformats.org/package/2006/relationships}Relationship"
PIECE = 1 << 20  # bytes of XML fed to the parser at a time


def rels_part(part: str) -> str:
    """The relationships part of a part: ppt/slides/slide1.xml → ppt/slides/_rels/slide1.xml.rels."""
    return posixpath.join(posixpath.dirname(part), "_rels", posixpath.basename(part) + ".rels")


def relationships(zf: zipfile.ZipFile, part: str) -> dict[str, tuple[str, str]]:
    """Relationship id → (type, member inside the package) of a part; external and escaping targets left out."""
    root = read_xml(zf, rels_part(part))
    out = {}
    for rel in root.iter(RELS) if root is not None else ():
        target = member_path(posixpath.dirname(part), rel.get("Target", "")) \
            if rel.get("TargetMode") != "External" else None
        if target:
            out[rel.get("Id", "")] = (rel.get("Type", ""), target)
    return out


def related(zf: zipfile.ZipFile, rels: str, base: str, kind: str) -> str | None:
    """The part a relationships part points to with a type ending in `kind` (inside the package only)."""
    root = read_xml(zf, rels)
    for rel in root.iter(RELS) if root is not None else ():
        if rel.get("Type", "").endswith(kind) and rel.get("TargetMode") != "External":
            return member_path(base, rel.get("Target", ""))
    return None


def main_part(zf: zipfile.ZipFile, default: str) -> str:
    """The package's main part (the officeDocument relationship of _rels/.rels), else `default`."""
    return related(zf, "_rels/.rels", "", "/officeDocument") or default


def open_package(data: bytes, filename: str, default: str, what: str, part_name: str, fix: str):
    """An OOXML package's zip, its main part's name and parsed root (PPTX, XLSX); a ParseError saying what to do
    when the main part is missing or unreadable."""
    from rag_pipelines.parsers.documents import open_zip
    from rag_pipelines.parsers.errors import ParseError

    zf = open_zip(data, filename)
    main = main_part(zf, default)
    root = read_xml(zf, main)
    if root is None:
        raise ParseError("corrupt", f"{filename} is not a readable {what} (no {part_name} part {main}); {fix}")
    return zf, main, root


def core_properties(zf: zipfile.ZipFile) -> dict[str, str]:
    """title, creator, created, modified of docProps/core.xml (those present and not empty)."""
    from lxml import etree

    root = read_xml(zf, related(zf, "_rels/.rels", "", "/core-properties") or "docProps/core.xml")
    wanted = {"title", "creator", "created", "modified"}
    found = ((etree.QName(el).localname, label(el.text or "")) for el in root.iter() if isinstance(el.tag, str)) \
        if root is not None else ()
    return {name: text for name, text in found if name in wanted and text}


def iso_date(value: str | None) -> int | None:
    """Unix seconds of an ISO 8601 date (UTC when it names no zone), None when absent or unreadable."""
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None
    except ValueError:
        return None
    return int(when.replace(tzinfo=when.tzinfo or timezone.utc).timestamp()) if when else None


def feed_part(zf: zipfile.ZipFile, part: str, target) -> bool:
    """Feed a member to an lxml parser target a piece at a time until `target.full`; False when it is missing.
    Broken XML keeps what was read before the break; a damaged member raises one of documents.ZIP_ERRORS."""
    from lxml import etree

    try:
        zf.getinfo(part)
    except KeyError:
        return False
    parser = etree.XMLParser(target=target, resolve_entities=False, load_dtd=False, no_network=True, recover=True)
    try:
        with zf.open(part) as stream:
            while not target.full and (piece := stream.read(PIECE)):
                parser.feed(piece)
        parser.close()
    except etree.LxmlError:
        pass
    return True


def split_tag(tag: str) -> tuple[str, str]:
    """'{namespace}name' → (namespace, name)."""
    namespace, _, name = tag[1:].partition("}") if tag[:1] == "{" else ("", "", tag)
    return namespace, name
