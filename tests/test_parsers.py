"""Parsers on real files: an Obsidian fixture vault, and PDF/DOCX/EPUB/HTML files made by their libraries."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_pipelines import parsers
from rag_pipelines.parsers import ParseError, parse

VAULT = Path(__file__).parent / "fixtures" / "vault"


def note(rel: str):
    return parse((VAULT / rel).read_bytes(), rel, 1_700_000_000 * 10**9)


def all_text(doc) -> str:
    return "\n".join(s.text for s in doc.sections)


def test_obsidian_note_properties_links_tags_fields():
    doc = note("Projects/Work/Kube Upgrade.md")
    assert doc.title == "Kube Upgrade"
    assert set(doc.tags) == {"ops", "infra/k8s", "risk/high", "y1984"}
    assert doc.links == ("Runbook", "Incidents", "Deploy Notes")
    assert doc.ts == 1710201600  # frontmatter date 2024-03-12
    meta = doc.metadata
    assert meta["status"] == "in-progress" and meta["owner"] == "Ann"
    assert meta["aliases"] == ["Cluster upgrade", "K8s 1.29"]
    assert meta["embeds"] == ["diagram.png", "Runbook"]  # "|300" is a size, not part of the target
    assert (meta["priority"], meta["due"], meta["reviewer"]) == ("high", "2024-04-01", "Bob")
    text = all_text(doc)
    assert "the runbook (Runbook)" in text and "Incidents > March" in text and "Runbook > step-3" in text
    assert "Also known as: Cluster upgrade, K8s 1.29" in text  # aliases are searchable
    assert "TABLE status" not in text  # dataview query skipped
    assert "private comment" not in text  # %%comment%%
    assert "Warning: Rollback plan" in text and "Nested callout text." in text
    assert "kubectl drain node-7 #not-a-tag" in text  # code kept whole, its '#' is no tag
    assert "| drain | Mon |" in text


def test_sections_follow_headings_not_code_comments():
    doc = note("Projects/Work/Kube Upgrade.md")
    paths = [s.heading_path for s in doc.sections]
    assert ("Kube Upgrade", "Risks") in paths and ("Kube Upgrade", "Risks", "Timeline") in paths
    assert not any("not a heading" in p for path in paths for p in path)


@pytest.mark.parametrize(
    "rel,title,tags",
    [
        ("Archive/bom crlf.md", "BOM note", ("crlf",)),
        ("Archive/json frontmatter.md", "json frontmatter", ("json",)),
        ("Ünïcode folder/Café, [draft] 100% done.md", "Café, [draft] 100% done", ("legacy-tag",)),
        ("Projects/Runbook.md", "Runbook", ("ops", "runbook")),
    ],
)
def test_frontmatter_variants(rel, title, tags):
    doc = note(rel)
    assert (doc.title, doc.tags) == (title, tags)


def test_invalid_yaml_frontmatter_is_kept_as_text_not_a_crash():
    doc = note("Archive/bad yaml.md")
    assert "Body still indexed." in all_text(doc) and "tags: [unclosed" in all_text(doc)
    assert "invalid frontmatter YAML" in doc.metadata["parse_warning"]


def test_daily_note_date_from_filename_and_comma_tags():
    doc = note("Daily/2024-03-15.md")
    assert doc.ts == 1710460800 and doc.tags == ("garden",)
    assert note("Projects/Runbook.md").metadata["aliases"] == ["Ops Runbook"]


def test_non_utf8_markdown_is_decoded():
    doc = parse("Café crème".encode("cp1252"), "legacy.md")
    assert "Café crème" in all_text(doc)


def test_canvas_text_nodes():
    doc = parse((VAULT / "Board.canvas").read_bytes(), "Board.canvas")
    assert all_text(doc) == "Canvas text"


def make_pdf(path: Path, pages: list[str]) -> Path:
    import pymupdf

    doc = pymupdf.open()
    for text in pages:
        page = doc.new_page()
        if text:
            page.insert_text((72, 72), text)
    doc.set_metadata({"title": "Quarterly Report", "author": "Finance Team"})
    doc.save(path)
    return path


def test_pdf_pages_are_kept(tmp_path):
    pdf = make_pdf(tmp_path / "r.pdf", ["Revenue grew in March.", "", "Costs fell in April."])
    doc = parse(pdf.read_bytes(), "r.pdf")
    assert doc.title == "Quarterly Report" and doc.author == "Finance Team"
    assert [(s.page, s.text) for s in doc.sections] == [(1, "Revenue grew in March."), (3, "Costs fell in April.")]


def test_scanned_pdf_without_text_is_an_item_with_no_text_that_says_so(tmp_path):
    pdf = make_pdf(tmp_path / "scan.pdf", ["", ""])
    doc = parse(pdf.read_bytes(), "scan.pdf")  # OCR off: indexed by its names, not a failure retried every run
    assert doc.sections == () and doc.title == "Quarterly Report"
    assert doc.metadata["parse_warning"].startswith("no extractable text (a scanned PDF?) and OCR is off")


def test_corrupt_pdf_is_a_parse_error():
    with pytest.raises(ParseError) as err:
        parse(b"%PDF-1.7 garbage", "x.pdf")
    assert err.value.kind == "corrupt"


def test_docx_headings_and_tables(tmp_path):
    import docx

    d = docx.Document()
    d.core_properties.author = "Ann"
    d.add_heading("Design Doc", level=1)
    d.add_paragraph("Intro text.")
    d.add_heading("Storage", level=2)
    d.add_paragraph("We use SQLite.")
    table = d.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "engine", "choice"
    table.cell(1, 0).text, table.cell(1, 1).text = "vector", "sqlite-vec"
    d.save(tmp_path / "d.docx")
    doc = parse((tmp_path / "d.docx").read_bytes(), "d.docx")
    assert doc.title == "Design Doc" and doc.author == "Ann"
    assert [(s.heading_path, s.text) for s in doc.sections] == [
        (("Design Doc",), "Intro text."),
        (("Design Doc", "Storage"), "We use SQLite.\nengine | choice\nvector | sqlite-vec"),
    ]


def test_html_headings(tmp_path):
    html = b"<html><head><title>Page</title><script>var x=1</script></head><body><nav>menu</nav>" \
           b"<h1>Top</h1><p>First para.</p><h2>Sub</h2><ul><li>item one</li></ul></body></html>"
    doc = parse(html, "p.html")
    assert doc.title == "Page"
    assert [(s.heading_path, s.text) for s in doc.sections] == [(("Top",), "First para."), (("Top", "Sub"), "item one")]


def test_epub_chapters(tmp_path):
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("id1")
    book.set_title("A Small Book")
    book.add_author("Jane Writer")
    chapters = []
    for i, body in enumerate(["The beginning of the story.", "The end of the story."], start=1):
        ch = epub.EpubHtml(title=f"Chapter {i}", file_name=f"ch{i}.xhtml", lang="en")
        ch.content = f"<html><body><p>{body}</p></body></html>"
        book.add_item(ch)
        chapters.append(ch)
    book.toc = chapters
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = chapters
    epub.write_epub(tmp_path / "b.epub", book)
    doc = parse((tmp_path / "b.epub").read_bytes(), "b.epub")
    assert doc.title == "A Small Book" and doc.author == "Jane Writer"
    assert [(s.heading_path, s.text) for s in doc.sections] == [
        (("Chapter 1",), "The beginning of the story."), (("Chapter 2",), "The end of the story.")]


def test_unsupported_suffix():
    with pytest.raises(ParseError, match="no parser"):
        parse(b"x", "a.xyz")
    assert parsers.source_type("md") == "markdown" and parsers.source_type("xyz") == "unsupported"


@pytest.mark.parametrize("data, title, body", [
    (b"Meeting notes, March\n\nWe chose the blue plan.\nMore later.", "Meeting notes, March", "We chose the blue plan."),
    (b"Release checklist\n=================\n\nTag the build.", "Release checklist", "Tag the build."),
    (b"Hi Bob,\n\nthanks for the notes.", "letter.txt", "Hi Bob,"),  # a salutation is not a title
    (b"Just one line", "letter.txt", "Just one line"),
    (b"first line\nsecond line\n\nthird", "letter.txt", "first line\nsecond line"),  # no blank line after line 1
])
def test_plain_text_title_is_its_first_line_when_set_off(data, title, body):
    doc = parse(data, "notes/letter.txt")
    assert doc.title == title and doc.sections[0].text.startswith(body)
    assert (title + "\n") not in all_text(doc)  # the title is not repeated in the body


FRONTMATTERS = [
    "title: Meeting notes\ntags: [project/alpha, meeting, q3]\ndate: 2024-03-05\naliases:\n  - alpha sync\n  - weekly\n",
    "a:\n- one\n- two: 2\n  three: [3, {four: 4.0}]\nb: !!str 12\nc: ~\nd: yes\ne: 2024-03-05T10:00:00Z\n",
    "base: &b {x: 1, y: [1, 2]}\nderived:\n  <<: *b\n  y: 3\nlist: [*b, *b]\n",
    "? complex key\n: value\n\"quoted: key\": 'single ''quoted'''\nmultiline: |\n  line one\n  line two\nfolded: >\n  a\n  b\n",
    "- - - nested\n  - in\n- sequences\n",
    "tags: [unclosed\n",
    "a: b: c\n",
]


@pytest.mark.parametrize("block", FRONTMATTERS)
def test_libyaml_and_the_python_loader_read_frontmatter_alike(block, monkeypatch):
    """The fast loader is used when the block cannot nest deep: it must give the very same properties, body and
    warning (an invalid block's message is the pure-Python loader's)."""
    from rag_pipelines.parsers import frontmatter

    if frontmatter.BoundedCLoader is None:
        pytest.skip("PyYAML built without libyaml")
    assert frontmatter.depth_bound(block) <= frontmatter.C_MAX_DEPTH  # libyaml reads these
    text = f"---\n{block}---\nbody\n"
    fast = frontmatter.split_frontmatter(text)
    monkeypatch.setattr(frontmatter, "BoundedCLoader", None)
    assert fast == frontmatter.split_frontmatter(text)
    assert fast[2] is None or "frontmatter" in fast[2]


def test_a_frontmatter_nesting_thousands_deep_is_a_warning_not_a_crashed_process(tmp_path):
    """30,000 levels of `- ` fit in the 64 KB frontmatter limit and crash libyaml's recursive composer (the
    whole process, not an exception): such a block must go to the pure-Python loader. In a child process, so a
    crash fails this test instead of ending the test run."""
    import subprocess
    import sys

    script = ("from rag_pipelines.parsers.frontmatter import split_frontmatter\n"
              "props, body, warning = split_frontmatter('---\\n' + '- ' * 30000 + 'x\\n---\\nbody\\n')\n"
              "print(props == {} and warning)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "invalid frontmatter YAML: nested too deeply" in out.stdout
