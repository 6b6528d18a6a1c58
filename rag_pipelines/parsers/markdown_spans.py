"""One Markdown line → its spans: prose, and code kept verbatim; %%comments%% dropped. Plus Obsidian's tags.

Obsidian's reading of a line: a run of backticks opens a code span that the next run of the same length
closes (CommonMark); `$x$` and `$$x$$` are math, kept verbatim like code; `%%` opens a comment that may
run over several lines. Links, tags and fields are read in prose only, so `` `[[Note]]` `` and
`` `#ff0000` `` stay as written and are neither links nor tags.

A tag (Obsidian's "Tags" help page) is `#` at the start of the line or after whitespace, followed by
letters, digits, `_`, `-` and `/`, with at least one letter or `_` (`#1984` is no tag, `#y1984` is).
So a heading link `[[#Keyboard shortcuts]]`, a URL fragment `http://x/#anchor` and a colour in
`<span style="color:#ff0000">` are not tags; `#ff0000` written in prose is one, as Obsidian shows it.

Linear time on any line: backtick runs are indexed once and each opening run finds its closing run by
bisection; a `$` whose closing `$` is missing proves that no later `$` on the line closes either.
"""

from __future__ import annotations

import re
from bisect import bisect_right

PROSE, CODE = "prose", "code"
SPECIAL = re.compile(r"`+|%%|\$\$?")
TICKS = re.compile(r"`+")
MATH_CLOSE = re.compile(r"(?<=[^\s\\])\$(?!\d)")  # a closing $: after a non-space, not before a digit
TAG = re.compile(r"(?<!\S)#([\w/-]+)")
TAG_WORD = re.compile(r"[^\W\d]")  # a letter or '_': what makes '#…' a tag rather than a number
HTML_TAG = re.compile(r"<[A-Za-z/][^<>\n]*>")  # attributes (style="color: #fff") hold no tags

Span = tuple[str, str]


def spans(line: str, in_comment: bool = False) -> tuple[list[Span], bool]:
    """(spans of the line without its comments, whether a comment is still open at its end)."""
    out: list[Span] = []
    pos = look = 0  # pos: start of text not yet emitted; look: where the next special token is searched
    runs: dict[int, list[int]] | None = None
    math_closes = True
    while True:
        if in_comment:
            end = line.find("%%", pos)
            if end < 0:
                return out, True
            pos = look = end + 2
            in_comment = False
            continue
        m = SPECIAL.search(line, look)
        if m is None:
            break
        start, token = m.start(), m.group()
        if start and line[start - 1] == "\\":  # an escaped backtick, % or $ is text
            look = m.end()
            continue
        if token == "%%":
            _add(out, PROSE, line[pos:start])
            pos = look = m.end()
            in_comment = True
            continue
        if token[0] == "`":
            runs = runs if runs is not None else _runs(line)
            close = _closing(runs, len(token), start)
            if close is None:
                look = m.end()
                continue
            end = close + len(token)
        elif token == "$$":
            close = line.find("$$", m.end())
            if close < 0:
                look = m.end()
                continue
            end = close + 2
        else:  # a single $: math when a non-space follows and a closing $ exists
            opens = math_closes and line[m.end():m.end() + 1].strip()
            c = MATH_CLOSE.search(line, m.end() + 1) if opens else None
            if c is None:
                if opens:
                    math_closes = False  # no closing $ after this one: none after any later $ either
                look = m.end()
                continue
            end = c.end()
        _add(out, PROSE, line[pos:start])
        _add(out, CODE, line[start:end])
        pos = look = end
    _add(out, PROSE, line[pos:])
    return out, False


def _add(out: list[Span], kind: str, text: str) -> None:
    if text:
        out.append((kind, text))


def _runs(line: str) -> dict[int, list[int]]:
    """Start positions of the backtick runs of the line, by run length (ascending)."""
    runs: dict[int, list[int]] = {}
    for m in TICKS.finditer(line):
        runs.setdefault(len(m.group()), []).append(m.start())
    return runs


def _closing(runs: dict[int, list[int]], length: int, start: int) -> int | None:
    """The start of the first run of exactly `length` backticks after the run at `start`."""
    starts = runs.get(length, [])
    i = bisect_right(starts, start)
    return starts[i] if i < len(starts) else None


def tags_in(prose: str) -> list[str]:
    """Obsidian tags of prose text (code and links already blanked by the caller; HTML tags are blanked here)."""
    return [t for t in TAG.findall(HTML_TAG.sub(" ", prose)) if TAG_WORD.search(t)]
