"""An item's text as HTML, safely: a note's Markdown, a mail body, a chat window, code; the matched passage marked.

Nothing from an item reaches the page unescaped: Markdown is rendered with raw HTML off (a `<script>` in a note
shows as text) and markdown-it's link check (no javascript:, vbscript:, file: or data: links); every other kind is
escaped text. The matched passage is wrapped in an element with id="match", so `#match` scrolls to it with or
without JavaScript.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markupsafe import Markup, escape

_MD = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")
_FRONTMATTER = re.compile(r"\A---[ \t]*\n(.*?\n)---[ \t]*(?:\n|\Z)", re.DOTALL)
_WIKILINK = re.compile(r"!?\[\[([^\[\]|#\n]+)(#[^\[\]|\n]*)?(?:\|([^\[\]\n]+))?\]\]")
_FENCE = re.compile(r"^[ \t]{0,3}(```|~~~)", re.MULTILINE)
_CHAT_LINE = re.compile(r"\[(\d\d:\d\d)\] ([^:\n]{1,200}):[ ]?(.*)", re.DOTALL)
MIN_PROBE = 12  # characters of a passage that must match to say where it is


def locate(text: str, passage: str) -> tuple[int, int] | None:
    """(start, end) of a chunk's passage in the item's text, found by the opening words of its first paragraphs
    that the text holds as written (a chunk may begin with a line the chunker added, e.g. a note's aliases);
    None if none is found."""
    body = passage.strip()
    offset = 0
    for para in body.split("\n\n")[:8]:
        lines = [ln.strip() for ln in para.strip().split("\n") if ln.strip()]
        for probe in (para.strip()[:160], para.strip()[:60], *(ln[:60] for ln in lines[:3])):
            if len(probe) >= MIN_PROBE or (probe and probe == body):
                at = text.find(probe)
                if at >= 0:
                    return at, min(len(text), at + len(body) - offset)
        offset += len(para) + 2
    return None


# -- Markdown ------------------------------------------------------------------------------------------

def wikilink_targets(text: str) -> list[str]:
    """The notes a text's [[wikilinks]] name (without #heading or |alias)."""
    return [m.group(1) for m in _WIKILINK.finditer(text)]


def markdown(text: str, span: tuple[int, int] | None, links: dict[str, int | None]) -> tuple[Markup, str | None]:
    """(the note as HTML with the passage in #match, its front matter as written or None)."""
    front = _FRONTMATTER.match(text)
    cut = front.end() if front else 0
    body = text[cut:]
    if span is not None:
        span = (max(0, span[0] - cut), max(0, span[1] - cut))
    parts = _split_blocks(body, span)
    rendered = [_md(p, links) for p in parts]
    if len(rendered) == 3:
        rendered[1] = f'<div id="match" class="match">{rendered[1]}</div>'
    return Markup("".join(rendered)), front.group(1) if front else None


def _split_blocks(text: str, span: tuple[int, int] | None) -> list[str]:
    """[before, passage, after] cut at line ends and never inside a code fence; [text] without a span."""
    if span is None:
        return [text]
    a = text.rfind("\n", 0, span[0]) + 1
    b = text.find("\n", max(span[1] - 1, a))
    b = len(text) if b < 0 else b + 1
    fences = [m.start() for m in _FENCE.finditer(text)]
    opened_before_a = [f for f in fences if f < a]
    if len(opened_before_a) % 2:  # a is inside a fence: start at its opening line
        a = opened_before_a[-1]
    inside_b = [f for f in fences if f < b]
    if len(inside_b) % 2:  # b is inside a fence: end after its closing line
        closing = [f for f in fences if f >= b]
        b = len(text) if not closing else (text.find("\n", closing[0]) + 1 or len(text))
    return [text[:a], text[a:b], text[b:]]


def _md(text: str, links: dict[str, int | None]) -> str:
    return _MD.render(_WIKILINK.sub(lambda m: _wikilink(m, links), text)) if text.strip() else ""


NOT_YOURS = "not found in the collections you can see"


def _wikilink(m: re.Match, links: dict[str, int | None]) -> str:
    """[[Target|alias]] → a link to the note it names (documents.wikilinks found it), or the label saying it is
    not among the principal's collections."""
    target, label = m.group(1).strip(), (m.group(3) or m.group(1)).strip()
    label = re.sub(r"([\\`*_\[\]<>])", r"\\\1", label)
    found = links.get(target.lower())
    return f"[{label}](</item/{found}>)" if found is not None else f"{label} *({NOT_YOURS})*"


# -- text, code, chat --------------------------------------------------------------------------------

def plain(text: str, span: tuple[int, int] | None, pattern: re.Pattern | None) -> Markup:
    """Escaped text with the passage in <mark id="match">, the query's words inside it in <b>."""
    if span is None:
        return escape(text)
    a, b = span
    return Markup(f'{escape(text[:a])}<mark id="match" class="match">{terms(text[a:b], pattern)}</mark>'
                  f"{escape(text[b:])}")


def terms(text: str, pattern: re.Pattern | None) -> Markup:
    """Escaped text with the query's words in <b>."""
    if pattern is None:
        return escape(text)
    out, last = [], 0
    for m in pattern.finditer(text):
        out += [str(escape(text[last:m.start()])), f"<b>{escape(m.group(0))}</b>"]
        last = m.end()
    return Markup("".join(out) + str(escape(text[last:])))


def chat(text: str, span: tuple[int, int] | None, pattern: re.Pattern | None) -> list[dict]:
    """A chat window's messages (one paragraph each: `[HH:MM] Sender: text`), those in the passage marked."""
    out, at = [], 0
    for para in text.split("\n\n"):
        start, at = at, at + len(para) + 2
        m = _CHAT_LINE.fullmatch(para.strip())
        hit = span is not None and start < span[1] and at - 2 > span[0]
        time, sender, body = (m.group(1), m.group(2), m.group(3)) if m else ("", "", para)
        out.append({"time": time, "sender": sender, "text": terms(body, pattern if hit else None), "match": hit})
    first = next((msg for msg in out if msg["match"]), None)
    if first is not None:
        first["first"] = True
    return out
