"""Snippets: the stretch of a chunk that best shows why it matched, with matched words marked."""

from __future__ import annotations

import re
from bisect import bisect_left

MARK_OPEN, MARK_CLOSE = "**", "**"
_SUFFIXES = ("ing", "ed", "es", "s", "ly")
# Markdown the snippet shows as plain text, so that only the match marks are '**': emphasis pairs
# (***bi***, **b**, *i*, _i_, ==h==, ~~s~~; not inside words, so a*b*c, 2**3 and snake_case stay, and
# not __x__, which is Python's __init__ more often than bold), heading and fence marker lines, and a '**'
# cut off at the start or end of the text. Inline `code` is kept as written.
_EMPHASIS = [re.compile(rf"(?<![\w{c}\\]){m}(?![\s{c}])([^\n]+?)(?<![\s{c}\\]){m}(?![\w{c}])")
             for m, c in ((r"\*\*\*", r"\*"), (r"\*\*", r"\*"), (r"\*", r"\*"), ("_", "_"), ("==", "="), ("~~", "~"))]
_STRAY_CLOSE = re.compile(r"^([^*\n]*\w)\*\*(?![\w*])")  # the text starts inside **bold**
_STRAY_OPEN = re.compile(r"(?<![\w*])\*\*(?=\w[^*()=\n]*$)")  # ... or ends inside it (not code's **kwargs)
_HEADING_MARK = re.compile(r"^[ \t]*#{1,6}[ \t]+", re.MULTILINE)
_FENCE_LINE = re.compile(r"^[ \t]*(?:`{3,}|~{3,})[^`\n]*$", re.MULTILINE)
_CODE_SPAN = re.compile(r"(`[^`\n]*`)")


_MARKUP = "*_=~#`"  # each pattern above needs one of these: text without any is plain already


def plain(text: str) -> str:
    """The text without Markdown markup that would show as stray characters in a snippet."""
    if not any(c in text for c in _MARKUP):  # most chunks: ten regex passes saved
        return text
    text = _FENCE_LINE.sub("", _HEADING_MARK.sub("", text))
    parts = _CODE_SPAN.split(text)
    for i in range(0, len(parts), 2):  # the even parts are outside `code`
        for emphasis in _EMPHASIS:
            parts[i] = emphasis.sub(r"\1", parts[i])
    return _STRAY_OPEN.sub("", _STRAY_CLOSE.sub(r"\1", "".join(parts)))


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def term_pattern(words: list[str]) -> re.Pattern | None:
    """Words of the query as a pattern: short words match whole, longer ones by stem."""
    alternatives = {
        re.escape(w) + r"\b" if len(w) <= 4 else re.escape(_stem(w)) + r"\w*" for w in (x.lower() for x in words)
    }
    if not alternatives:
        return None
    return re.compile(r"\b(?:" + "|".join(sorted(alternatives, key=len, reverse=True)) + ")", re.IGNORECASE)


def snippet(text: str, pattern: re.Pattern | None, width: int = 280) -> str:
    """The window of about `width` characters holding the most matches, matches marked; Markdown markup removed."""
    flat = " ".join(plain(text).split())
    if len(flat) <= width and pattern is None:
        return flat
    start = 0
    if pattern is not None:
        hits = [m.start() for m in pattern.finditer(flat)]  # ascending
        if hits:  # the window starting a quarter-width before a match that holds the most matches (the first such)
            start = max(
                (max(0, h - width // 4) for h in hits),
                key=lambda s: bisect_left(hits, s + width) - bisect_left(hits, s),
            )
    window = flat[start : start + width]
    if start > 0:
        window = "…" + window.split(" ", 1)[-1]
    if start + width < len(flat):
        window = window.rsplit(" ", 1)[0] + "…"
    if pattern is not None:
        window = pattern.sub(lambda m: f"{MARK_OPEN}{m.group(0)}{MARK_CLOSE}", window)
    return window
