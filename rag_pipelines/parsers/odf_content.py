"""An OpenDocument content.xml, streamed: the lxml parser target behind odf.py (text, spreadsheet, presentation).

Paragraph text: text:p and text:h with text:s (spaces), text:tab and text:line-break; tracked changes (deleted
text), annotations (comments) and footnote marks are left out. A text document gives (line, "heading N" or
None) in order, a table row as one line of cells joined by " | ". A spreadsheet gives rows of cells to
sheets.WorkbookText: a cell's text is what the application shows, repeated cells and rows
(number-columns-repeated / number-rows-repeated) are expanded only when they hold text, and never past the
workbook's limits. A presentation gives each draw:page's title frame, other text and its
presentation:notes to slides.DeckText.
"""

from __future__ import annotations

from rag_pipelines.parsers.limits import MB, Limits
from rag_pipelines.parsers.ooxml import split_tag
from rag_pipelines.parsers.sheets import MAX_COLUMNS, Cell, WorkbookText
from rag_pipelines.parsers.slides import DeckText

NS = "urn:oasis:names:tc:opendocument:xmlns:"
TEXT, TABLE, OFFICE = NS + "text:1.0", NS + "table:1.0", NS + "office:1.0"
DRAW, PRESENTATION = NS + "drawing:1.0", NS + "presentation:1.0"
LEFT_OUT = frozenset({(TEXT, "tracked-changes"), (OFFICE, "annotation"), (TEXT, "note-citation"),
                      (OFFICE, "annotation-end"), (TEXT, "sequence-decls")})
CHARS = {(TEXT, "tab"): "\t", (TEXT, "line-break"): "\n"}
MAX_ROWS = 1_048_576  # rows of a sheet (as many as Excel's): a repeat past it is not expanded


class Content:
    """lxml target over content.xml; `mode` is text, spreadsheet or presentation."""

    def __init__(self, mode: str, limits: Limits):
        self.mode = mode
        self.lines: list[tuple[str, str | None]] = []  # text documents
        self.book = WorkbookText(limits)  # spreadsheets
        self.deck = DeckText(limits)  # presentations
        self.max_text, self.size = int(limits.max_text_mb * MB), 0
        self.paragraphs: list[list] = []  # open paragraphs: [pieces, heading level or None]
        self.cells: list[list[str]] = []  # open table cells: their paragraphs
        self.rows: list[list] = []  # open rows: [cells, repeat]; a cell: (column, text, is_text)
        self.columns: list[int] = []  # the next column of each open row
        self.skip = 0
        self.slide: list | None = None  # the open slide: [title, body lines, notes lines]
        self.slide_number = 0
        self.frame: list[str] = []  # presentation:class of the open draw:frames
        self.notes = 0
        self.row_number = 0

    @property
    def full(self) -> bool:
        if self.mode == "spreadsheet":
            return self.book.full
        if self.mode == "presentation":
            return self.deck.full
        return self.size > self.max_text

    def start(self, tag, attrib):
        key = split_tag(tag)
        if self.skip or key in LEFT_OUT:
            self.skip += 1
        elif key[0] == TEXT:
            self._text_start(key[1], attrib)
        elif key[0] == TABLE:
            self._table_start(key[1], attrib)
        elif key[0] in (DRAW, PRESENTATION):
            self._draw_start(key, attrib)

    def end(self, tag):
        key = split_tag(tag)
        if self.skip:
            self.skip -= 1
        elif key[0] == TEXT and key[1] in ("p", "h"):
            self._paragraph_end()
        elif key[0] == TABLE:
            self._table_end(key[1])
        elif key[0] in (DRAW, PRESENTATION):
            self._draw_end(key)

    def data(self, data):
        if self.paragraphs and not self.skip:
            self.paragraphs[-1][0].append(data)

    def close(self):
        self._slide_end()  # a file cut short: the slide read so far
        self.book.end_sheet()

    # -- paragraphs ------------------------------------------------------------------------------

    def _text_start(self, name: str, attrib) -> None:
        if name in ("p", "h"):
            level = attrib.get(f"{{{TEXT}}}outline-level", "1") if name == "h" else None
            self.paragraphs.append([[], int(level) if level and level.isdigit() else (1 if name == "h" else None)])
        elif name == "s" and self.paragraphs:
            count = attrib.get(f"{{{TEXT}}}c", "1")
            self.paragraphs[-1][0].append(" " * min(int(count) if count.isdigit() else 1, 100))
        elif (TEXT, name) in CHARS and self.paragraphs:
            self.paragraphs[-1][0].append(CHARS[(TEXT, name)])

    def _paragraph_end(self) -> None:
        if not self.paragraphs:
            return
        pieces, level = self.paragraphs.pop()
        text = "".join(pieces).strip()
        if not text:
            return
        if self.paragraphs:  # a paragraph inside another (a footnote's body): part of it
            self.paragraphs[-1][0].append(" " + text)
        elif self.cells:
            self.cells[-1].append(text)
        elif self.mode == "presentation":
            self._slide_text(text)
        else:
            self.size += len(text)
            self.lines.append((text, f"heading {level}" if level else None))

    # -- tables ----------------------------------------------------------------------------------

    def _table_start(self, name: str, attrib) -> None:
        if name == "table" and self.mode == "spreadsheet" and not self.rows:
            self.book.start_sheet(attrib.get(f"{{{TABLE}}}name", ""))
            self.row_number = 0
        elif name == "table-row":
            self.rows.append([[], _repeat(attrib, "number-rows-repeated", MAX_ROWS)])
            self.columns.append(1)
        elif name in ("table-cell", "covered-table-cell") and self.rows:
            self.cells.append([])
            kind = attrib.get(f"{{{OFFICE}}}value-type", "string")
            self.rows[-1][0].append((self.columns[-1], _repeat(attrib, "number-columns-repeated", MAX_COLUMNS),
                                     kind == "string"))

    def _table_end(self, name: str) -> None:
        if name in ("table-cell", "covered-table-cell") and self.cells and self.rows:
            column, repeat, is_text = self.rows[-1][0].pop()
            text = "\n".join(self.cells.pop())
            self.rows[-1][0].append((column, text, is_text, repeat))
            self.columns[-1] += repeat
        elif name == "table-row" and self.rows:
            cells, repeat = self.rows.pop()
            self.columns.pop()
            self._row_end(cells, repeat)

    def _row_end(self, cells: list, repeat: int) -> None:
        if self.mode == "spreadsheet" and not self.rows:
            row = [Cell(column + i, text, is_text) for column, text, is_text, times in cells if text
                   for i in range(min(times, MAX_COLUMNS - column + 1))]
            for _ in range(repeat if row else 0):
                self.row_number += 1
                self.book.add_row(self.row_number, row)
                if self.book.full:
                    break
            self.row_number += 0 if row else repeat
            return
        line = " | ".join(text.replace("\n", " ") for _, text, _, _ in cells if text)
        if line:
            self.cells[-1].append(line) if self.cells else self._line(line)

    def _line(self, line: str) -> None:
        if self.mode == "presentation":
            self._slide_text(line)
        else:
            self.size += len(line)
            self.lines.append((line, None))

    # -- slides ----------------------------------------------------------------------------------

    def _draw_start(self, key: tuple[str, str], attrib) -> None:
        if self.mode != "presentation":
            return
        if key == (DRAW, "page"):
            self.slide_number += 1
            self.slide = ["", [], []] if self.deck.room(self.slide_number) else None
            self.skip += 0 if self.slide else 1  # a slide past the limits: its content is not read
        elif key == (DRAW, "frame"):
            self.frame.append(attrib.get(f"{{{PRESENTATION}}}class", ""))
        elif key == (PRESENTATION, "notes"):
            self.notes += 1

    def _draw_end(self, key: tuple[str, str]) -> None:
        if key == (DRAW, "frame") and self.frame:
            self.frame.pop()
        elif key == (PRESENTATION, "notes"):
            self.notes -= 1
        elif key == (DRAW, "page"):
            self._slide_end()

    def _slide_text(self, text: str) -> None:
        if self.slide is None:
            return
        if self.notes:
            self.slide[2].append(text)
        elif self.frame and self.frame[-1] == "title" and not self.slide[0]:
            self.slide[0] = text
        else:
            self.slide[1].append(text)

    def _slide_end(self) -> None:
        if self.slide is not None:
            self.deck.add(self.slide_number, *self.slide)
            self.slide = None


def _repeat(attrib, name: str, most: int) -> int:
    value = attrib.get(f"{{{TABLE}}}{name}", "1")
    return max(1, min(int(value), most)) if value.isdigit() else 1
