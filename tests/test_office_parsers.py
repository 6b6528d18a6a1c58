"""Slides, workbooks and OpenDocument files: real files made by python-pptx, openpyxl and odfpy, real public ones
(tests/fixtures/public: python-pptx's and calamine's test files, MIT), and huge or hostile shapes within the limits."""

from __future__ import annotations

import datetime
import io
import zipfile
from pathlib import Path

import pytest
from office_builders import big_deck, big_workbook, deck, odp, ods, odt, workbook

from rag_pipelines.parsers import Limits, ParseError, parse, source_type

PUBLIC = Path(__file__).parent / "fixtures" / "public"


def texts(doc) -> list[tuple[tuple[str, ...], int | None, str]]:
    return [(s.heading_path, s.page, s.text) for s in doc.sections]


def test_a_deck_gives_each_slide_its_title_body_table_and_notes():
    data = deck([("Quarterly review", ["Acme Corp, March 2024"], None, None),
                 ("Revenue grew", ["Revenue up 12% on widgets", "Churn fell to 3%"], "Mention the Berlin office.", None),
                 ("Regions", [], None, [["Region", "Sales"], ["North", "120"], ["South", "95"]])])
    doc = parse(data, "talks/review.pptx")
    assert texts(doc) == [
        (("Slide 1: Quarterly review",), 1, "Acme Corp, March 2024"),
        (("Slide 2: Revenue grew",), 2, "Revenue up 12% on widgets\nChurn fell to 3%"),
        (("Slide 2: Revenue grew", "Speaker notes"), 2, "Mention the Berlin office."),
        (("Slide 3: Regions",), 3, "Region | Sales\nNorth | 120\nSouth | 95"),
    ]
    assert doc.title == "Quarterly review" and doc.metadata["slides"] == 3 and source_type("pptx") == "pptx"


def test_public_decks_keep_their_tables_and_notes():
    """scanny/python-pptx features/steps/test_files/tbl-cell.pptx and sld-notes.pptx (MIT): tables, a notes slide."""
    tables = parse((PUBLIC / "tbl-cell.pptx").read_bytes(), "tbl-cell.pptx")
    assert (("Slide 3",), 3, "a | b | c\nd | e | f\ng | h | i") in texts(tables)
    notes = parse((PUBLIC / "sld-notes.pptx").read_bytes(), "sld-notes.pptx")
    assert (("Slide 1", "Speaker notes"), 1, "Notes") in texts(notes)


def test_a_big_deck_is_read_up_to_max_slides_and_says_so():
    doc = parse(big_deck(30), "big.pptx", limits=Limits(max_slides=10))
    assert [s.page for s in doc.sections] == list(range(1, 11))
    assert doc.sections[9].heading_path == ("Slide 10: Slide title 10",)
    assert doc.metadata["parse_warning"].startswith("slides 11–30 not read") and "limits.max_slides" in \
        doc.metadata["parse_warning"]


def test_a_workbook_reads_rows_with_their_header_and_cites_sheet_and_rows():
    data = workbook({
        "Budget": [["Budget 2024"], ["Item", "Amount", "Due", "Paid"],
                   ["Rent", 1200, datetime.date(2024, 3, 1), True],
                   ["Laptop", 1499.99, datetime.datetime(2024, 3, 15, 13, 30), False]],
        "Raw": [[1, 0.1, "x"], [2, 0.2, "y"]],
    })
    doc = parse(data, "money/budget.xlsx")
    assert texts(doc) == [
        (("Budget", "rows 1–4"), None, "Budget 2024\nItem: Rent | Amount: 1200 | Due: 2024-03-01 | Paid: TRUE\n"
                                       "Item: Laptop | Amount: 1499.99 | Due: 2024-03-15 13:30 | Paid: FALSE"),
        (("Raw", "rows 1–2"), None, "1 | 0.1 | x\n2 | 0.2 | y"),
    ]
    assert doc.metadata["sheets"] == ["Budget", "Raw"] and parse(data, "b.xlsm").sections == doc.sections


def test_a_public_workbook_and_a_password_protected_one():
    """tafia/calamine tests/temperature-table.xlsx and pass_protected.xlsx (MIT): header rows; an encrypted workbook
    is an OLE file, not a zip."""
    doc = parse((PUBLIC / "temperature-table.xlsx").read_bytes(), "temperature-table.xlsx")
    assert texts(doc)[0] == (("Sheet1", "rows 2–3"), None, "label: celsius | value: 22.2222\nlabel: fahrenheit | value: 72")
    with pytest.raises(ParseError, match="password-protected") as err:
        parse((PUBLIC / "pass_protected.xlsx").read_bytes(), "pass_protected.xlsx")
    assert err.value.kind == "encrypted"


def test_a_big_workbook_stops_at_max_cells_and_says_where():
    doc = parse(big_workbook(2_000, 10), "big.xlsx", limits=Limits(max_cells=5_000))
    rows = [s.heading_path[1] for s in doc.sections]
    assert rows[0].startswith("rows 2–") and rows[-1].endswith("–500")  # the header took 10 of the 5,000 cells
    assert sum(s.text.count("\n") + 1 for s in doc.sections) == 499
    assert "sheet 'Data' from row 501 on" in doc.metadata["parse_warning"]
    assert "limits.max_cells" in doc.metadata["parse_warning"]


def test_opendocument_text_spreadsheet_and_presentation():
    text = parse(odt("Travel notes", [(1, "Lisbon"), (0, "Tram 28 climbs to the castle."), (2, "Food"),
                                      (0, "Pastel de nata at Manteigaria.")]), "travel.odt")
    assert text.title == "Travel notes"
    assert texts(text) == [(("Lisbon",), None, "Tram 28 climbs to the castle."),
                           (("Lisbon", "Food"), None, "Pastel de nata at Manteigaria.")]
    sheet = parse(ods({"Inventory": [["Item", "Count"], ["Bolts", 40], ["Nuts", 12]]}, trailing_repeat=1_000_000),
                  "stock.ods")
    assert texts(sheet) == [(("Inventory", "rows 2–3"), None, "Item: Bolts | Count: 40\nItem: Nuts | Count: 12")]
    slides = parse(odp([("Roadmap", "Ship v2 in June", "Ask about budget"), ("Risks", "Hiring is slow", None)]),
                   "plan.odp")
    assert texts(slides) == [(("Slide 1: Roadmap",), 1, "Ship v2 in June"),
                             (("Slide 1: Roadmap", "Speaker notes"), 1, "Ask about budget"),
                             (("Slide 2: Risks",), 2, "Hiring is slow")]


def test_a_repeated_cell_never_expands_past_the_limits():
    """number-rows-repeated and number-columns-repeated on cells with text: a billion cells in a few bytes."""
    content = ('<?xml version="1.0"?><office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:'
               'office:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:text="urn:oasis:'
               'names:tc:opendocument:xmlns:text:1.0"><office:body><office:spreadsheet><table:table table:name="S">'
               '<table:table-row table:number-rows-repeated="1048576"><table:table-cell '
               'table:number-columns-repeated="16384"><text:p>spam</text:p></table:table-cell></table:table-row>'
               '</table:table></office:spreadsheet></office:body></office:document-content>')
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("mimetype", "application/vnd.oasis.opendocument.spreadsheet")
        z.writestr("content.xml", content)
    doc = parse(out.getvalue(), "bomb.ods", limits=Limits(max_cells=50_000))
    # the first row is the header (16,384 cells), then two rows of 16,384 cells fit in 50,000
    assert sum(s.text.count("\n") + 1 for s in doc.sections) == 2
    assert sum(s.text.count("spam: spam") for s in doc.sections) == 2 * 16_384
    assert "from row 4 on" in doc.metadata["parse_warning"] and "limits.max_cells" in doc.metadata["parse_warning"]


@pytest.mark.parametrize("name,app,modern", [("old.doc", "Word", "docx"), ("old.xls", "Excel", "xlsx"),
                                             ("old.ppt", "PowerPoint", "pptx")])
def test_legacy_office_files_are_unsupported_with_how_to_convert(name, app, modern):
    with pytest.raises(ParseError) as err:
        parse(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(500), name)
    assert err.value.kind == "unsupported" and source_type(name.rsplit(".", 1)[1]) == name.rsplit(".", 1)[1]
    assert f"{app} 97-2003" in str(err.value) and f"--convert-to {modern}" in str(err.value)


@pytest.mark.parametrize("name", ["bomb.pptx", "bomb.xlsx", "bomb.odt"])
def test_zipped_office_files_are_checked_for_bombs(name):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("content.xml", b" " * (6 * 1024 * 1024))
    with pytest.raises(ParseError) as err:
        parse(out.getvalue(), name, limits=Limits(max_unzipped_mb=1))
    assert err.value.kind == "zip_bomb"


@pytest.mark.parametrize("name", ["empty.pptx", "empty.xlsx", "empty.ods"])
def test_a_package_without_its_main_part_is_corrupt_with_what_to_do(name):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("readme.txt", "not an office document")
    with pytest.raises(ParseError, match="re-save it") as err:
        parse(out.getvalue(), name)
    assert err.value.kind == "corrupt"
