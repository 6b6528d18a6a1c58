"""DOCX → sections split at headings, in one streaming pass over word/document.xml (no tree, no python-docx).

python-docx builds the whole XML tree and looks each paragraph's style up among all of the document's styles
(200k paragraphs with Word's ~150 styles took 5.5 min); here styles are read once, the body is fed to lxml's
parser a piece at a time through a target that keeps only text, and reading stops once limits.max_text_mb of
text is collected (said in metadata["parse_warning"]). No DTD is loaded and no external entity is resolved or
fetched: a reference to one is left out and the text around it kept (python-docx dropped the rest of the run).

A paragraph's text: w:t, w:tab (a tab), w:br and w:cr (a newline), w:noBreakHyphen; inserted text, hyperlinks,
field results, content controls and text boxes included; deleted and moved-away text, field codes and the
fallback copy of alternate content left out. A table gives one line per row, its cells joined by " | ".
"""

from __future__ import annotations

import posixpath
import re
import zipfile

from rag_search.records import Document, Section

from rag_pipelines.parsers.documents import ZIP_ERRORS, no_text, open_zip, stem
from rag_pipelines.parsers.errors import ParseError
from rag_pipelines.parsers.limits import MB, Limits, human_size
from rag_pipelines.parsers.ooxml import core_properties, feed_part as _feed, iso_date as _date, related as _related
from rag_pipelines.parsers.ooxml import split_tag as _split
from rag_pipelines.parsers.titles import meta_title
from rag_pipelines.parsers.webpage import label

W = frozenset({"http://schemas.openxmlformats.org/wordprocessingml/2006/main",
               "http://purl.oclc.org/ooxml/wordprocessingml/main"})  # transitional and strict
MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"
LEFT_OUT = frozenset({"delText", "instrText", "delInstrText", "moveFrom"})
LEFT = "-"  # the name _Body gives a left-out element
RUN_CHARS = {"tab": "\t", "ptab": "\t", "br": "\n", "cr": "\n", "noBreakHyphen": "-"}
FIX = "re-save it from Word (or LibreOffice)"


def parse_docx(data: bytes, filename: str, mtime_ns: int | None = None, limits: Limits | None = None) -> Document:
    limits = limits or Limits()
    zf = open_zip(data, filename)
    main = _related(zf, "_rels/.rels", "", "/officeDocument") or "word/document.xml"
    rels = posixpath.join(posixpath.dirname(main), "_rels", posixpath.basename(main) + ".rels")
    styles = _style_names(zf, _related(zf, rels, posixpath.dirname(main), "/styles") or "word/styles.xml")
    body = _read_body(zf, main, filename, int(limits.max_text_mb * MB))
    title, sections = _sections(body.out, styles)
    props = core_properties(zf)
    when = _date(props.get("modified")) or _date(props.get("created"))
    cut = f"the text after {human_size(limits.max_text_mb * MB)} was not read (limits.max_text_mb; raise it to " \
          "index the whole document)"
    warning = cut if body.full else None if sections else no_text("it holds no text (pictures only?)")
    return Document(title=meta_title(props.get("title")) or title or stem(filename), sections=tuple(sections),
                    ts=when or (mtime_ns // 1_000_000_000 if mtime_ns else None), author=props.get("creator"),
                    metadata={"parse_warning": warning} if warning else {})


def _style_names(zf: zipfile.ZipFile, part: str) -> dict[str, str]:
    """Paragraph style id → its name ("Heading1" → "heading 1"), read once; {} without a styles part."""
    target = _Styles()
    try:
        _feed(zf, part, target)
    except ZIP_ERRORS:
        pass  # a damaged styles part: paragraphs are told apart by their style ids ("Heading1") alone
    return target.names


def _read_body(zf: zipfile.ZipFile, part: str, filename: str, max_text: int) -> _Body:
    target = _Body(max_text)
    try:
        found = _feed(zf, part, target)
    except ZIP_ERRORS as exc:
        raise ParseError("corrupt", f"{filename}: its {part} could not be unpacked ({exc}); {FIX}") from exc
    if not found or not target.body:
        raise ParseError("corrupt", f"{filename} is not a readable DOCX (no document body in {part}); {FIX}")
    return target


class _Styles:
    """lxml parser target over styles.xml: paragraph style id → name."""

    full = False

    def __init__(self):
        self.names: dict[str, str] = {}
        self.current: str | None = None

    def start(self, tag, attrib):
        namespace, name = _split(tag)
        if namespace not in W:
            return
        if name == "style":
            kind = attrib.get(f"{{{namespace}}}type", "paragraph")
            self.current = attrib.get(f"{{{namespace}}}styleId") if kind == "paragraph" else None
        elif name == "name" and self.current:
            self.names[self.current] = attrib.get(f"{{{namespace}}}val", "")

    def end(self, tag):
        if tag.endswith("}style"):
            self.current = None

    def data(self, data):
        pass

    def close(self):
        return self.names


class _Body:
    """lxml parser target over document.xml: (text, paragraph style id or None) of each body paragraph and
    table row, in order; nothing else is kept."""

    def __init__(self, max_text: int):
        self.out: list[tuple[str, str | None]] = []
        self.paragraphs: list[list] = []  # open paragraphs: [text pieces, style id]
        self.cells: list[list[str]] = []  # open table cells: their lines
        self.rows: list[list[str]] = []  # open table rows: their cells' text
        self.left_out = self.runs = self.texts = self.size = 0
        self.max_text, self.full, self.body = max_text, False, False
        self.names: dict[str, str] = {}  # tag → its name in WordprocessingML, LEFT for a left-out one, "" for others

    def _name(self, tag: str) -> str:
        name = self.names.get(tag)
        if name is None:
            namespace, name = _split(tag)
            left = (namespace == MC and name == "Fallback") or (namespace in W and name in LEFT_OUT)
            name = self.names[tag] = LEFT if left else name if namespace in W else ""
        return name

    def start(self, tag, attrib):
        name = self._name(tag)
        if self.left_out or name == LEFT:
            self.left_out += 1
        elif name:
            self._start(name, attrib.get(tag[: tag.find("}") + 1] + "val") if name == "pStyle" else None)

    def _start(self, name: str, value: str | None) -> None:
        if name == "p":
            self.paragraphs.append([[], None])
        elif name == "pStyle" and self.paragraphs:
            self.paragraphs[-1][1] = value
        elif name in ("t", "r"):
            self.texts += name == "t"
            self.runs += name == "r"
        elif name in RUN_CHARS and self.runs and self.paragraphs:
            self.paragraphs[-1][0].append(RUN_CHARS[name])
        elif name in ("tc", "tr"):
            (self.cells if name == "tc" else self.rows).append([])
        self.body = self.body or name == "body"

    def end(self, tag):
        if self.left_out:
            self.left_out -= 1
        elif name := self._name(tag):
            self._end(name)

    def _end(self, name: str) -> None:
        if name in ("t", "r"):
            self.texts -= name == "t"
            self.runs -= name == "r"
        elif name == "p" and self.paragraphs:
            pieces, style = self.paragraphs.pop()
            self._line("".join(pieces).strip(), style)
        elif name == "tc" and self.cells:
            text = "\n".join(self.cells.pop()).strip()
            if self.rows:
                self.rows[-1].append(text)
        elif name == "tr" and self.rows:
            self._line(" | ".join(dict.fromkeys(cell for cell in self.rows.pop() if cell)), None)

    def _line(self, text: str, style: str | None) -> None:
        if text:
            (self.cells[-1].append(text) if self.cells else self.out.append((text, style)))

    def data(self, data):
        if self.texts and not self.left_out and self.paragraphs and not self.full:
            self.paragraphs[-1][0].append(data)
            self.size += len(data)
            self.full = self.size > self.max_text

    def close(self):
        return self.out


def _sections(out: list[tuple[str, str | None]], styles: dict[str, str]) -> tuple[str | None, list[Section]]:
    """(the first Title or level-1 heading, sections split at headings)."""
    sections, path, lines, title = [], [], [], None

    def flush():
        text = "\n".join(lines).strip()
        if text:
            sections.append(Section(text=text, heading_path=tuple(h for _, h in path)))
        lines.clear()

    for text, style in out:
        level = _heading_level(styles.get(style, style)) if style else 0
        if level:
            flush()
            path = [(lv, h) for lv, h in path if lv < level] + [(level, label(text))]
            title = title or (label(text) if level == 1 else None)
        else:
            lines.append(text)
    flush()
    return title, sections


def _heading_level(style: str) -> int:
    """1 for Title, N for "heading N" (Word's name; "HeadingN" is its id)."""
    if style.casefold() == "title":
        return 1
    m = re.fullmatch(r"heading ?(\d)", style, re.IGNORECASE)
    return int(m.group(1)) if m else 0
