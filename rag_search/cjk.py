"""Scripts written without spaces between words (Chinese, Japanese kana and kanji): overlapping character bigrams.

SQLite's unicode61 tokenizer makes one token of a whole run of such characters, so no word inside it could be
found: `全屏模态框` was one token and the text `全屏的模态框` another. Chunks carry the bigrams of their runs as
hidden keywords (indexed, never shown: `全屏 屏的 的模 模态 态框`), and a query's runs become the OR of their
bigrams, so BM25 ranks text holding more of the query's bigrams first - the usual way to search CJK text
without a dictionary.
"""

from __future__ import annotations

import re

_RANGES = ("\u3040-\u30ff"  # hiragana, katakana
           "\u3400-\u4dbf"  # CJK extension A
           "\u4e00-\u9fff"  # CJK unified ideographs
           "\uf900-\ufaff"  # compatibility ideographs
           "\uff66-\uff9f")  # half-width katakana
RUN = re.compile(f"[{_RANGES}]+")
GLOB = "*[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f]*"  # SQLite GLOB: holds such a character
MAX_GRAMS = 4000  # per chunk (a chunk is a few hundred words; this only bounds a hostile one)


def has_cjk(text: str) -> bool:
    return RUN.search(text) is not None


def grams(run: str) -> list[str]:
    """A run's overlapping bigrams (a single character stands for itself)."""
    return [run] if len(run) < 2 else [run[i:i + 2] for i in range(len(run) - 1)]


def bigrams(text: str) -> str:
    """The bigrams of every run in the text, space-separated ('' when it has none)."""
    out: list[str] = []
    for run in RUN.findall(text):
        out += grams(run)
        if len(out) >= MAX_GRAMS:
            break
    return " ".join(out[:MAX_GRAMS])


def split_runs(word: str) -> list[tuple[str, bool]]:
    """A query word cut into (piece, is_cjk) parts: `prop逐级透传` → [('prop', False), ('逐级透传', True)]."""
    parts, at = [], 0
    for m in RUN.finditer(word):
        if m.start() > at:
            parts.append((word[at:m.start()], False))
        parts.append((m.group(), True))
        at = m.end()
    if at < len(word):
        parts.append((word[at:], False))
    return parts
