"""Snippets: the stretch of a chunk that best shows why it matched, with matched words marked."""

from __future__ import annotations

import re

MARK_OPEN, MARK_CLOSE = "**", "**"
_SUFFIXES = ("ing", "ed", "es", "s", "ly")


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
    """The window of about `width` characters holding the most matches, matches marked."""
    flat = " ".join(text.split())
    if len(flat) <= width and pattern is None:
        return flat
    start = 0
    if pattern is not None:
        hits = [m.start() for m in pattern.finditer(flat)]
        if hits:
            start = max(
                (max(0, h - width // 4) for h in hits),
                key=lambda s: sum(1 for h in hits if s <= h < s + width),
            )
    window = flat[start : start + width]
    if start > 0:
        window = "…" + window.split(" ", 1)[-1]
    if start + width < len(flat):
        window = window.rsplit(" ", 1)[0] + "…"
    if pattern is not None:
        window = pattern.sub(lambda m: f"{MARK_OPEN}{m.group(0)}{MARK_CLOSE}", window)
    return window
