"""PDF, DOCX and EPUB parsers on awkward and hostile files: empty ones, chapters sharing a spine file (a real
Project Gutenberg book), path traversal, external entities, and the limits that bound their work."""

from __future__ import annotations

import socket
import threading
import zlib
from pathlib import Path

import pytest
from document_builders import docx_file, epub_file, paragraph, pdf_file, runs_docx, styles_xml

from rag_pipelines.parsers import Limits, ParseError, parse
from rag_pipelines.parsers.limits import MB

BOOKS = Path(__file__).parent / "fixtures" / "books"
CAROL = BOOKS / "christmas_carol_pg46.epub"  # Project Gutenberg #46, public domain (see fixtures/books/README.md)


def text_of(doc) -> str:
    return "\n".join(s.text for s in doc.sections)


def labels(doc) -> list[tuple[tuple[str, ...], str]]:
    return [(s.heading_path, s.text) for s in doc.sections]


# -- empty files ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["report.pdf", "letter.docx", "book.epub", "notes.txt", "page.html", "data.csv"])
def test_an_empty_file_is_reported_as_empty(name):
    with pytest.raises(ParseError) as err:
        parse(b"", f"inbox/{name}")
    assert err.value.kind == "empty"
    assert f"inbox/{name} is empty (0 bytes)" in str(err.value) and "restore it" in str(err.value)


@pytest.mark.parametrize("name", ["Idea.md", "Board.canvas"])
def test_an_empty_note_or_canvas_is_still_indexed(name):
    assert parse(b"", name).title == name.rsplit(".", 1)[0]


# -- EPUB: chapters by the table of contents -----------------------------------------------------------------

STAVES = [
    ("text/front.xhtml", "<p>Front matter.</p>"),
    ("text/staves1.xhtml", "<p>Tail of the preface.</p><h2 id='s1'>STAVE&#160; ONE.</h2><p>Marley was dead.</p>"
                           "<h2 id='s2'>STAVE TWO.</h2><h4 id='s2a'>THE FIRST OF THE THREE SPIRITS.</h4>"
                           "<p>When Scrooge awoke.</p>"),
    ("text/staves2.xhtml", "<p>He sank into a heavy sleep.</p><p><a id='s3'/></p><h2>STAVE THREE.</h2>"
                           "<p>Awaking in the middle of a snore.</p>"),
    ("text/end.xhtml", "<h2>Stave Four</h2><p>The Phantom approached.</p>"),
]
STAVES_TOC = [("Preface", "text/front.xhtml"), ("STAVE\n   ONE.", "text/staves1.xhtml#s1"),
              ("STAVE\n   TWO.", "text/staves1.xhtml#s2",
               [("THE FIRST OF THE THREE SPIRITS.", "text/staves1.xhtml#s2a")]),
              ("STAVE THREE.", "text/staves2.xhtml#s3"), ("STAVE FOUR.", "text/end.xhtml")]


@pytest.mark.parametrize("nav", [False, True], ids=["epub2-ncx", "epub3-nav"])
def test_chapters_sharing_a_spine_file_are_labelled_by_the_toc_entry_that_covers_them(nav):
    doc = parse(epub_file(STAVES, STAVES_TOC, nav=nav), "carol.epub")
    assert labels(doc) == [
        (("Preface",), "Front matter."),
        (("Preface",), "Tail of the preface."),  # before the file's first anchor: the label in effect
        (("STAVE ONE.",), "Marley was dead."),  # whitespace in labels (and the heading's no-break space) collapsed
        (("STAVE TWO.", "THE FIRST OF THE THREE SPIRITS."), "When Scrooge awoke."),
        (("STAVE TWO.", "THE FIRST OF THE THREE SPIRITS."), "He sank into a heavy sleep."),
        (("STAVE THREE.",), "Awaking in the middle of a snore."),  # the anchor is an empty <a> before the heading
        (("STAVE FOUR.", "Stave Four"), "The Phantom approached."),
    ]


def test_a_real_gutenberg_book_cites_the_right_stave():
    """A Christmas Carol as Project Gutenberg builds it: staves two and three share a spine file; stave one's
    file starts with Gutenberg's header. Each passage must name the stave it belongs to."""
    doc = parse(CAROL.read_bytes(), "carol.epub")
    assert doc.title == "A Christmas Carol in Prose; Being a Ghost Story of Christmas"
    assert doc.author == "Charles Dickens"
    where = {phrase: next(s.heading_path for s in doc.sections if phrase in " ".join(s.text.split()))
             for phrase in ("Marley was dead: to begin with", "Whether these creatures faded into mist",
                            "When Scrooge awoke, it was so dark", "old Fezziwig would have been a match",
                            "Awaking in the middle of a prodigiously tough snore", "Scrooge was better than his word",
                            "This eBook is for the use of anyone anywhere")}
    assert where == {
        "Marley was dead: to begin with": ("STAVE ONE.", "MARLEY’S GHOST."),
        "Whether these creatures faded into mist": ("STAVE ONE.", "Marley’s Ghost"),  # stave one, in the next file
        "When Scrooge awoke, it was so dark": ("STAVE TWO.", "THE FIRST OF THE THREE SPIRITS."),
        "old Fezziwig would have been a match": ("STAVE TWO.", "Mr. Fezziwig’s Ball"),
        "Awaking in the middle of a prodigiously tough snore": ("STAVE THREE.", "THE SECOND OF THE THREE SPIRITS."),
        "Scrooge was better than his word": ("STAVE FIVE.", "THE END OF IT."),  # a spine file with no entry
        "This eBook is for the use of anyone anywhere": ("THE FULL PROJECT GUTENBERG LICENSE",),
    }
    assert not any("several editions" in h for s in doc.sections[3:] for h in s.heading_path)


def test_a_book_without_a_table_of_contents_is_labelled_by_its_files_titles():
    doc = parse(epub_file([("a.xhtml", "<p>First.</p>"), ("b.xhtml", "<h1>b.xhtml</h1><p>Second.</p>")], []), "b.epub")
    assert labels(doc) == [(("a.xhtml",), "First."), (("b.xhtml",), "Second.")]


# -- EPUB: members that leave the archive or are missing -----------------------------------------------------


@pytest.mark.parametrize("opf_dir", ["", "OEBPS"])
def test_a_path_traversal_member_is_skipped_and_the_legit_chapters_indexed(opf_dir, tmp_path, monkeypatch):
    (tmp_path / "evil.xhtml").write_text("<p>OUTSIDE THE ARCHIVE</p>")  # what ../evil.xhtml names from work/
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    book = epub_file([("one.xhtml", "<p>The first chapter.</p>"), ("two.xhtml", "<p>The second chapter.</p>")],
                     [("One", "one.xhtml"), ("Two", "two.xhtml")], opf_dir=opf_dir,
                     extra_manifest=("../../evil.xhtml", "gone.xhtml"),
                     extra_members={"../../evil.xhtml": "<p>EVIL MEMBER</p>", "../evil.xhtml": "<p>EVIL MEMBER</p>"})
    doc = parse(book, "traversal.epub")
    assert labels(doc) == [(("One",), "The first chapter."), (("Two",), "The second chapter.")]
    assert "EVIL" not in text_of(doc) and "OUTSIDE" not in text_of(doc)
    warning = doc.metadata["parse_warning"]
    assert "skipped 1 chapter file(s) whose path leaves the archive (never read): ../../evil.xhtml" in warning
    assert "skipped 1 chapter file(s) listed but missing from the archive: gone.xhtml" in warning


def test_an_epub_over_the_text_limit_keeps_its_first_chapters_and_says_so():
    chapters = [(f"c{i}.xhtml", f"<p>{'word ' * 2000}</p>") for i in range(10)]
    doc = parse(epub_file(chapters, []), "long.epub", limits=Limits(max_text_mb=0.03))
    assert 3 <= len(doc.sections) < 10 and "limits.max_text_mb" in doc.metadata["parse_warning"]


# -- DOCX ----------------------------------------------------------------------------------------------------


class _Listener:
    """A TCP server on 127.0.0.1 that counts the connections made to it."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.connections, self.done = 0, threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while not self.done.is_set():
            try:
                self.sock.accept()[0].close()
                self.connections += 1
            except OSError:
                pass

    def close(self):
        self.done.set()
        self.thread.join()
        self.sock.close()


def test_an_external_entity_in_a_run_is_never_resolved_nor_fetched_and_the_text_after_it_stays(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET CONTENT")
    listener = _Listener()
    try:
        port = listener.sock.getsockname()[1]
        doctype = (f'<!DOCTYPE w:document [<!ENTITY file SYSTEM "{secret.as_uri()}"><!ENTITY web SYSTEM '
                   f'"http://127.0.0.1:{port}/x"><!ENTITY passwd SYSTEM "file:///etc/passwd">]>')
        run = "<w:p><w:r><w:t>Before &file; middle &web; then &passwd; and after it, in the same run.</w:t></w:r></w:p>"
        doc = parse(docx_file(run + paragraph("The next paragraph."), doctype=doctype), "entity.docx")
    finally:
        listener.close()
    assert " ".join(text_of(doc).split()) == "Before middle then and after it, in the same run. The next paragraph."
    assert "SECRET" not in text_of(doc) and "root:" not in text_of(doc) and listener.connections == 0


def test_docx_text_is_what_word_shows():
    """Inserted text, hyperlinks, tabs and breaks are kept; deleted text, field codes and the fallback copy of a
    text box are not; tables give a line per row; a heading style is found by its name in styles.xml."""
    body = (
        paragraph("Report", "Title")
        + '<w:p><w:ins><w:r><w:t>Inserted</w:t></w:r></w:ins><w:del><w:r><w:delText>Deleted</w:delText></w:r></w:del>'
          '<w:r><w:tab/><w:t>tabbed</w:t><w:br/><w:t>broken</w:t></w:r>'
          '<w:hyperlink><w:r><w:t xml:space="preserve"> linked</w:t></w:r></w:hyperlink>'
          '<w:r><w:instrText> PAGE </w:instrText></w:r><w:r><w:t>.</w:t></w:r></w:p>'
        + '<w:p><w:r><mc:AlternateContent xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006">'
          '<mc:Choice><w:txbxContent><w:p><w:r><w:t>Boxed text</w:t></w:r></w:p></w:txbxContent></mc:Choice>'
          '<mc:Fallback><w:txbxContent><w:p><w:r><w:t>Boxed text</w:t></w:r></w:p></w:txbxContent></mc:Fallback>'
          '</mc:AlternateContent></w:r></w:p>'
        + paragraph("Costs", "Heading2")
        + "<w:tbl><w:tr><w:tc>" + paragraph("item") + "</w:tc><w:tc>" + paragraph("cost") + "</w:tc></w:tr>"
          "<w:tr><w:tc>" + paragraph("tea") + "</w:tc><w:tc>" + paragraph("3") + paragraph("(per day)")
        + "</w:tc></w:tr></w:tbl>")
    doc = parse(docx_file(body, styles_xml(2)), "report.docx")
    assert doc.title == "Report" and doc.author is None
    assert labels(doc) == [(("Report",), "Inserted\ttabbed\nbroken linked.\nBoxed text"),
                           (("Report", "Costs"), "item | cost\ntea | 3\n(per day)")]


def test_docx_core_properties_and_no_invented_title():
    core = ('<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" '
            'xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:dcterms="http://purl.org/dc/terms/"><dc:title>Budget '
            '2024</dc:title><dc:creator>Ann Lee</dc:creator><dcterms:modified>2024-03-05T10:00:00Z</dcterms:modified>'
            '</cp:coreProperties>')
    doc = parse(docx_file(paragraph("Numbers."), core=core), "b.docx")
    assert (doc.title, doc.author, doc.ts) == ("Budget 2024", "Ann Lee", 1709632800)
    assert parse(docx_file(paragraph("Numbers.")), "notes/plain.docx").title == "plain"  # not "Word Document"


def test_a_docx_of_many_paragraphs_keeps_its_headings_and_stops_at_the_text_limit():
    data = runs_docx(3000, styles_xml(150))  # Word's ~150 styles made python-docx look each paragraph's style up
    doc = parse(data, "runs.docx")
    assert [s.heading_path for s in doc.sections] == [("Part 1",), ("Part 2",), ("Part 3",)]
    assert doc.sections[2].text.splitlines()[-1] == "word2999" and "parse_warning" not in doc.metadata
    cut = parse(data, "runs.docx", limits=Limits(max_text_mb=0.01))
    size = sum(len(s.text) for s in cut.sections)
    assert 0.009 * MB < size < 0.011 * MB and "limits.max_text_mb" in cut.metadata["parse_warning"]


# -- PDF -----------------------------------------------------------------------------------------------------


def line(size: int) -> bytes:
    return (b"lorem ipsum dolor sit amet " * (size // 27 + 1))[:size]


def test_a_pdf_page_of_one_huge_line_is_measured_and_skipped_before_mupdf_reads_it():
    data = pdf_file([[b"The first page holds ordinary text."], [line(300_000)], [b"The third page too."]],
                    font_size=300 / 300_000)  # all of the line on the page
    doc = parse(data, "line.pdf", limits=Limits(max_text_mb=0.5))  # a page may have 256 KB of drawing instructions
    assert [(s.page, s.text) for s in doc.sections] == [(1, "The first page holds ordinary text."),
                                                        (3, "The third page too.")]
    warning = doc.metadata["parse_warning"]
    assert "page(s) 2 not read" in warning and "limits.max_text_mb" in warning
    assert len(text_of(parse(data, "line.pdf"))) > 300_000  # under the default limits the page is read


def test_a_pdf_whose_only_text_page_is_too_big_is_too_large_not_a_scan():
    with pytest.raises(ParseError, match="limits.max_text_mb") as err:
        parse(pdf_file([[line(300_000)]]), "one.pdf", limits=Limits(max_text_mb=0.5))
    assert err.value.kind == "too_large"


def test_pdf_pages_are_read_until_their_instructions_or_text_reach_the_budget():
    pages = [[line(47_000)] for _ in range(10)]  # ~47 KB of instructions each; the budget is 4 x 100 KB
    doc = parse(pdf_file(pages), "many.pdf", limits=Limits(max_text_mb=0.1))
    assert len(doc.sections) == 8 and "pages 9-10 not read" in doc.metadata["parse_warning"]
    wordy = pdf_file([[b"%02d: a line of visible words" % i for i in range(20)] for _ in range(6)])
    doc = parse(wordy, "wordy.pdf", limits=Limits(max_text_mb=0.002))  # 559 characters of text a page
    assert len(doc.sections) == 4 and "pages 5-6 not read" in doc.metadata["parse_warning"]  # 4 x 559 > 2 KB


def test_measuring_a_page_never_inflates_a_flate_bomb_whole():
    import pymupdf

    from rag_pipelines.parsers.pdf import instructions_size

    doc = pymupdf.open(stream=pdf_file([[b"x"]]), filetype="pdf")
    page = doc[0]
    bomb = zlib.compress(b" " * (64 * MB), 9)  # 64 KB that inflates to 64 MB
    doc.update_stream(page.get_contents()[0], bomb, compress=False)
    doc.xref_set_key(page.get_contents()[0], "Filter", "/FlateDecode")
    assert MB < instructions_size(doc, page, MB) <= 3 * MB
