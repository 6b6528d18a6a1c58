"""Code → chunks that follow its syntax and fit the embedder's window. Plain, deterministic functions.

Top-level units (parsers/code.py) are packed in order: small neighbours share a chunk up to the budget; a
unit over the budget is split into its parts (a class by member, its header line as context; a function by
statement, its signature as context), recursively, and lines that still do not fit are cut into windows of
whole lines. Every chunk says where it stands — `metadata.lines` (`path:start-end` for citations), the
symbol it holds and its kind, the language — and carries the split forms of its identifiers as keywords.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rag_search.records import Chunk, Document
from rag_search.retrieval.identifiers import code_terms

from rag_pipelines.chunking.prose import ChunkSpec, TokenCounter, bounded, context_prefix, window
from rag_pipelines.parsers.code import CONTAINERS, Syntax, Unit, paragraph_units, parts, syntax_units

MAX_SYMBOLS = 50  # symbol names listed per chunk (they become filter values)
SLACK = 4  # tokens of the budget kept for a closing line ("}", "end") so it stays with what it closes
TINY = 6  # tokens: a piece this small is joined to a neighbour
_CLOSER = re.compile(r"^\s*([)}\];,]+|end)[\s)}\];,]*(//.*|/\*.*|#.*)?$")  # `}`, `};`, `end`, `} // ns`


@dataclass
class Piece:
    """Lines start..end of the file (or a cut of one long line: `text`) under a context of signatures."""

    start: int
    end: int
    units: list[Unit]
    context: tuple[str, ...] = ()
    text: str | None = None


@dataclass
class Packer:
    lines: list[str]
    syn: Syntax | None
    title: str
    count: TokenCounter
    spec: ChunkSpec
    _budgets: dict = field(default_factory=dict)

    def tokens(self, start: int, end: int) -> int:
        return self.count("\n".join(self.lines[start - 1 : end]))

    def _text(self, unit: Unit) -> str:
        return "\n".join(self.lines[unit.start - 1 : unit.end])

    def budget(self, context: tuple[str, ...]) -> int:
        if context not in self._budgets:
            prefix = self.count(context_prefix(self.title, context)) + 2
            self._budgets[context] = max(16, self.spec.max_tokens - prefix - SLACK)
        return self._budgets[context]

    def pack(self, units: list[Unit], context: tuple[str, ...], carry: list[Unit] | None = None) -> list[Piece]:
        """Units in order, neighbours merged while they fit; a unit over the budget split into its parts.

        carry: small units before this stretch (a header line, a statement) that may open its first piece.
        """
        budget, out = self.budget(context), []
        group = list(carry or [])
        used = sum(self.tokens(u.start, u.end) + 1 for u in group)
        for unit in units:
            n = self.tokens(unit.start, unit.end)
            if n > budget:
                take = group if group and used <= budget // 2 else []  # a small group opens the split's first piece
                if not take:
                    out += self._flush(group, context)
                out += self.split(unit, context, take)
                group, used = [], 0
                continue
            closer = n <= SLACK - 1 and unit.lines <= 2 and _CLOSER.match(self._text(unit))
            if group and used + n + 1 > budget + (SLACK if closer else 0):
                out += self._flush(group, context)
                group, used = [], 0
            group.append(unit)
            used += n + 1
        return self.tidy(out + self._flush(group, context))

    def tidy(self, pieces: list[Piece]) -> list[Piece]:
        """A piece of a few tokens (a lone `impl X {` or `}` left by a split) joins its neighbour where it fits."""
        out: list[Piece] = []
        for piece in pieces:
            prev = out[-1] if out else None
            context = self._joined(prev, piece) if prev is not None else None
            if context is not None:
                out[-1] = Piece(prev.start, piece.end, prev.units + piece.units, context)
            else:
                out.append(piece)
        return out

    def _joined(self, first: Piece, second: Piece) -> tuple[str, ...] | None:
        """The context of the two pieces as one, or None when they stay apart."""
        if first.text is not None or second.text is not None:
            return None
        tiny_first = self.tokens(first.start, first.end) <= TINY
        tiny_second = self.tokens(second.start, second.end) <= TINY
        if first.context == second.context and (tiny_first or tiny_second):
            context = first.context
        elif tiny_second and all(_CLOSER.match(self._text(u)) for u in second.units):
            context = first.context  # the closing line of what the first piece is part of
        elif tiny_first and second.context[: len(first.context)] == first.context:
            context = second.context  # a header line, then the first part of what it opens
        else:
            return None
        return context if self.tokens(first.start, second.end) <= self.budget(context) + SLACK else None

    def split(self, unit: Unit, context: tuple[str, ...], carry: list[Unit]) -> list[Piece]:
        inner = context + (unit.signature,) if unit.signature else context
        found = parts(self.syn, unit) if self.syn is not None else []
        if not found and unit.kind == "text":
            found = [u for u in paragraph_units(self.lines, unit.start, unit.end) if u.lines < unit.lines]
            inner = context
        pieces = self.pack(found, inner, carry) if found else self.windows(unit, inner, carry)
        head = unit.node.start_point[0] + 1 if unit.node is not None else unit.start
        for piece in pieces:  # the piece holding the signature line itself needs no copy of it as context
            if piece.start <= head and piece.context == inner:
                piece.context = context
        return pieces

    def windows(self, unit: Unit, context: tuple[str, ...], carry: list[Unit]) -> list[Piece]:
        """Whole lines up to the budget; a line longer than the budget cut into word windows."""
        budget, out = self.budget(context), []
        start = carry[0].start if carry else None
        used = sum(self.tokens(u.start, u.end) + 1 for u in carry)
        for n in range(unit.start, unit.end + 1):
            size = self.count(self.lines[n - 1]) + 1
            if start is not None and used + size > budget:
                out.append(Piece(start, n - 1, carry + [unit], context))
                start, used, carry = None, 0, []
            if size > budget:
                cuts = window(self.lines[n - 1], budget, 0, self.count)
                out += [Piece(n, n, [unit], context, text) for text, _ in cuts]
                continue
            if start is None:
                start = n
            used += size
        if start is not None:
            out.append(Piece(start, unit.end, carry + [unit], context))
        return out

    def _flush(self, group: list[Unit], context: tuple[str, ...]) -> list[Piece]:
        return [Piece(group[0].start, group[-1].end, group, context)] if group else []


def code_chunks(doc: Document, count: TokenCounter, spec: ChunkSpec, grammar: str | None = None) -> list[Chunk]:
    """The chunks of one source file (doc.sections[0] holds its text) along the grammar's syntax tree."""
    count = bounded(count)
    text = doc.sections[0].text if doc.sections else ""
    units, syn = syntax_units(text, grammar)
    packer = Packer(text.split("\n"), syn, doc.title, count, spec)
    if units and packer.tokens(units[0].start, units[-1].end) <= packer.budget(()):
        pieces = [Piece(units[0].start, units[-1].end, units)]
    else:
        pieces = packer.pack(units, ())
    if not pieces:
        return [Chunk(index=0, text=doc.title, title=doc.title, ts=doc.ts, author=doc.author,
                      participants=doc.participants, tags=doc.tags, metadata=dict(doc.metadata))]
    return [_chunk(doc, packer.lines, i, p) for i, p in enumerate(pieces)]


def _chunk(doc: Document, lines: list[str], index: int, piece: Piece) -> Chunk:
    body = piece.text if piece.text is not None else "\n".join(lines[piece.start - 1 : piece.end])
    prefix = context_prefix(doc.title, piece.context)
    text = f"{prefix}\n\n{body}" if prefix else body
    return Chunk(index=index, text=text, title=doc.title, heading_path=piece.context, ts=doc.ts, author=doc.author,
                 participants=doc.participants, tags=doc.tags, metadata={**doc.metadata, **describe(piece)},
                 keywords=code_terms(body))


def describe(piece: Piece) -> dict:
    """lines, and the chunk's main symbol (its largest definition) with its kind; all symbols when several."""
    meta: dict = {"lines": f"{piece.start}-{piece.end}"}
    named = [u for u in piece.units if u.name]
    first = piece.units[0]
    if first.header and first.name and first.kind in CONTAINERS:
        main = first  # the chunk opens a class (its header line): that is what it is about
    else:
        main = max(named, key=lambda u: (u.own, u.lines)) if named else max(piece.units, key=lambda u: u.lines)
    meta["kind"] = main.kind
    if main.name:
        meta["symbol"] = main.name
    symbols = list(dict.fromkeys(u.name for u in named))
    if len(symbols) > 1:
        meta["symbols"] = symbols[:MAX_SYMBOLS]
    return meta
