"""Markdown and Obsidian notes → Document.

Handles YAML (or JSON) frontmatter, wikilinks [[a]] [[a|b]] [[a#h]] [[a^b]], embeds ![[x]] (stripped
and recorded), Markdown links, inline #tags including nested #a/b (never inside code or URLs),
Dataview query blocks (skipped) and `key:: value` inline fields, callouts, %%comments%%. Sections
follow ATX headings; fenced code never produces headings, tags or links.

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
from rag_pipelines.parsers.text import decode

FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})\s*([\w+-]*)")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*)$")  # closing #s are stripped by heading_title
WIKILINK = re.compile(r"(!?)\[\[([^\[\]|]+?)(?:\|([^\[\]]*?))?\]\]")
MD_LINK = re.compile(r"(!?)\[([^\[\]]*)\]\(([^)\s\[]+)(?:\s+\"[^\"\[]*\")?\)")
INLINE_CODE = re.compile(r"`[^`\n]*`")
TAG = re.compile(r"(?<![\w/#&=\])])#([\w/-]*[^\W\d_][\w/-]*|[\w/-]*_[\w/-]*)", re.UNICODE)
INLINE_FIELD_LINE = re.compile(r"^\s*(?:[-*+]\s+)?([A-Za-z][\w \-]*?)::\s*(.*)$")
FIELD_OPEN = re.compile(r"[\[(]([A-Za-z][\w \-]*?)::")  # [key:: value] / (key:: value), value up to FIELD_CLOSE
FIELD_CLOSE = re.compile(r"[\])]")
COMMENT = re.compile(r"%%.*?%%", re.DOTALL)
CALLOUT = re.compile(r"^\[!(\w+)\][+-]?\s*")
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
    """Walks the body once, line by line, tracking fences, and collects everything the note holds."""

    def __init__(self):
        self.sections: list[Section] = []
        self.path: list[tuple[int, str]] = []
        self.lines: list[str] = []
        self.tags: list[str] = []
        self.links: list[str] = []
        self.embeds: list[str] = []
        self.fields: dict[str, str] = {}
        self.first_h1: str | None = None

    def flush(self):
        text = "\n".join(self.lines).strip()
        if text:
            self.sections.append(Section(text=text, heading_path=tuple(h for _, h in self.path)))
        self.lines = []

    def heading(self, level: int, title: str):
        self.flush()
        title = self.inline(title)
        if level == 1 and self.first_h1 is None:
            self.first_h1 = title
        self.path = [(lvl, h) for lvl, h in self.path if lvl < level] + [(level, title)]

    def inline(self, line: str) -> str:
        """Links, embeds, tags and fields of one prose line; returns the line as searchable text."""
        prose = INLINE_CODE.sub(" ", line)
        self.tags += TAG.findall(prose)
        for key, value in bracket_fields(prose):
            self.fields[field_key(key)] = value
        line = WIKILINK.sub(self._wikilink, line)
        line = MD_LINK.sub(self._mdlink, line)
        return line

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


def parse_markdown(data: bytes, filename: str, mtime_ns: int | None = None) -> Document:
    text = decode(data)
    props, body_text, warning = split_frontmatter(text)
    body = _Body()
    fence: str | None = None
    skipping = False
    for raw in COMMENT.sub("", body_text).split("\n"):
        m = FENCE.match(raw)
        if fence is None and m:
            fence, skipping = m.group(1), m.group(2).lower() in SKIP_FENCES
            if not skipping:
                body.lines.append(raw)
            continue
        if fence is not None:
            if raw.strip().startswith(fence[0] * len(fence)) and raw.strip().strip(fence[0]) == "":
                fence = None
                if not skipping:
                    body.lines.append(raw)
                skipping = False
            elif not skipping:
                body.lines.append(raw)
            continue
        h = HEADING.match(raw)
        if h:
            body.heading(len(h.group(1)), heading_title(h.group(2)))
            continue
        line = raw
        quote = re.match(r"^(\s*>\s?)+", line)
        if quote:
            line = line[quote.end() :]
            line = CALLOUT.sub(lambda c: c.group(1).capitalize() + ": ", line)
        f = INLINE_FIELD_LINE.match(line)
        if f and "://" not in f.group(1):
            body.fields[field_key(f.group(1))] = f.group(2).strip()
        body.lines.append(body.inline(line))
    body.flush()
    return _document(props, body, filename, mtime_ns, warning)


def _document(props: dict, body: _Body, filename: str, mtime_ns: int | None, warning: str | None) -> Document:
    stem = filename.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    tags = [t.lstrip("#") for t in as_list(props.get("tags"), True) + as_list(props.get("tag"), True)] + body.tags
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
        tags=tuple(dict.fromkeys(t for t in tags if t)),
        metadata=meta,
        links=tuple(dict.fromkeys(body.links)),
    )
