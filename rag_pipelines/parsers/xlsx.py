"""XLSX/XLSM → each worksheet's rows with its header, streamed (no openpyxl, no tree of a sheet).

workbook.xml names the sheets in order (chart sheets have no rows); each sheet's XML is fed to lxml a piece at
a time through a target that keeps only the current row, and reading stops once limits.max_cells non-empty
cells or limits.max_text_mb of text are read (sheets.py turns rows into sections). Cell values: shared and
inline strings, numbers (at most 15 significant digits, as Excel shows them), TRUE/FALSE, error values, and
dates: a number whose style has a date or time format becomes 2024-03-15, 2024-03-15 13:30 or 13:30 (1900
and 1904 date systems). The shared strings are read once, up to SHARED_FACTOR x max_text_mb of text.
Formulas are not evaluated: the value Excel saved with them is read. Macros (XLSM) are never read.
"""

from __future__ import annotations

import re
import zipfile
from datetime import datetime, timedelta

from rag_search.records import Document

from rag_pipelines.parsers.documents import ZIP_ERRORS, no_text, read_xml, stem
from rag_pipelines.parsers.errors import ParseError
from rag_pipelines.parsers.limits import MB, Limits
from rag_pipelines.parsers.ooxml import core_properties, feed_part, iso_date, open_package, relationships, split_tag
from rag_pipelines.parsers.sheets import Cell, WorkbookText, column_number
from rag_pipelines.parsers.titles import meta_title

SHARED_FACTOR = 2  # the shared strings kept may hold this many times limits.max_text_mb of text
DATE_FORMATS = frozenset({*range(14, 23), *range(27, 37), *range(45, 48), *range(50, 59)})  # built-in date/time ids
FORMAT_NOISE = re.compile(r'"[^"]*"|\[[^\]]*\]|\\.|_.|\*.')  # quoted text, [Red]/[$-409], escapes, padding
FIX = "re-save it from Excel or LibreOffice Calc"


def parse_xlsx(data: bytes, filename: str, mtime_ns: int | None = None, limits: Limits | None = None) -> Document:
    limits = limits or Limits()
    zf, main, root = open_package(data, filename, "xl/workbook.xml", "XLSX", "workbook", FIX)
    rels = relationships(zf, main)
    parts = {kind.rsplit("/", 1)[-1]: target for kind, target in rels.values()}
    book = WorkbookText(limits)
    reader = _SheetReader(book, _shared_strings(zf, parts.get("sharedStrings"), limits),
                          _date_styles(zf, parts.get("styles")), _date1904(root))
    unreadable = []
    for name, rid in _sheets(root):
        if book.full:
            break
        kind, part = rels.get(rid, ("", ""))
        if kind.endswith("/worksheet") and not _read_sheet(zf, part, name, book, reader):
            unreadable.append(name)
    book.end_sheet()
    return _document(zf, filename, mtime_ns, book, unreadable)


def _document(zf, filename: str, mtime_ns: int | None, book: WorkbookText, unreadable: list[str]) -> Document:
    warnings = [f"sheet(s) {', '.join(unreadable)} could not be read (damaged)"] if unreadable else []
    warnings += [book.warning()] if book.warning() else []
    if not book.sections and unreadable:
        raise ParseError("corrupt", f"{filename}: {warnings[0]}, and the others hold no values; {FIX}")
    if not book.sections:
        warnings.insert(0, no_text(f"no cells with values in its {len(book.sheets)} sheet(s)"))
    props = core_properties(zf)
    return Document(title=meta_title(props.get("title")) or stem(filename), sections=tuple(book.sections),
                    author=props.get("creator"),
                    ts=iso_date(props.get("modified")) or iso_date(props.get("created"))
                    or (mtime_ns // 1_000_000_000 if mtime_ns else None),
                    metadata={"sheets": book.sheets[:100], **({"parse_warning": "; ".join(warnings)} if warnings
                                                               else {})})


def _sheets(root) -> list[tuple[str, str]]:
    """(name, relationship id) of each sheet, in the workbook's order."""
    return [(el.get("name", ""), next((v for k, v in el.attrib.items() if k.endswith("}id")), ""))
            for el in root.iter("{*}sheet")]


def _date1904(root) -> bool:
    pr = next(root.iter("{*}workbookPr"), None)
    return pr is not None and pr.get("date1904", "").lower() in ("1", "true")


def _read_sheet(zf: zipfile.ZipFile, part: str, name: str, book: WorkbookText, reader: _SheetReader) -> bool:
    book.start_sheet(name)
    reader.reset()
    try:
        return feed_part(zf, part, reader)
    except ZIP_ERRORS:
        return False


def _shared_strings(zf: zipfile.ZipFile, part: str | None, limits: Limits) -> list[str]:
    target = _SharedStrings(int(limits.max_text_mb * MB * SHARED_FACTOR))
    if part:
        try:
            feed_part(zf, part, target)
        except ZIP_ERRORS:
            pass  # a damaged shared-strings part: the cells that use it read as empty
    return target.strings


def _date_styles(zf: zipfile.ZipFile, part: str | None) -> frozenset[int]:
    """Indexes of the cell styles (cellXfs) whose number format is a date or a time."""
    root = read_xml(zf, part) if part else None
    if root is None:
        return frozenset()
    custom = {int(f.get("numFmtId", -1)): f.get("formatCode", "") for f in root.iter("{*}numFmt")
              if f.get("numFmtId", "").isdigit()}
    xfs = next(root.iter("{*}cellXfs"), None)
    styles = xfs.iterfind("{*}xf") if xfs is not None else ()
    ids = [int(xf.get("numFmtId", "0")) if xf.get("numFmtId", "0").isdigit() else 0 for xf in styles]
    return frozenset(i for i, fmt in enumerate(ids) if fmt in DATE_FORMATS or _is_date_format(custom.get(fmt, "")))


def _is_date_format(code: str) -> bool:
    plain = FORMAT_NOISE.sub("", code.split(";", 1)[0]).lower()
    return bool(plain) and plain != "general" and any(ch in plain for ch in "dmyhs")


class _SharedStrings:
    """lxml target over sharedStrings.xml: each <si>'s text (phonetic runs left out), up to a text budget."""

    def __init__(self, budget: int):
        self.strings: list[str] = []
        self.pieces: list[str] | None = None
        self.texts = self.phonetic = 0
        self.budget, self.full = budget, False

    def start(self, tag, attrib):
        name = split_tag(tag)[1]
        if name == "si":
            self.pieces = []
        elif name == "t":
            self.texts += 1
        elif name == "rPh":
            self.phonetic += 1

    def end(self, tag):
        name = split_tag(tag)[1]
        if name == "si" and self.pieces is not None:
            text = "".join(self.pieces)
            self.budget -= len(text)
            self.strings.append(text if self.budget >= 0 else "")
            self.pieces = None
        elif name == "t":
            self.texts -= 1
        elif name == "rPh":
            self.phonetic -= 1

    def data(self, data):
        if self.texts and not self.phonetic and self.pieces is not None:
            self.pieces.append(data)

    def close(self):
        return self.strings


class _SheetReader:
    """lxml target over a worksheet: hands each <row>'s non-empty cells to the workbook, keeps nothing else."""

    def __init__(self, book: WorkbookText, shared: list[str], dates: frozenset[int], date1904: bool):
        self.book, self.shared, self.dates = book, shared, dates
        self.epoch = datetime(1904, 1, 1) if date1904 else datetime(1899, 12, 30)
        self.reset()

    def reset(self) -> None:
        self.row, self.column, self.cells, self.cell, self.pieces, self.inside = 0, 0, [], None, [], ""

    @property
    def full(self) -> bool:
        return self.book.full

    def start(self, tag, attrib):
        name = split_tag(tag)[1]
        if name == "row":
            r = attrib.get("r", "")
            self.row, self.cells, self.column = int(r) if r.isdigit() else self.row + 1, [], 0
        elif name == "c":
            self.column = column_number(attrib.get("r", "")) or self.column + 1
            self.cell, self.pieces = (attrib.get("t", "n"), attrib.get("s", "")), []
        elif name in ("v", "t") and self.cell is not None:
            self.inside = name

    def end(self, tag):
        name = split_tag(tag)[1]
        if name in ("v", "t"):
            self.inside = ""
        elif name == "c" and self.cell is not None:
            cell = self._value("".join(self.pieces), *self.cell)
            if cell is not None:
                self.cells.append(cell)
            self.cell = None
        elif name == "row":
            self.book.add_row(self.row, sorted(self.cells, key=lambda c: c.column))
            self.cells = []

    def data(self, data):
        if self.inside:
            self.pieces.append(data)

    def close(self):
        return None

    def _value(self, raw: str, kind: str, style: str) -> Cell | None:
        if not raw.strip():
            return None
        if kind == "s":
            index = int(raw) if raw.strip().isdigit() else -1
            text = self.shared[index] if 0 <= index < len(self.shared) else ""
            return Cell(self.column, text) if text else None
        if kind in ("inlineStr", "str", "e"):
            return Cell(self.column, raw, kind != "e")
        if kind == "b":
            return Cell(self.column, "TRUE" if raw.strip() in ("1", "true") else "FALSE", False)
        if kind == "d":
            return Cell(self.column, raw.strip().replace("T00:00:00", "").replace("T", " "), False)
        return Cell(self.column, self._number(raw, style), False)

    def _number(self, raw: str, style: str) -> str:
        try:
            value = float(raw)
        except ValueError:
            return raw.strip()
        if style.isdigit() and int(style) in self.dates and 0 <= value < 2_958_466:  # up to 9999-12-31
            return _date_text(self.epoch + timedelta(days=value), value)
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return f"{value:.15g}"


def _date_text(when: datetime, serial: float) -> str:
    when = (when + timedelta(microseconds=500_000)).replace(microsecond=0)  # to the nearest second
    if serial < 1:
        return when.strftime("%H:%M")
    return when.strftime("%Y-%m-%d") if serial.is_integer() else when.strftime("%Y-%m-%d %H:%M")
