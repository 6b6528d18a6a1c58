"""OCR'd lines → text in reading order, its confidence, and whether the page looks turned on its side.

Boxes whose vertical middles are within half a line height of each other are one line, read left to right;
a gap of more than LINE_GAP line heights starts a new paragraph (a blank line, so the chunker sees it).
Confidence is the engines' per-line score averaged over characters.
"""

from __future__ import annotations

from rag_pipelines.parsers.ocr.engines import Line

LINE_GAP = 1.6  # vertical gap (in line heights) that starts a paragraph
TALL = 1.5  # a box this many times taller than wide holds text turned on its side


def layout(lines: list[Line]) -> str:
    rows: list[list[Line]] = []
    for line in sorted((ln for ln in lines if ln.text.strip()), key=lambda ln: _middle(ln)):
        if rows and abs(_middle(line) - _middle(rows[-1][-1])) <= _height(rows[-1][-1]) / 2:
            rows[-1].append(line)
        else:
            rows.append([line])
    out, previous = [], None
    for row in rows:
        top, bottom = min(ln.box[1] for ln in row), max(ln.box[3] for ln in row)
        if previous is not None and top - previous[1] > LINE_GAP * max(previous[1] - previous[0], 1):
            out.append("")
        out.append(" ".join(ln.text.strip() for ln in sorted(row, key=lambda ln: ln.box[0])))
        previous = (top, bottom)
    return "\n".join(out).strip()


def confidence(lines: list[Line]) -> float:
    chars = sum(len(ln.text.strip()) for ln in lines)
    return sum(ln.confidence * len(ln.text.strip()) for ln in lines) / chars if chars else 0.0


def score(lines: list[Line]) -> float:
    """How much confidently read text there is: what orientation attempts are compared by."""
    return sum(ln.confidence * len(ln.text.strip()) for ln in lines)


def sideways(lines: list[Line]) -> bool:
    """Most of the text sits in boxes taller than wide: the image is turned by 90° one way or the other."""
    tall = sum(len(ln.text) for ln in lines if _height(ln) > TALL * max(ln.box[2] - ln.box[0], 1))
    return tall * 2 > sum(len(ln.text) for ln in lines) > 0


def _middle(line: Line) -> float:
    return (line.box[1] + line.box[3]) / 2


def _height(line: Line) -> float:
    return max(line.box[3] - line.box[1], 1.0)
