"""EPUB → chapters labelled by the book's table of contents, read member by member with zipfile and lxml.

The labels come from the EPUB 3 nav document, else the EPUB 2 NCX. Entries point at a spine file or into it
(`chapter.xhtml#id`): a file holding several chapters is split at the anchored elements, so each passage is
labelled with the entry that covers it (its path in the table of contents, whitespace collapsed); text before
a file's first anchor keeps the file's own entry, else the label in effect at the end of the previous file.
A manifest entry whose path leaves the archive (`../../evil.xhtml`) is never read, and a missing one is
skipped: both are named in metadata["parse_warning"] and the other chapters are indexed. Reading stops once
limits.max_text_mb of text is collected (also said in parse_warning).
"""

from __future__ import annotations

import posixpath
import zipfile
from dataclasses import dataclass, field
from urllib.parse import unquote

from rag_search.records import Document, Section

from rag_pipelines.parsers.documents import ZIP_ERRORS, member_path, no_text, open_zip, read_xml, stem
from rag_pipelines.parsers.errors import ParseError
from rag_pipelines.parsers.limits import MB, Limits, human_size
from rag_pipelines.parsers.titles import meta_title
from rag_pipelines.parsers.webpage import anchored_sections, label

OPF, DC = "{http://www.idpf.org/2007/opf}", "{http://purl.org/dc/elements/1.1/}"
NCX = "{http://www.daisy.org/z3986/2005/ncx/}"
CONTAINER = "{urn:oasis:names:tc:opendocument:xmlns:container}"
HTML_TYPES = frozenset({"application/xhtml+xml", "text/html", "application/xml"})
HTML_SUFFIXES = (".xhtml", ".html", ".htm", ".XHTML", ".HTML", ".HTM")
MAX_DEPTH = 32  # levels of the table of contents read (deeper ones are part of their parent)
FIX = "re-save it from the application that made it, or convert it again (e.g. with calibre)"


@dataclass
class Package:
    """What the package document says: title, author, manifest (id → (member or None, media type, properties))."""

    title: str | None = None
    author: str | None = None
    manifest: dict[str, tuple[str | None, str, str]] = field(default_factory=dict)
    hrefs: dict[str, str] = field(default_factory=dict)  # id → the href as written (for warnings)
    spine: list[str] = field(default_factory=list)
    ncx: str | None = None


def parse_epub(data: bytes, filename: str, mtime_ns: int | None = None, limits: Limits | None = None) -> Document:
    limits = limits or Limits()
    zf = open_zip(data, filename)
    book = _package(zf, filename)
    toc = _toc(zf, book)
    sections, skipped, cut = _chapters(zf, book, toc, int(limits.max_text_mb * MB))
    warnings = _skipped_warning(skipped) + ([cut] if cut else [])
    if not sections and warnings:
        raise ParseError("corrupt", f"the book has no text chapters that could be read ({'; '.join(warnings)}); {FIX}")
    if not sections:
        warnings.insert(0, no_text("the book has no text chapters (pictures only?)"))
    return Document(title=meta_title(book.title) or stem(filename), sections=tuple(sections), author=book.author,
                    ts=mtime_ns // 1_000_000_000 if mtime_ns else None,
                    metadata={"parse_warning": "; ".join(warnings)} if warnings else {})


def _package(zf: zipfile.ZipFile, filename: str) -> Package:
    """The OPF package named by META-INF/container.xml (else the first .opf in the archive)."""
    names = set(zf.namelist())
    opf = None
    if "META-INF/container.xml" in names:
        root = read_xml(zf, "META-INF/container.xml")
        found = root.find(f".//{CONTAINER}rootfile") if root is not None else None
        opf = member_path("", found.get("full-path", "")) if found is not None else None
    opf = opf if opf in names else next((n for n in sorted(names) if n.lower().endswith(".opf")), None)
    root = read_xml(zf, opf) if opf else None
    if root is None:
        raise ParseError("corrupt", f"{filename} is not a readable EPUB (no package document: META-INF/container.xml "
                                    f"names none and there is no .opf file); {FIX}")
    base, book = posixpath.dirname(opf), Package()
    book.title = _first_text(root, f"{OPF}metadata/{DC}title")
    book.author = _first_text(root, f"{OPF}metadata/{DC}creator")
    for item in root.iterfind(f"{OPF}manifest/{OPF}item"):
        key, href = item.get("id", ""), item.get("href", "")
        book.manifest[key] = (member_path(base, href), item.get("media-type", ""), item.get("properties", ""))
        book.hrefs[key] = href
    spine = root.find(f"{OPF}spine")
    if spine is not None:
        book.spine = [ref.get("idref", "") for ref in spine.iterfind(f"{OPF}itemref")]
        book.ncx = spine.get("toc")
    return book


def _first_text(root, path: str) -> str | None:
    found = root.find(path)
    return (label(found.text or "") or None) if found is not None else None


def _toc(zf: zipfile.ZipFile, book: Package) -> list[tuple[str, str | None, tuple[str, ...]]]:
    """(member, fragment or None, label path) of each table-of-contents entry in reading order: nav, else NCX."""
    names = set(zf.namelist())
    nav = next((m for m, _, props in book.manifest.values() if "nav" in props.split() and m in names), None)
    entries = _nav_entries(zf, nav) if nav else []
    ncx = book.manifest.get(book.ncx or "", (None, "", ""))[0] or next(
        (m for m, mt, _ in book.manifest.values() if mt == "application/x-dtbncx+xml"), None)
    if not entries and ncx in names:
        root = read_xml(zf, ncx)
        nav_map = root.find(f"{NCX}navMap") if root is not None else None
        entries = list(_ncx_points(nav_map, posixpath.dirname(ncx), ())) if nav_map is not None else []
    return entries


def _ncx_points(parent, base: str, above: tuple[str, ...]):
    if len(above) >= MAX_DEPTH:
        return
    for point in parent.iterfind(f"{NCX}navPoint"):
        text = point.find(f"{NCX}navLabel/{NCX}text")
        path = above + (label(text.text or "") if text is not None else "",)
        content = point.find(f"{NCX}content")
        yield from _entry(base, content.get("src", "") if content is not None else "", path)
        yield from _ncx_points(point, base, path)


def _nav_entries(zf: zipfile.ZipFile, nav: str) -> list:
    root = read_xml(zf, nav, html=True)
    navs = list(root.iter("nav")) if root is not None else []
    toc = next((n for n in navs if any("toc" in v.split() for v in n.attrib.values())), navs[0] if navs else None)
    first = next(_children(toc, "ol"), None) if toc is not None else None
    return list(_nav_items(first, posixpath.dirname(nav), ())) if first is not None else []


def _nav_items(ol, base: str, above: tuple[str, ...]):
    if len(above) >= MAX_DEPTH:
        return
    for li in _children(ol, "li"):
        head = next(_children(li, "a", "span"), None)
        path = above + (label(head.xpath("string()")) if head is not None else "",)
        yield from _entry(base, head.get("href", "") if head is not None else "", path)
        for sub in _children(li, "ol"):
            yield from _nav_items(sub, base, path)


def _children(element, *tags: str):
    return (child for child in element if child.tag in tags)


def _entry(base: str, href: str, path: tuple[str, ...]):
    member = member_path(base, href) if href else None
    if member:
        yield member, unquote(href.partition("#")[2]) or None, tuple(p for p in path if p)


def _chapters(zf: zipfile.ZipFile, book: Package, toc: list, max_text: int):
    """The sections of the spine's (X)HTML files in order (each read once), the skipped manifest hrefs, and a
    warning when the text limit cut the book ('' otherwise)."""
    names, marks, read = set(zf.namelist()), _marks(toc), set()
    sections, skipped, total, current = [], [], 0, ()
    for idref in dict.fromkeys(book.spine):
        member, media_type, _ = book.manifest.get(idref, (None, "", ""))
        if member in read or (media_type not in HTML_TYPES and not (member or "").endswith(HTML_SUFFIXES)):
            continue  # read already, or an image or stylesheet in the spine
        why = "outside" if member is None else "missing" if member not in names else ""
        try:
            markup = b"" if why else zf.read(member)
        except ZIP_ERRORS:
            why = "unreadable"
        if why:
            skipped.append((book.hrefs.get(idref, idref), why))
            continue
        read.add(member)
        found, current = _chapter(markup, *marks.get(member, ({}, None)), current, bool(toc))
        for section in found:
            total += len(section.text)
            if total > max_text:
                return sections, skipped, (f"the text after {human_size(max_text)} was not read (limits.max_text_mb; "
                                           "raise it to index the whole book)")
            sections.append(section)
    return sections, skipped, ""


def _marks(toc: list) -> dict[str, tuple[dict[str, tuple[str, ...]], tuple[str, ...] | None]]:
    """member → (fragment → label path, the label of an entry for the whole file): the first entry wins."""
    marks: dict[str, tuple[dict, tuple | None]] = {}
    for member, fragment, path in toc:
        if not path:
            continue
        anchors, own = marks.get(member, ({}, None))
        if fragment:
            anchors.setdefault(fragment, path)
        marks[member] = (anchors, own if own or fragment else path)
    return marks


def _chapter(markup: bytes, anchors: dict, own: tuple[str, ...] | None, current: tuple[str, ...], has_toc: bool):
    """(sections of one spine file, the label in effect at its end): split at the entries pointing into it."""
    title, found, current = anchored_sections(markup, own or current, anchors)
    if not has_toc and title:  # a book without a table of contents: each file's <title> labels it
        name = label(title)
        found = [s if s.heading_path[:1] == (name,) else Section(s.text, (name,) + s.heading_path) for s in found]
    return found, current


SKIPPED = {"outside": "whose path leaves the archive (never read)", "missing": "listed but missing from the archive",
           "unreadable": "that could not be unpacked (a damaged or password-protected member)"}


def _skipped_warning(skipped: list[tuple[str, str]]) -> list[str]:
    out = []
    for why, what in SKIPPED.items():
        hrefs = [href for href, reason in skipped if reason == why]
        if hrefs:
            out.append(f"skipped {len(hrefs)} chapter file(s) {what}: {', '.join(hrefs[:5])}")
    return out
