"""A generic metadata title gives way to the file's own: every python-pptx/PowerPoint deck was titled "Presentation"
or "PowerPoint Presentation", a scan saved through Photoshop "Adobe Photoshop PDF". Real files made by their
libraries, each also with a real title, which is kept."""

from __future__ import annotations

from pathlib import Path

import pytest
from document_builders import epub_file
from office_builders import image_pdf, picture, picture_deck, picture_docx, picture_odf, picture_workbook

from rag_pipelines.parsers import parse
from rag_pipelines.parsers.titles import meta_title

PUBLIC = Path(__file__).parent / "fixtures" / "public"

GENERIC = ["Presentation", "PowerPoint Presentation", "PowerPoint-Präsentation", "Présentation PowerPoint",
           "Presentation1", "Document1", "Book1", "Sheet 2", "Untitled", "untitled-1", "Untitled 1", "Unbenannt 1",
           "Untitled document", "Untitled spreadsheet", "Adobe Photoshop PDF", "Microsoft Word - report.doc",
           "Microsoft PowerPoint - Q3 deck.ppt", "Microsoft Excel - Book1.xls", "i-xx_Phobias-fm.indd",
           "SEAJPH-April 13.indb", "R Graphics Output", "Scanned Document", "CamScanner 03-12-2024 10.15", "PDF",
           "  ", "", None]
REAL = ["Quarterly Report", "Chapter 3", "2024 Budget", "Microsoft Word tips for beginners", "The Presentation of Self",
        "Book of Kells", "Untitled Goose Game review"]


@pytest.mark.parametrize("value", GENERIC)
def test_a_generic_title_is_none(value):
    assert meta_title(value) is None


@pytest.mark.parametrize("value", REAL)
def test_a_real_title_is_kept(value):
    assert meta_title(value) == value


def pdf_titled(title: str) -> bytes:
    import pymupdf

    doc = pymupdf.open(stream=image_pdf([picture()]), filetype="pdf")
    doc.set_metadata({"title": title, "producer": "Adobe Photoshop for Macintosh -- Image Conversion Plug-in"})
    return doc.tobytes()


MAKERS = {
    "pptx": lambda title: picture_deck(1, title), "xlsx": picture_workbook, "docx": picture_docx,
    "odt": lambda title: picture_odf("odt", title), "odp": lambda title: picture_odf("odp", title),
    "ods": lambda title: picture_odf("ods", title), "pdf": pdf_titled,
    "epub": lambda title: epub_file([("a.xhtml", "<p>Text.</p>")], [("One", "a.xhtml")], title=title),
    "html": lambda title: f"<html><head><title>{title}</title></head><body><p>Text.</p></body></html>".encode(),
}
CASES = [("pptx", "PowerPoint Presentation"), ("xlsx", "Book1"), ("docx", "Microsoft Word - Document1"),
         ("odt", "Untitled 1"), ("odp", "Presentation"), ("ods", "Untitled spreadsheet"),
         ("pdf", "Adobe Photoshop PDF"), ("epub", "Untitled"), ("html", "Document")]


@pytest.mark.parametrize("suffix,generic", CASES)
def test_each_format_falls_back_to_the_file_name_and_keeps_a_real_title(suffix, generic):
    make = MAKERS[suffix]
    assert parse(make(generic), f"inbox/Lease renewal 2024.{suffix}").title == "Lease renewal 2024"
    assert parse(make("Tenancy agreement"), f"inbox/Lease renewal 2024.{suffix}").title == "Tenancy agreement"


@pytest.mark.parametrize("name", ["sld-notes.pptx", "tbl-cell.pptx"])
def test_public_decks_made_from_python_pptx_template_are_titled_by_their_names(name):
    assert parse((PUBLIC / name).read_bytes(), name).title == name.rsplit(".", 1)[0]  # their metadata: "Presentation"
