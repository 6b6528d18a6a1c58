"""OCR for real: text rendered by Pillow (turned, noisy JPEG, in a HEIC photo, on image-only PDF pages), a public scan
(OCRmyPDF's c02-22.pdf, public domain), read by the RapidOCR models bundled in its wheel, with the network
refused in the worker (a sitecustomize that fails every connect and writes down the attempt). Few, small images:
the worker starts once for the module. Then through the pipeline: a note embedding a scan is found by the scan's
words, and a forced re-index reads no image again (the OCR cache)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from pipeline_env import point_at_home
import yaml
from office_builders import deck, image_pdf, text_image, workbook

from rag_pipelines.parsers import Limits, OcrSettings, ParseError, parse
from rag_pipelines.parsers.ocr import OcrRun, choose
from rag_pipelines.parsers.ocr.engines import ENGINES, OcrFailed, tsv_lines

PUBLIC = Path(__file__).parent / "fixtures" / "public"
RECEIPT = ["Invoice 2024-117 total 1234.50 EUR", "Paid by card at Cafe Luna"]
TURNED = ["The quick brown fox jumps over the lazy dog again", "Invoice 2024-117 total 1234.50 EUR paid by card",
          "Meeting room B at 3 pm with the design team"]
GUARD = '''import os, socket
def _refuse(*args, **kwargs):
    with open(os.environ["OCR_NETWORK_LOG"], "a") as log:
        log.write(repr(args) + "\\n")
    raise OSError("no network in this test")
socket.socket.connect = socket.socket.connect_ex = socket.create_connection = socket.getaddrinfo = _refuse
'''


@pytest.fixture(scope="module")
def offline(tmp_path_factory):
    """Settings for RapidOCR whose worker runs with every network connection refused (and logged), and with an
    empty home and cache folder (no models from an earlier download): afterwards both are still empty."""
    folder = tmp_path_factory.mktemp("offline")
    (folder / "sitecustomize.py").write_text(GUARD)
    log, home = folder / "network.log", folder / "empty-home"
    (home / ".cache").mkdir(parents=True)
    ENGINES["rapidocr"].stop()
    with pytest.MonkeyPatch.context() as mp:
        for name, value in {"PYTHONPATH": folder, "OCR_NETWORK_LOG": log, "HOME": home,
                            "XDG_CACHE_HOME": home / ".cache"}.items():
            mp.setenv(name, str(value))
        yield OcrSettings(engine="rapidocr", cache_path=folder / "ocr.sqlite"), log
        ENGINES["rapidocr"].stop()
    assert not log.exists(), f"the OCR worker tried the network: {log.read_text()}"
    assert [p.name for p in home.rglob("*")] == [".cache"], "the OCR worker wrote into the home folder"


def words(doc) -> str:
    return " ".join(" ".join(s.text for s in doc.sections).split())


def test_an_image_is_read_offline_and_marked_as_ocr(offline):
    settings, log = offline
    doc = parse(text_image(RECEIPT), "scans/receipt.png", None, Limits(), settings)
    assert "Invoice 2024-117 total 1234.50 EUR" in words(doc) and "Cafe Luna" in words(doc)
    assert doc.title == "receipt" and doc.metadata["text_source"] == "ocr" and doc.metadata["ocr_confidence"] > 0.9
    assert doc.metadata["ocr_engine"].startswith("rapidocr 3.10.0 PP-OCRv6")
    assert ENGINES["rapidocr"].proc is not None and not log.exists()  # the guarded worker did it, offline


def test_an_image_is_read_once_then_comes_from_the_cache(offline, monkeypatch):
    settings, _ = offline
    from PIL import Image

    image = Image.open(io.BytesIO(text_image(RECEIPT)))
    first = OcrRun(settings).read(image, "same-bytes", "a.png")

    def no_second_read(*args, **kwargs):
        raise AssertionError("the engine was asked again")

    monkeypatch.setattr(ENGINES["rapidocr"], "read", no_second_read)
    again = OcrRun(settings).read(image, "same-bytes", "a.png")
    assert again.cached and not first.cached and again.text == first.text


def test_a_turned_photo_is_read_the_right_way_up_and_heic_is_read(offline):
    settings, _ = offline
    from PIL import Image

    import pillow_heif

    turned = Image.open(io.BytesIO(text_image(TURNED, turn=270)))
    heic = io.BytesIO()
    pillow_heif.from_pillow(turned).save(heic, quality=90)
    doc = parse(heic.getvalue(), "IMG_0042.HEIC", None, Limits(), settings)
    assert doc.sections[0].text == "\n".join(TURNED)  # the lines in their order


def test_an_image_only_pdf_is_read_page_by_page_within_its_budget(offline, tmp_path):
    settings, _ = offline
    pdf = image_pdf([text_image(RECEIPT), text_image(["Second page of the scan"], noise=30, jpeg=True)],
                    text_pages={0: "A cover page with a text layer"})
    doc = parse(pdf, "scan.pdf", None, Limits(), settings)
    assert [(s.page, " ".join(s.text.split())) for s in doc.sections] == [
        (1, "A cover page with a text layer"), (2, " ".join(RECEIPT)), (3, "Second page of the scan")]
    assert doc.metadata["text_source"] == "text+ocr" and doc.metadata["ocr_pages"] == [2, 3]
    fresh = OcrSettings(engine="rapidocr", cache_path=tmp_path / "fresh.sqlite")
    one = parse(pdf, "scan.pdf", None, Limits(max_ocr_pages=1), fresh)
    assert [s.page for s in one.sections] == [1, 2]
    assert "not read by OCR: page 3: 1 images were read for this item (limits.max_ocr_pages)" in \
        one.metadata["parse_warning"]


def test_ocr_that_takes_too_long_is_stopped_and_named(offline, tmp_path):
    fresh = OcrSettings(engine="rapidocr", cache_path=tmp_path / "fresh.sqlite")
    doc = parse(text_image(["Too slow"]), "slow.png", None, Limits(max_ocr_seconds=0.001), fresh)
    assert doc.sections == () and doc.title == "slow"  # still indexed, by its name
    assert "limits.max_ocr_seconds" in doc.metadata["parse_warning"]


def test_a_public_scanned_pdf_is_read(offline):
    """ocrmypdf/OCRmyPDF tests/resources/c02-22.pdf (public domain): Huckleberry Finn, page 22, a scan with no text
    layer."""
    settings, _ = offline
    doc = parse((PUBLIC / "c02-22.pdf").read_bytes(), "c02-22.pdf", None, Limits(), settings)
    text = words(doc).lower()
    assert doc.metadata["text_source"] == "ocr" and doc.metadata["ocr_pages"] == [1]
    assert all(w in text for w in ("tip-toeing", "widow", "garden", "stooping")), text[:300]


def test_pixel_bombs_are_not_decoded_and_jpegs_are_decoded_reduced():
    from PIL import Image

    png, jpeg = io.BytesIO(), io.BytesIO()
    Image.new("1", (20_000, 20_000)).save(png, format="PNG")  # 400 megapixels in a few KB
    with pytest.raises(ParseError, match="pixels") as err:
        parse(png.getvalue(), "bomb.png", None, Limits(), None)
    assert err.value.kind == "too_large"
    Image.new("L", (1200, 1000), 255).save(jpeg, format="JPEG")
    doc = parse(jpeg.getvalue(), "photo.jpg", None, Limits(max_image_mpixels=0.5), None)
    assert doc.metadata["image_size"] == "1200x1000" and "OCR is off" in doc.metadata["parse_warning"]
    with pytest.raises(ParseError, match="max_image_mpixels"):
        parse(text_image(["x"] * 40), "big.png", None, Limits(max_image_mpixels=0.01), None)


def test_a_broken_image_is_a_corrupt_item():
    with pytest.raises(ParseError, match="not an image") as err:
        parse(b"\x89PNG\r\n\x1a\n" + bytes(40), "diagram.png", None, Limits(), None)
    assert err.value.kind == "corrupt"


def test_the_models_come_in_the_rapidocr_wheel():
    """The files the worker loads are in the installed wheel's RECORD: pip put them there, nothing fetched them."""
    from importlib.metadata import files

    from rag_pipelines.parsers.ocr.worker import MODELS, model_dir

    shipped = {Path(str(f)).name for f in files("rapidocr") if str(f).startswith("rapidocr/models/")}
    assert set(MODELS.values()) <= shipped and all((model_dir() / name).is_file() for name in MODELS.values())


def test_status_and_doctor_say_which_engine_reads_and_what_is_missing(offline, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from rag_search.cli.main import cli

    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"collections": {
        "notes": {"sources": [{"type": "obsidian", "paths": [str(tmp_path)], "ocr": {"languages": ["en", "ru"]}}]},
        "code": {"sources": [{"type": "project", "paths": [str(tmp_path)], "ocr": False}]}}}))
    monkeypatch.setenv("PATH", str(tmp_path))  # no tesseract on it
    env = {"LOCAL_RAG_HOME": str(tmp_path)}
    out = CliRunner().invoke(cli, ["status"], env=env, catch_exceptions=False).output
    assert "ocr engines: rapidocr 3.10.0 with its bundled PP-OCRv6 small (det, rec) models; tesseract is not " \
           "installed (optional: apt-get install tesseract-ocr, or brew install tesseract)" in out
    assert "notes/obsidian: rapidocr (en, ru); rapidocr cannot read ru: install tesseract" in out
    assert "code/project: off" in out
    doctor = CliRunner().invoke(cli, ["doctor"], env=env, catch_exceptions=False).output
    assert "ok   ocr: rapidocr 3.10.0 PP-OCRv6 small (det, rec) max2000 reads a test image offline" in doctor


def test_the_engine_for_each_language_set():
    engine, note = choose(OcrSettings(languages=("en", "de", "zh")))
    assert engine is not None and note == ""  # one of them reads all three
    engine, note = choose(OcrSettings(engine="rapidocr", languages=("en", "ru")))
    assert engine.name == "rapidocr" and "rapidocr cannot read ru" in note and "tesseract" in note
    engine, note = choose(OcrSettings(engine="nope"))
    assert engine is None and "unknown OCR engine" in note


def test_tesseract_tsv_becomes_lines():
    tsv = ("level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext\n"
           "5\t1\t1\t1\t1\t1\t10\t10\t50\t20\t96.5\tHello\n5\t1\t1\t1\t1\t2\t70\t12\t60\t20\t90.5\tworld\n"
           "4\t1\t1\t1\t2\t0\t10\t40\t90\t20\t-1\t\n5\t1\t1\t1\t2\t1\t10\t40\t90\t20\t80\tAgain\n")
    lines = tsv_lines(tsv)
    assert [(ln.text, round(ln.confidence, 3), ln.box) for ln in lines] == [
        ("Hello world", 0.935, (10.0, 10.0, 130.0, 32.0)), ("Again", 0.8, (10.0, 40.0, 100.0, 60.0))]


@pytest.mark.skipif(ENGINES["tesseract"].missing() is not None, reason="tesseract is not installed")
def test_tesseract_reads_an_image_when_installed(tmp_path):
    settings = OcrSettings(engine="tesseract", cache_path=tmp_path / "ocr.sqlite")
    doc = parse(text_image(RECEIPT), "receipt.png", None, Limits(), settings)
    assert "Cafe Luna" in words(doc) and doc.metadata["ocr_engine"].startswith("tesseract")


def test_a_failing_engine_leaves_the_image_indexed_by_name(offline, monkeypatch, tmp_path):
    def broken(*args, **kwargs):
        raise OcrFailed("the models could not be loaded")

    monkeypatch.setattr(ENGINES["rapidocr"], "read", broken)
    settings = OcrSettings(engine="rapidocr", cache_path=tmp_path / "fresh.sqlite")
    doc = parse(text_image(["x"]), "a.png", None, Limits(), settings)
    assert doc.sections == () and "the OCR engine failed (the models could not be loaded)" in \
        doc.metadata["parse_warning"]


# -- through the pipeline -----------------------------------------------------------------------------------


def test_a_vault_finds_a_note_by_its_embedded_scan_and_reindexes_without_ocr(offline, tmp_path, monkeypatch):
    from rag_pipelines.config import load_collections
    from rag_pipelines.indexing import runs
    from rag_pipelines.indexing.items import index_keys
    from rag_pipelines.wiring import resources
    from rag_search.config import Paths
    from rag_search.retrieval import SearchEngine, SearchRequest

    vault, home = tmp_path / "vault", tmp_path / "home"
    (vault / "attachments").mkdir(parents=True)
    (vault / "attachments" / "letter.png").write_bytes(text_image(["Tax office refund approved", "Reference 88-231"]))
    (vault / "Taxes 2024.md").write_text("# Taxes 2024\n\nThe letter came in May.\n\n![[letter.png]]\n")
    (vault / "budget.xlsx").write_bytes(workbook({"Costs": [["Item", "Amount"], ["Ferry tickets", 96]]}))
    (vault / "talk.pptx").write_bytes(deck([("Harbour plans", ["Dredging starts in autumn"], "Say thanks", None)]))
    (vault / "old.doc").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600))
    home.mkdir()
    (home / "config.yaml").write_text(yaml.safe_dump({"collections": {"notes": {"sources": [
        {"type": "obsidian", "paths": [str(vault)], "ocr": {"engine": "rapidocr"}}]}}}))
    point_at_home(home, monkeypatch)
    try:
        [summary] = runs.index_collections(Paths.from_env(), ["notes"])
        assert summary.outcomes == {"indexed": 4, "failed": 1}
        assert [(f["key"], f["error_kind"]) for f in summary.failures] == [("old.doc", "unsupported")]
        engine = SearchEngine(resources.RagResource().store(), resources.RagResource().embedder())
        hits = engine.search(SearchRequest("tax office refund approved")).hits
        by_key = {h.key: h for h in hits}
        assert {h.key for h in hits[:2]} == {"Taxes 2024.md", "attachments/letter.png"}  # the note and the scan
        note = by_key["Taxes 2024.md"].text  # one chunk: the note's text, then the scan's under its name
        assert "The letter came in May." in note and "# image: letter.png\n\nTax office refund approved" in note
        assert "attachments/letter.png" in by_key and by_key["attachments/letter.png"].metadata["text_source"] == "ocr"
        slide = engine.search(SearchRequest("dredging autumn")).hits[0]
        assert (slide.key, slide.heading_path, slide.page) == ("talk.pptx", ("Slide 1: Harbour plans",), 1)
        row = engine.search(SearchRequest("ferry tickets")).hits[0]
        assert (row.key, row.heading_path) == ("budget.xlsx", ("Costs", "row 2"))

        def no_ocr(*args, **kwargs):
            raise AssertionError("an image was read again")

        monkeypatch.setattr(ENGINES["rapidocr"], "read", no_ocr)
        keys = ["Taxes 2024.md", "attachments/letter.png"]
        stats = index_keys(resources.RagResource().store(), resources.RagResource().embedder(),
                           load_collections(Paths.from_env())["notes"], keys, force=True)
        assert stats.indexed == 2 and stats.failed == 0
        assert (home / "cache" / "ocr.sqlite").is_file()
    finally:
        resources.close_all()


def test_turning_ocr_on_reads_the_scans_already_indexed_without_it(offline, tmp_path, monkeypatch):
    """A PDF indexed without OCR (OCR off, or by a version before it) is read again once OCR is on."""
    from rag_pipelines.indexing import runs
    from rag_pipelines.wiring import resources
    from rag_search.config import Paths
    from rag_search.retrieval import SearchEngine, SearchRequest

    folder, home = tmp_path / "papers", tmp_path / "home"
    folder.mkdir()
    home.mkdir()
    (folder / "letter.pdf").write_bytes(image_pdf([text_image(["Parking permit renewed until June"])],
                                                  text_pages={0: "Cover page of the city letter"}))
    point_at_home(home, monkeypatch)

    def index(ocr) -> list[str]:
        (home / "config.yaml").write_text(yaml.safe_dump({"collections": {"papers": {"sources": [
            {"type": "project", "paths": [str(folder)], "ocr": ocr}]}}}))
        [summary] = runs.index_collections(Paths.from_env(), ["papers"])
        assert summary.outcomes.get("failed", 0) == 0
        engine = SearchEngine(resources.RagResource().store(), resources.RagResource().embedder())
        return [h.text for h in engine.search(SearchRequest("parking permit renewed")).hits]

    try:
        assert not any("Parking permit" in text for text in index(False))
        assert any("Parking permit renewed until June" in text for text in index({"engine": "rapidocr"}))
    finally:
        resources.close_all()
