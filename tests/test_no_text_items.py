"""Files with no text (a deck or a workbook of pictures, a scan with OCR off, an empty sheet) are items with no text:
indexed by their names, not failed. Each counted as a failed item (exit status 6) and was read again every run."""

from __future__ import annotations

import json

import pytest
from pipeline_env import point_at_home
from click.testing import CliRunner
from document_builders import epub_file
from office_builders import image_pdf, picture, picture_deck, picture_docx, picture_odf, picture_workbook

from rag_pipelines.parsers import ParseError, parse
from rag_pipelines.wiring import resources
from rag_search.cli.main import cli

FILES = {  # name → (bytes, what its parse_warning says)
    "Board photos.pptx": (lambda: picture_deck(2), "no text on its 2 slide(s) (pictures only?)"),
    "Floor plan.xlsx": (picture_workbook, "no cells with values in its 1 sheet(s)"),
    "Signed page.docx": (picture_docx, "it holds no text (pictures only?)"),
    "Holiday slides.odp": (lambda: picture_odf("odp"), "it holds no text (pictures only?)"),
    "Blank budget.ods": (lambda: picture_odf("ods"), "it holds no text (pictures only?)"),
    "Sketch letter.odt": (lambda: picture_odf("odt"), "it holds no text (pictures only?)"),
    "Scanned receipt.pdf": (lambda: image_pdf([picture()]), "no extractable text (a scanned PDF?) and OCR is off"),
    "Comic book.epub": (lambda: epub_file([("p1.xhtml", "<p><img src='p1.png'/></p>")], [("Page 1", "p1.xhtml")],
                                            title="Comic book"),
                        "the book has no text chapters (pictures only?)"),
}


@pytest.mark.parametrize("name", sorted(FILES))
def test_a_file_with_no_text_is_an_item_with_no_text(name):
    make, why = FILES[name]
    doc = parse(make(), name)
    assert doc.sections == () and doc.title == name.rsplit(".", 1)[0]
    assert doc.metadata["parse_warning"].startswith(why), doc.metadata
    assert "only its name is indexed" in doc.metadata["parse_warning"]


def test_a_scan_ocr_cannot_read_still_fails_and_is_retried():
    """OCR that could not run (no engine here) is not "no text": the item fails, so a later run reads it."""
    from rag_pipelines.parsers.ocr import OcrSettings

    with pytest.raises(ParseError) as err:
        parse(image_pdf([picture()]), "scan.pdf", ocr=OcrSettings(engine="tesseract", languages=("xx-none",)))
    assert err.value.kind == "no_text" and "OCR could not read it" in str(err.value)


def test_a_deck_whose_slides_cannot_be_read_is_still_a_failure():
    """Damage is not "no text": the item fails, so that a repaired file is read."""
    import io
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(picture_deck(2))) as deck, zipfile.ZipFile(out, "w") as damaged:
        for member in deck.infolist():
            if member.filename != "ppt/slides/slide2.xml":
                damaged.writestr(member, deck.read(member))
    with pytest.raises(ParseError) as err:
        parse(out.getvalue(), "Board photos.pptx")
    assert err.value.kind == "corrupt" and "slide(s) 2 could not be read" in str(err.value)


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    point_at_home(home, monkeypatch)
    yield home
    resources.close_all()


def run(*args, code=0):
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result.stdout


def test_no_text_items_are_indexed_found_by_name_and_not_read_again(home, tmp_path):
    folder = tmp_path / "Shared"
    folder.mkdir()
    for name, (make, _) in FILES.items():
        (folder / name).write_bytes(make())
    (folder / "Agenda.md").write_text("# Agenda\n\nThe board meets on Thursday about the floor plan.\n")
    out = run("index", "project", "shared", str(folder))  # exit 0: nothing failed (it was 6)
    assert f"{len(FILES) + 1} indexed, 0 unchanged, 0 failed" in out, out
    hits = json.loads(run("search", "board photos", "--json", "--collection", "shared"))["hits"]
    assert hits[0]["uri"].endswith("Board photos.pptx"), hits
    again = run("index", "all")
    assert f"0 indexed, {len(FILES) + 1} unchanged, 0 failed" in again, again  # none is read again
