"""HTML → title and sections split at h1–h6, in one streaming pass of lxml's HTML parser (no tree).

Each outermost block (heading, p, li, tr, pre, ...) takes all the text under it; scripts, styles,
navigation and <head> are dropped; headings are labels, their whitespace collapsed ("STAVE\n  TWO." is
"STAVE TWO."). Elements whose id (or <a name>) is one of `anchors` also split the page: what follows is
labelled with that anchor's path (an EPUB's table of contents points into chapters this way). Linear in
the input and small in memory: the stdlib html.parser (what BeautifulSoup used here) is quadratic on
unclosed comments or attributes ('<a ' * 20k took 28 s) and a BeautifulSoup tree costs ~1 KB per tag.
"""

from __future__ import annotations

import codecs
import re
from typing import Mapping

from rag_search.records import Section

from rag_pipelines.parsers.text import decode, wide_encoding

HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
BLOCKS = frozenset(HEADINGS + ("p", "li", "pre", "tr", "blockquote", "dd", "dt", "figcaption"))
SKIPPED = frozenset({"script", "style", "nav", "noscript", "template", "head"})
ANCHOR = "#anchor"  # a block name that marks where an anchor's element starts
META_CHARSET = re.compile(rb"""<meta[^>]{0,300}?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]{1,40})""", re.IGNORECASE)


def html_sections(markup: bytes | str, base_path: tuple[str, ...] = ()) -> tuple[str | None, list[Section]]:
    """(title, sections split at h1–h6) of an HTML page; all its text as one section when no block has any."""
    title, sections, _ = anchored_sections(markup, base_path, {})
    return title, sections


def anchored_sections(markup: bytes | str, base_path: tuple[str, ...], anchors: Mapping[str, tuple[str, ...]]
                      ) -> tuple[str | None, list[Section], tuple[str, ...]]:
    """(title, sections, the label path in effect at the end): sections start under base_path, and under
    anchors[id] from the element with that id on; a heading repeating a label of that path is not repeated."""
    target = _read(markup, anchors)
    sections, path, lines, base = [], [], [], base_path

    def flush():
        text = "\n".join(lines).strip()
        if text:
            sections.append(Section(text=text, heading_path=base + tuple(h for _, h in path)))
        lines.clear()

    for name, text in target.blocks:
        if name == ANCHOR:
            flush()
            base, path = anchors[text], []
        elif name in HEADINGS:
            flush()
            level = int(name[1])
            path = [(lv, h) for lv, h in path if lv < level]
            if text.casefold() not in {part.casefold() for part in base}:
                path.append((level, text))
        else:
            lines.append(text)
    flush()
    if not sections and target.texts:  # e.g. only headings, or text in no block at all
        sections.append(Section(text="\n".join(target.texts), heading_path=base_path))
    return target.title, sections, base


def _read(markup: bytes | str, anchors: Mapping[str, tuple[str, ...]]) -> _Blocks:
    from lxml import etree

    target = _Blocks(anchors)
    parser = etree.HTMLParser(target=target, recover=True, no_network=True, remove_comments=True, remove_pis=True)
    try:
        parser.feed(markup if isinstance(markup, str) else markup_text(markup))
        parser.close()
    except etree.LxmlError:  # an empty or hopeless document: keep whatever was read
        target.flush()
    return target


def label(text: str) -> str:
    """A heading or table-of-contents entry on one line: whitespace runs (newlines, no-break spaces) → a space."""
    return " ".join(text.split())


def markup_text(data: bytes) -> str:
    """Text of an HTML file: BOM or UTF-16/32, else UTF-8, else its <meta charset>, else decode()'s guess."""
    if wide_encoding(data):
        return decode(data)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    declared = META_CHARSET.search(data[:4096])
    try:
        codec = codecs.lookup(declared.group(1).decode("ascii")).name if declared else None
    except LookupError:
        codec = None
    return data.decode(codec, errors="replace") if codec else decode(data)


class _Blocks:
    """lxml parser target: collects (tag, text) of each outermost block, the title and all visible text; an element
    whose id is an anchor adds (ANCHOR, id) before the block it starts or sits in."""

    def __init__(self, anchors: Mapping[str, tuple[str, ...]]):
        self.anchors = anchors
        self.depth = self.skip = 0
        self.block: tuple[str, int] | None = None  # (tag, depth) of the open outermost block
        self.parts: list[str] = []
        self.pending: list[str] = []  # anchors met inside the open block
        self.buffer: list[str] = []  # consecutive data events of one text node
        self.in_title = False
        self.title: str | None = None
        self.blocks: list[tuple[str, str]] = []
        self.texts: list[str] = []

    def start(self, tag, attrib):
        self.flush()
        self.depth += 1
        if tag == "title" and self.title is None:
            self.in_title = True
        if self.anchors:
            self._anchor(attrib.get("id") or (attrib.get("name") if tag == "a" else None))
        if tag in SKIPPED:
            self.skip += 1
        elif self.block is None and not self.skip and tag in BLOCKS:
            self.block = (tag, self.depth)

    def _anchor(self, name: str | None) -> None:
        if name in self.anchors:
            (self.pending.append(name) if self.block is not None else self.blocks.append((ANCHOR, name)))

    def end(self, tag):
        self.flush()
        if tag == "title":
            self.in_title = False
        if tag in SKIPPED:
            self.skip = max(0, self.skip - 1)
        if self.block is not None and self.depth == self.block[1]:
            text = (" | " if self.block[0] == "tr" else " ").join(self.parts)
            self.blocks += [(ANCHOR, name) for name in self.pending]
            if text:
                self.blocks.append((self.block[0], label(text) if self.block[0] in HEADINGS else text))
            self.block, self.parts, self.pending = None, [], []
        self.depth -= 1

    def data(self, data):
        self.buffer.append(data)

    def flush(self):
        text = "".join(self.buffer).strip()
        self.buffer.clear()
        if not text:
            return
        if self.in_title:
            self.title = f"{self.title} {text}" if self.title else text
        elif not self.skip:
            self.texts.append(text)
            if self.block is not None:
                self.parts.append(text)

    def close(self):
        self.flush()
