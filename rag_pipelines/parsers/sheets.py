"""Workbook rows → sections (XLSX and ODS share it): each row read with its sheet's header, cited by sheet and rows.

A sheet's header is its first row of two or more text cells, found among its first non-empty rows (a one-cell
title line above it is kept as a line of its own; a row with a number or date first means there is none). With
a header a row reads "Name: Ann | Amount: 300" (a column without a header name is named by its letter); without
one, "Ann | 300". Rows are grouped into sections of about ROWS_CHARS characters, each labelled
(sheet name, "rows 2–31"), so every passage says where it stands. Reading stops at limits.max_cells non-empty
cells or limits.max_text_mb of text; the warning names the sheet and row where it stopped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rag_search.records import Section

from rag_pipelines.parsers.limits import MB, Limits, human_size
from rag_pipelines.parsers.webpage import label

ROWS_CHARS = 700  # text of one section of rows: within one chunk of the bundled embedder (254 tokens)
HEADER_SEARCH = 3  # non-empty rows looked at for the header
MAX_COLUMNS = 16_384  # Excel's last column (XFD); a column past it is not one


@dataclass(frozen=True)
class Cell:
    column: int  # 1 = A
    text: str
    is_text: bool = True  # a string cell (a number, date or boolean is not)


def column_name(column: int) -> str:
    """1 → A, 27 → AA, 16384 → XFD."""
    name = ""
    while column > 0:
        column, rest = divmod(column - 1, 26)
        name = chr(65 + rest) + name
    return name


def column_number(ref: str) -> int | None:
    """'B7' → 2; None when the reference has no letters or names a column past MAX_COLUMNS."""
    number = 0
    for ch in ref:
        if "A" <= ch <= "Z":
            number = number * 26 + ord(ch) - 64
        elif "a" <= ch <= "z":
            number = number * 26 + ord(ch) - 96
        else:
            break
        if number > MAX_COLUMNS:
            return None
    return number or None


@dataclass
class _Sheet:
    name: str
    header: dict[int, str] | None = None
    searching: int = HEADER_SEARCH
    lines: list[str] = field(default_factory=list)
    first: int | None = None
    last: int | None = None
    size: int = 0


class WorkbookText:
    """Collects the sections of a workbook's sheets, row by row, within the cell and text limits."""

    def __init__(self, limits: Limits):
        self.max_cells, self.max_text = limits.max_cells, int(limits.max_text_mb * MB)
        self.sections: list[Section] = []
        self.sheets: list[str] = []
        self.cells = self.size = 0
        self.full = False
        self.stopped: tuple[str, int] | None = None  # (sheet, row) where reading stopped
        self.why = ""
        self._sheet: _Sheet | None = None

    def start_sheet(self, name: str) -> None:
        self.end_sheet()
        self._sheet = _Sheet(label(name) or f"Sheet {len(self.sheets) + 1}")
        self.sheets.append(self._sheet.name)

    def add_row(self, number: int, cells: list[Cell]) -> None:
        """One row's non-empty cells (in column order); ignored once the workbook is full."""
        sheet = self._sheet
        cells = [c for c in cells if c.text.strip()]
        if self.full or sheet is None or not cells:
            return
        if self.cells + len(cells) > self.max_cells or self.size > self.max_text:
            self._stop(sheet.name, number, "limits.max_cells" if self.cells + len(cells) > self.max_cells else "")
            return
        self.cells += len(cells)
        line = self._line(sheet, cells)
        if line:
            self._add_line(sheet, number, line)

    def _line(self, sheet: _Sheet, cells: list[Cell]) -> str:
        if sheet.header is None and sheet.searching:
            sheet.searching -= 1
            if len(cells) >= 2 and all(c.is_text for c in cells):
                sheet.header, sheet.searching = {c.column: label(c.text) for c in cells}, 0
                return ""
            sheet.searching = sheet.searching if len(cells) == 1 and cells[0].is_text else 0
        if sheet.header is None:
            return " | ".join(_flat(c.text) for c in cells)
        return " | ".join(f"{sheet.header.get(c.column) or column_name(c.column)}: {_flat(c.text)}" for c in cells)

    def _add_line(self, sheet: _Sheet, number: int, line: str) -> None:
        sheet.first = sheet.first if sheet.first is not None else number
        sheet.last = number
        sheet.lines.append(line)
        sheet.size += len(line) + 1
        self.size += len(line) + 1
        if sheet.size >= ROWS_CHARS:
            self._flush(sheet)

    def _flush(self, sheet: _Sheet) -> None:
        if sheet.lines:
            rows = f"row {sheet.first}" if sheet.first == sheet.last else f"rows {sheet.first}–{sheet.last}"
            self.sections.append(Section(text="\n".join(sheet.lines), heading_path=(sheet.name, rows)))
        sheet.lines, sheet.first, sheet.size = [], None, 0

    def end_sheet(self) -> None:
        if self._sheet is not None:
            self._flush(self._sheet)

    def _stop(self, sheet: str, row: int, setting: str) -> None:
        self.full, self.stopped = True, (sheet, row)
        self.why = (f"it holds more than {self.max_cells:,} non-empty cells (limits.max_cells)" if setting else
                    f"its text passed {human_size(self.max_text)} (limits.max_text_mb)")
        self.end_sheet()

    def warning(self) -> str | None:
        if not self.stopped:
            return None
        sheet, row = self.stopped
        return (f"sheet '{sheet}' from row {row} on (and any later sheets) was not read: {self.why}; raise the "
                "limit to index the whole workbook")


def _flat(text: str) -> str:
    """A cell's text on one line (a cell with line breaks would look like several rows)."""
    return " ".join(text.split())
