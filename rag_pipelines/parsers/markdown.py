"""Markdown and Obsidian notes → Document.

Handles YAML (or JSON) frontmatter, wikilinks [[a]] [[a|b]] [[a#h]] [[a^b]], embeds ![[x]] (stripped
and recorded), Markdown links, tags (frontmatter `tags`/`tag`, and inline #tags including nested #a/b
by Obsidian's rules, see parsers.markdown_spans), Dataview query blocks (skipped) and `key:: value`
inline fields, callouts, %%comments%% and <!-- comments --> (dropped), inline HTML (its tags dropped, the text
between them kept: what a reader sees). Sections follow ATX headings. Code is kept verbatim:
fenced blocks (also inside callouts), inline `code` and $math$ never produce headings, tags or links,
and link syntax inside them is not rewritten. Document.text is the note as written (frontmatter and
comments left out): what rag_get_document returns.

Every pattern runs in linear time on any input: each variable-length part stops at the next '['
(or at a character that can start no match), so the scans of different starting points never overlap.
Frontmatter is read by parsers.frontmatter, bounded in size and alias expansion; list properties keep
scalar values only (a nested list is never turned into a string).
"""

from __future__ import annotations

import re
from datetime import date, datetime, timezone
from urllib.parse import unquote

from rag_search.records import Document, Section

from rag_pipelines.parsers.frontmatter import split_frontmatter
from rag_pipelines.parsers.markdown_spans import CODE, PROSE, spans, tags_in
from rag_pipelines.parsers.text import decode

FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})\s*([\w+-]*)")  # any indent: fences inside list items count too
MATH_BLOCK = re.compile(r"^[ \t]*\$\$(?!.*\$\$)")  # $$ opening a math block that a later line closes
QUOTE = re.compile(r"^(?:[ \t]*>[ \t]?)+")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*)$")  # closing #s are stripped by heading_title
WIKILINK = re.compile(r"(!?)\[\[([^\[\]|]+?)(?:\|([^\[\]]*?))?\]\]")
MD_LINK = re.compile(r"(!?)\[([^\[\]]*)\]\(([^)\s\[]+)(?:\s+\"[^\"\[]*\")?\)")
INLINE_FIELD_LINE = re.compile(r"^\s*(?:[-*+]\s+)?([A-Za-z][\w \-]*?)::\s*(.*)$")
FIELD_OPEN = re.compile(r"[\[(]([A-Za-z][\w \-]*?)::")  # [key:: value] / (key:: value), value up to FIELD_CLOSE
FIELD_CLOSE = re.compile(r"[\])]")
CALLOUT = re.compile(r"^\[!(\w+)\][+-]?\s*")
# An HTML tag in prose (not an autolink <https://...>: a scheme's ':' is no tag-name character), or an HTML comment
# (without a '<' inside: each match stops at the next '<', so the scans never overlap). A contributors table of
# <td><a href=...><img src=...> rows was 60 of a page's 72 chunks, all attributes and URLs: the vectors of such
# chunks sit near every query (issue 35).
HTML_TAG = re.compile(r"<!--[^<]*?-->|</?([A-Za-z][A-Za-z0-9-]*)(?:\s[^<>\n]*)?/?>")
INLINE_TAGS = frozenset("a abbr b bdi bdo cite code data del dfn em font i ins kbd mark q s samp small span strong sub "
                        "sup time u var".split())  # text on both sides runs on (<kbd>Ctrl</kbd>+K); others part words
BLANKS = re.compile(r"[ \t]{2,}")
DAILY = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
SKIP_FENCES = {"dataview", "dataviewjs"}
DATE_KEYS = ("date", "created", "creation_date", "created_at", "updated", "modified")
SCALARS = (str, int, float, date)


def as_list(value, split_spaces: bool = False) -> list[str]:
    """A property as a list: YAML lists, single strings, comma-separated strings (tags also by spaces)."""
    if value is None:
        return []
    if isinstance(value, str):
        parts = value.replace(",", " ").split() if split_spaces else value.split(",")
        return [p.strip() for p in parts if p.strip()]
    if isinstance(value, (list, tuple)):  # scalar items only: a nested list (a YAML alias?) is not a name
        return [str(v).strip() for v in value if isinstance(v, SCALARS) and str(v).strip()]
    return [str(value)] if isinstance(value, SCALARS) else []


def to_ts(value) -> int | None:
    if isinstance(value, datetime):
        return int((value if value.tzinfo else value.replace(tzinfo=timezone.utc)).timestamp())
    if isinstance(value, date):
        return int(datetime(value.year, value.month, value.day, tzinfo=timezone.utc).timestamp())
    if isinstance(value, str):
        try:
            return to_ts(datetime.fromisoformat(value.strip().replace("Z", "+00:00")))
        except ValueError:
            return None
    return None


def heading_title(text: str) -> str:
    """An ATX heading's text without its closing #s (and the spaces around them)."""
    return text.rstrip().rstrip("#").rstrip()


def bracket_fields(prose: str):
    """(key, value) of each [key:: value] and (key:: value); the value ends at the first ']' or ')'.

    One pass: after a field, the search goes on past its closing bracket; with no closing bracket left,
    no later field can close either.
    """
    pos = 0
    for m in FIELD_OPEN.finditer(prose):
        if m.start() < pos:
            continue
        close = FIELD_CLOSE.search(prose, m.end())
        if close is None:
            return
        yield m.group(1), prose[m.end() : close.start()].strip()
        pos = close.end()


def field_key(key: str) -> str:
    """Dataview's sanitised key: lower case, spaces to dashes, formatting stripped."""
    return re.sub(r"\s+", "-", re.sub(r"[*_`~]", "", key).strip().lower())


def _scalar(value):
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, (str, int, float, bool)) for v in value):
        return list(value)
    return None


class _Body:
    """Walks the body once, line by line (fences, math blocks, comments), and collects what the note holds."""

    def __init__(self):
        self.sections: list[Section] = []
        self.path: list[tuple[int, str]] = []
        self.lines: list[str] = []
        self.written: list[str] = []  # the note as written, without its %%comments%%: Document.text
        self.tags: list[str] = []
        self.links: list[str] = []
        self.embeds: list[str] = []
        self.fields: dict[str, str] = {}
        self.first_h1: str | None = None
        self.block: tuple[str, str, bool, bool] | None = None  # (fence|math, marker, inside a quote, skipped)
        self.in_comment = False

    def flush(self):
        text = "\n".join(self.lines).strip()
        if text:
            self.sections.append(Section(text=text, heading_path=tuple(h for _, h in self.path)))
        self.lines = []

    def line(self, raw: str):
        if self.block is not None:
            return self._block_line(raw)
        if self.in_comment:  # a comment opened on an earlier line: nothing here is a fence or a heading
            segs, self.in_comment = spans(raw, True)
            if segs:
                self.lines.append(self.prose(segs))
                self.written.append("".join(t for _, t in segs))
            return
        quote = QUOTE.match(raw)
        inner = raw[quote.end():] if quote else raw
        fence = FENCE.match(inner)
        if fence or MATH_BLOCK.match(inner):
            kind, marker = ("fence", fence.group(1)) if fence else ("math", "$$")
            skipped = bool(fence) and fence.group(2).lower() in SKIP_FENCES
            self.block = (kind, marker, bool(quote), skipped)
            if not skipped:
                self.lines.append(inner)
            self.written.append(raw)
            return
        segs, self.in_comment = spans(inner)
        if raw.strip() and not segs:
            return  # a line that is all comment
        self.written.append((quote.group() if quote else "") + "".join(t for _, t in segs))
        h = None if quote else HEADING.match(self.written[-1])
        if h:
            return self.heading(len(h.group(1)), heading_title(h.group(2)))
        if quote and segs and segs[0][0] == PROSE:
            segs[0] = (PROSE, CALLOUT.sub(lambda c: c.group(1).capitalize() + ": ", segs[0][1]))
        f = INLINE_FIELD_LINE.match("".join(t for _, t in segs))
        if f and "://" not in f.group(1):
            self.fields[field_key(f.group(1))] = f.group(2).strip()
        self.lines.append(self.prose(segs))

    def _block_line(self, raw: str):
        kind, marker, quoted, skipped = self.block
        quote = QUOTE.match(raw) if quoted else None
        if quoted and not quote:  # the quote (callout) ended, and its code block with it
            self.block = None
            return self.line(raw)
        inner = raw[quote.end():] if quote else raw
        bare = inner.strip()
        if kind == "math":
            closing = bare.endswith("$$")
        else:
            closing = bare.startswith(marker[0] * len(marker)) and not bare.strip(marker[0])
        if not skipped:
            self.lines.append(inner)
        self.written.append(raw)
        if closing:
            self.block = None

    def heading(self, level: int, title: str):
        self.flush()
        segs, _ = spans(title)
        title = self.prose(segs)
        if level == 1 and self.first_h1 is None:
            self.first_h1 = title
        self.path = [(lvl, h) for lvl, h in self.path if lvl < level] + [(level, title)]

    def prose(self, segs: list[tuple[str, str]]) -> str:
        """Links, embeds, tags and fields of the prose spans; code spans stay verbatim. The searchable text."""
        out, scan = [], []
        for kind, text in segs:
            if kind == CODE:
                out.append(text)
                scan.append("\x00")
                continue
            if "::" in text:
                for key, value in bracket_fields(text):
                    self.fields[field_key(key)] = value
            if "[" in text:  # links: resolved in the text, blanked for the tag reader
                scan.append(MD_LINK.sub("\x00", WIKILINK.sub("\x00", text)))
                text = MD_LINK.sub(self._mdlink, WIKILINK.sub(self._wikilink, text))
            else:
                scan.append(text)
            out.append(_without_html(text) if "<" in text else text)
        scanned = "".join(scan)
        if "#" in scanned:
            self.tags += tags_in(scanned)
        return "".join(out)

    def _wikilink(self, m: re.Match) -> str:
        embed, target, display = m.group(1), m.group(2).strip(), (m.group(3) or "").strip()
        note = re.split(r"[#^]", target, maxsplit=1)[0].strip()
        if embed:
            self.embeds.append(target)
            return ""
        if note:
            self.links.append(note)
        readable = " > ".join(p.strip() for p in re.split(r"#\^?|\^", target) if p.strip())
        if display and display != readable:
            return f"{display} ({readable})"
        return readable

    def _mdlink(self, m: re.Match) -> str:
        embed, text, dest = m.group(1), m.group(2), m.group(3)
        if embed:
            self.embeds.append(unquote(dest))
            return ""
        if "://" not in dest and not dest.startswith(("#", "mailto:")):
            note = unquote(dest.split("#")[0])
            if note:
                self.links.append(re.sub(r"\.md$", "", note))
        return text


def _without_html(text: str) -> str:
    """Prose with its HTML tags and comments dropped: the text between them, one blank where they stood (the
    line's own indent kept)."""
    bare = HTML_TAG.sub(lambda m: "" if (m.group(1) or "").lower() in INLINE_TAGS else " ", text)
    if bare == text:
        return text
    indent = text[: len(text) - len(text.lstrip(" \t"))]
    bare = BLANKS.sub(" ", bare).lstrip(" \t")
    return indent + (bare if text[-1:].isspace() else bare.rstrip(" \t"))


def parse_markdown(data: bytes, filename: str, mtime_ns: int | None = None) -> Document:
    text = decode(data)
    props, body_text, warning = split_frontmatter(text)
    body = _Body()
    for raw in body_text.split("\n"):
        body.line(raw)
    body.flush()
    return _document(props, body, filename, mtime_ns, warning)


def _document(props: dict, body: _Body, filename: str, mtime_ns: int | None, warning: str | None) -> Document:
    stem = filename.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    tags = [t.lstrip("#") for t in as_list(props.get("tags"), True) + as_list(props.get("tag"), True)] + body.tags
    unique: dict[str, str] = {}
    for t in filter(None, tags):  # Obsidian's tags are case-insensitive; the first spelling is kept
        unique.setdefault(t.lower(), t)
    aliases = as_list(props.get("aliases")) + as_list(props.get("alias"))
    named = props.get("title") if isinstance(props.get("title"), SCALARS) else None
    title = str(named or body.first_h1 or stem).strip()
    ts = next((t for t in (to_ts(props.get(k)) for k in DATE_KEYS) if t is not None), None)
    if ts is None and (d := DAILY.search(stem)):
        ts = to_ts(f"{d.group(1)}-{d.group(2)}-{d.group(3)}")
    if ts is None and mtime_ns:
        ts = mtime_ns // 1_000_000_000
    skip = {"tags", "tag", "aliases", "alias", "title", "cssclasses", "cssclass"}
    meta = {k: v for k, v in ((str(k), _scalar(v)) for k, v in props.items() if str(k) not in skip) if v is not None}
    meta.update({k: v for k, v in body.fields.items() if k not in meta})
    if aliases:
        meta["aliases"] = aliases
    if body.embeds:
        meta["embeds"] = list(dict.fromkeys(body.embeds))
    if warning:
        meta["parse_warning"] = warning
    sections = list(body.sections)
    if aliases:  # aliases are other names of the note: make them findable
        sections.insert(0, Section(text="Also known as: " + ", ".join(aliases)))
    author = props.get("author")
    return Document(
        title=title,
        sections=tuple(sections),
        ts=ts,
        author=str(author) if isinstance(author, (str, int)) else None,
        tags=tuple(unique.values()),
        metadata=meta,
        links=tuple(dict.fromkeys(body.links)),
        text="\n".join(body.written).strip("\n"),
    )
