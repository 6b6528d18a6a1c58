"""Document → chunks that fit the embedder's input window. Plain, deterministic functions.

Structured documents (Markdown, DOCX, HTML, EPUB, PDF pages) are packed block by block: paragraphs,
whole code blocks and whole tables where they fit, consecutive small sections merged (their heading
lines stay in the text), never across PDF pages. Each chunk starts with its context — title and
heading path — so the vector knows where the text stands. Plain text is cut into sentence windows
with overlap. Sizes are counted in the active embedder's tokens and never exceed its window.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable

from rag_search.records import Chunk, Document


TokenCounter = Callable[[str], int]
SPECIAL_TOKENS = 2  # [CLS] and [SEP] take two places of the window
DEFAULT_MAX = 400  # for long-window models; MiniLM's window caps it at 254
SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+|\n+")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")


@dataclass(frozen=True)
class ChunkSpec:
    max_tokens: int
    overlap_tokens: int
    window: int = 0  # tokens the embedder reads (0: same as max_tokens)


def chunk_spec(window: int, cfg: "Chunking | None" = None) -> ChunkSpec:
    if cfg is None:
        from rag_pipelines.config import Chunking

        cfg = Chunking()
    cap = window - SPECIAL_TOKENS
    return ChunkSpec(max_tokens=min(cfg.max_tokens or DEFAULT_MAX, cap), overlap_tokens=min(cfg.overlap_tokens, cap // 4),
                     window=cap)


def whole_document(doc: Document, count: TokenCounter, spec: ChunkSpec) -> list[Chunk] | None:
    """The whole item as one chunk when it fits the embedder's window (ingest: whole-document), else None."""
    body = "\n\n".join(s.text.strip() for s in doc.sections if s.text.strip())
    text = f"{doc.title}\n\n{body}" if doc.title and body else (body or doc.title).strip()
    if not text or bounded(count)(text) > (spec.window or spec.max_tokens):
        return None
    return [Chunk(index=0, text=text, title=doc.title, page=doc.sections[0].page if doc.sections else None, ts=doc.ts,
                  author=doc.author, participants=doc.participants, tags=doc.tags, metadata=dict(doc.metadata))]


@dataclass
class _Block:
    text: str
    path: tuple[str, ...]
    page: int | None
    tokens: int


COUNT_SEGMENT = 8_000  # characters: longer texts are counted piecewise (one 1.6 MB line peaked at 1 GB)


def bounded(count: TokenCounter) -> TokenCounter:
    """A counter whose memory does not grow with the text: long texts are counted in segments.

    Segments are cut at whitespace where possible; the sum is within a token or two per segment of
    the exact count, and any text that long is far over every chunk budget anyway.
    """
    def counted(text: str) -> int:
        if len(text) <= COUNT_SEGMENT:
            return count(text)
        total, start = 0, 0
        while start < len(text):
            end = min(len(text), start + COUNT_SEGMENT)
            if end < len(text):
                space = text.rfind(" ", start + COUNT_SEGMENT // 2, end)
                end = space if space > start else end
            total += count(text[start:end])
            start = end
        return total

    return counted


def chunk_document(doc: Document, count: TokenCounter, spec: ChunkSpec, plain: bool = False,
                   metadata: dict | None = None) -> list[Chunk]:
    count = remembered(bounded(count))
    bodies = _plain(doc, count, spec) if plain else _structured(doc, count, spec)
    if not bodies and doc.title.strip():  # a note that is only a title is still findable by it
        bodies = [(doc.title.strip(), (), None, None)]
    meta = {**doc.metadata, **(metadata or {})}
    return [
        Chunk(index=i, text=text, title=doc.title, heading_path=path, page=page, ts=doc.ts, author=doc.author,
              participants=doc.participants, tags=doc.tags, metadata=meta, tokens=tokens)
        for i, (text, path, page, tokens) in enumerate(bodies)
    ]


def remembered(count: TokenCounter) -> TokenCounter:
    """A counter that counts each short text once: a document's heading prefixes are counted per block."""
    seen: dict[str, int] = {}

    def counted(text: str) -> int:
        if len(text) > 200:
            return count(text)
        n = seen.get(text)
        if n is None:
            n = seen[text] = count(text)
        return n

    return counted


def context_prefix(title: str, path: tuple[str, ...]) -> str:
    parts = [title] + [p for i, p in enumerate(path) if not (i == 0 and p == title)]
    return " > ".join(p for p in parts if p)


def _structured(doc: Document, count: TokenCounter, spec: ChunkSpec):
    blocks = [b for s in doc.sections for b in _blocks(s.text, s.heading_path, s.page, count)]
    out, current = [], []
    for block in blocks:
        if current and not _fits(current + [block], doc.title, count, spec):
            out.append(current)
            current = []
        if not current and not _fits([block], doc.title, count, spec):
            out.extend([[b] for b in _split_block(block, doc.title, count, spec)])
            continue
        current.append(block)
    if current:
        out.append(current)
    return [_render(group, doc.title, count) for group in out]


def _fits(group: list[_Block], title: str, count: TokenCounter, spec: ChunkSpec) -> bool:
    if len({b.page for b in group}) > 1:
        return False
    prefix_tokens = count(context_prefix(title, _common_path(group))) + 2
    return prefix_tokens + sum(b.tokens + 1 for b in group) <= spec.max_tokens


def _render(group: list[_Block], title: str, count: TokenCounter) -> tuple[str, tuple[str, ...], int | None, int]:
    """The chunk's text, path, page and tokens (its parts' counts added up: the tokenizer splits at the
    blank lines that join them, so the sum is the count of the whole)."""
    path = _common_path(group)
    lines, shown, tokens = [], path, 0
    for b in group:
        if b.path != shown and len(b.path) > len(path):  # entering a sub-section: keep its heading line
            heading = "#" * len(b.path) + " " + b.path[-1]
            lines.append(heading)
            tokens += count(heading)
            shown = b.path
        lines.append(b.text)
        tokens += b.tokens
    prefix = context_prefix(title, path)
    body = "\n\n".join(lines)
    if prefix:
        return f"{prefix}\n\n{body}", path, group[0].page, tokens + count(prefix)
    return body, path, group[0].page, tokens


def _common_path(group: list[_Block]) -> tuple[str, ...]:
    path = group[0].path
    for b in group[1:]:
        n = 0
        while n < min(len(path), len(b.path)) and path[n] == b.path[n]:
            n += 1
        path = path[:n]
    return path


def _blocks(text: str, path, page, count: TokenCounter) -> Iterable[_Block]:
    """Paragraphs, with fenced code blocks and tables kept as single blocks."""
    buf: list[str] = []

    def emit():
        joined = "\n".join(buf).strip()
        buf.clear()
        return [_Block(joined, path, page, count(joined))] if joined else []

    fence, table = None, False
    for line in text.split("\n"):
        if fence:
            buf.append(line)
            if line.strip().startswith(fence) and not line.strip().strip(fence[0]):
                fence = None
                yield from emit()
            continue
        m = _FENCE.match(line)
        if m:
            yield from emit()
            fence = m.group(1)
            buf.append(line)
            continue
        if not line.strip():
            yield from emit()
            table = False
            continue
        is_table = line.lstrip().startswith("|")
        if buf and is_table != table:
            yield from emit()
        table = is_table
        buf.append(line)
    yield from emit()


def _split_block(block: _Block, title: str, count: TokenCounter, spec: ChunkSpec) -> list[_Block]:
    prefix_tokens = count(context_prefix(title, block.path)) + 2
    budget = max(16, spec.max_tokens - prefix_tokens)
    return [_Block(t, block.path, block.page, n) for t, n in window(block.text, budget, spec.overlap_tokens, count)]


def _plain(doc: Document, count: TokenCounter, spec: ChunkSpec):
    out = []
    for s in doc.sections:
        prefix = context_prefix(doc.title, s.heading_path)
        prefix_tokens = count(prefix)
        budget = max(16, spec.max_tokens - prefix_tokens - 2)
        for text, n in window(s.text, budget, spec.overlap_tokens, count):
            out.append((f"{prefix}\n\n{text}" if prefix else text, s.heading_path, s.page, n + prefix_tokens))
    return out


def window(text: str, budget: int, overlap: int, count: TokenCounter) -> list[tuple[str, int]]:
    """Sentence windows of at most `budget` tokens; each new window repeats ~`overlap` tokens."""
    pieces = [p for s in SENTENCE_END.split(text) if s.strip() for p in _cut(s.strip(), budget, count)]
    out: list[tuple[str, int]] = []
    current: list[tuple[str, int]] = []
    for piece, n in pieces:
        if current and sum(c[1] + 1 for c in current) + n > budget:
            out.append((" ".join(c[0] for c in current), sum(c[1] for c in current)))
            carry, total = [], 0
            for c in reversed(current):
                if total + c[1] > overlap or total + c[1] + n > budget - 1:
                    break
                carry.insert(0, c)
                total += c[1] + 1
            current = carry
        current.append((piece, n))
    if current:
        out.append((" ".join(c[0] for c in current), sum(c[1] for c in current)))
    return out


def _cut(sentence: str, budget: int, count: TokenCounter) -> list[tuple[str, int]]:
    """A sentence longer than the budget, cut at word boundaries into pieces that fit."""
    n = count(sentence)
    if n <= budget:
        return [(sentence, n)]
    words = sentence.split()
    if len(words) == 1:  # one giant token run: cut by characters
        step = max(1, len(sentence) * budget // (n + 1))
        return [p for i in range(0, len(sentence), step) for p in _cut(sentence[i : i + step], budget, count)]
    step = max(1, int(len(words) * budget / n * 0.9))
    out = []
    for i in range(0, len(words), step):
        part = " ".join(words[i : i + step])
        out.extend(_cut(part, budget, count) if count(part) > budget else [(part, count(part))])
    return out


def document_text(doc: Document) -> str:
    """The item's whole text for reading (rag_get_document): as written when the parser kept it (a note's
    Markdown), else its sections in order, each heading line once (level by depth) and a marker per page."""
    if doc.text is not None:
        return doc.text
    parts: list[str] = []
    shown: tuple[str, ...] = ()
    page = None
    for s in doc.sections:
        if s.page is not None and s.page != page:
            parts.append(f"[page {s.page}]")
            page = s.page
        same = 0
        while same < min(len(shown), len(s.heading_path)) and shown[same] == s.heading_path[same]:
            same += 1
        parts += ["#" * min(depth + 1, 6) + " " + s.heading_path[depth] for depth in range(same, len(s.heading_path))]
        shown = s.heading_path
        if s.text.strip():
            parts.append(s.text.strip())
    return "\n\n".join(parts)
