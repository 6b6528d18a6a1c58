"""Faithful Obsidian parsing: code kept verbatim, only real tags, the note as written, a vault's notes only.

The fixture note Help/Formatting help.md is written by us in the shapes of Obsidian's own help vault
(inline code holding links and embeds, heading links, colours in code, CSS in a callout, math, sized
embeds, nested tags); site-options.json is that vault's Publish settings file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_pipelines.chunking.prose import document_text
from rag_pipelines.parsers import parse
from rag_pipelines.parsers.markdown_spans import CODE, PROSE, spans
from rag_pipelines.sources.files import FileOptions, FileSource
from rag_search.records import Document, Section
from rag_search.retrieval.snippets import plain, snippet, term_pattern

VAULT = Path(__file__).parent / "fixtures" / "vault"
HELP = "Help/Formatting help.md"


def note(rel: str):
    return parse((VAULT / rel).read_bytes(), rel, 1_700_000_000 * 10**9)


def md(text: str):
    return parse(text.encode(), "n.md")


def all_text(doc) -> str:
    return "\n".join(s.text for s in doc.sections)


# -- code stays as written ---------------------------------------------------------------------

def test_inline_code_keeps_link_syntax_and_prose_links_are_resolved():
    doc = note(HELP)
    text = all_text(doc)
    for code in ("`[[Three laws of motion]]`", "`[[Three laws of motion#Second law]]`", "`![[Engelbart.jpg|100]]`",
                 '`printf("%%d")`', "`#ff0000`"):
        assert code in text, code
    assert "``" not in text.replace("```", "")  # no code span emptied
    assert "Jump to Keyboard shortcuts or to the colour notes (Colours and code)." in text  # prose links resolved
    assert doc.metadata["embeds"] == ["Engelbart.jpg", "Manual.pdf#page=3"]  # sizes are not part of the target
    assert doc.links == ()  # heading links point into the note itself; links in code are no links


def test_code_blocks_inside_callouts_and_math_are_verbatim():
    text = all_text(note(HELP))
    assert "```css\n.red-border img {\n   border-color: #ff0000;" in text  # fence inside a callout
    assert "style A fill:#c6dbef" in text
    assert "$e^{i\\pi} + 1 = 0 #notatag$" in text and "$$x #notatag$$" in text
    assert "Example: CSS snippet" in text and "Tip: Nested tip" in text  # callouts around the code still read


def test_a_code_span_with_two_backticks_and_an_unclosed_one():
    assert spans("a ``x ` y`` b `c") == ([(PROSE, "a "), (CODE, "``x ` y``"), (PROSE, " b `c")], False)
    assert spans(r"not \`code` here") == ([(PROSE, r"not \`code` here")], False)
    assert spans("costs $5 and $10") == ([(PROSE, "costs $5 and $10")], False)  # money, not math
    assert spans("x %% hidden") == ([(PROSE, "x ")], True)
    assert spans("still hidden %% back `%%`", True) == ([(PROSE, " back "), (CODE, "`%%`")], False)


def test_comments_are_dropped_but_not_inside_code():
    doc = md("Before %%one\nstill hidden `x`\nend%% after\n\n```\nprintf(\"%%d %%s\");\n```\n")
    text = all_text(doc)
    assert "Before" in text and "after" in text and "hidden" not in text and 'printf("%%d %%s");' in text


def test_inline_html_is_read_as_its_text_and_the_note_as_written_keeps_it():
    row = ('<td align="center"><a href="https://github.com/ann"><img src="https://x/u/1?v=4" alt="Ann"/><br />'
           '<sub><b>Ann Lee</b></sub></a><br /><a href="https://x/commits?author=ann" title="Code">💻</a></td>')
    doc = md(f"# Thanks\n\n<!-- LIST:START -->\n<table>\n  <tr>\n    {row}\n  </tr>\n</table>\n\n"
             "Press <kbd>Ctrl</kbd>+<kbd>K</kbd>, see <https://foam.dev/a> and `<div>` as code.\n")
    text = all_text(doc)
    assert "Ann Lee 💻" in text.split("\n")  # the text a reader sees
    assert md("- a\n    <b>b</b> c\n").sections[0].text == "- a\n    b c"  # a line's own indent kept
    assert "Press Ctrl+K, see <https://foam.dev/a> and `<div>` as code." in text  # an autolink and code stay
    assert "href" not in text and "LIST:START" not in text
    assert "<" not in text.replace("<https", "").replace("`<div>`", "")
    assert row in doc.text and "<!-- LIST:START -->" in doc.text  # rag_get_document: as written


def test_html_stripping_takes_linear_time_on_hostile_lines():
    import time

    for line in ("<a " * 20000, " " * 40000 + "x", "<!--" * 20000, "<a" + " b" * 20000):
        t0 = time.perf_counter()
        md(line + "\n")
        assert time.perf_counter() - t0 < 1.0, line[:10]


def test_a_parser_version_past_the_first_is_part_of_the_change_stamp(tmp_path):
    from rag_pipelines import parsers

    for name in ("a.md", "b.txt"):
        (tmp_path / name).write_text("x")
    stamps = FileSource(FileOptions(type="project", paths=(tmp_path,))).scan().items
    assert stamps["a.md"].value.endswith(parsers.version_tag("md")) and parsers.version_tag("md") == "~p2"
    assert stamps["b.txt"].value == f"1:{(tmp_path / 'b.txt').stat().st_mtime_ns}"  # version 1: the stamp as before


# -- only real tags ------------------------------------------------------------------------------

def test_fixture_notes_have_only_their_real_tags():
    assert note(HELP).tags == ("help", "formatting", "project/alpha")
    assert set(note("Projects/Work/Kube Upgrade.md").tags) == {"ops", "infra/k8s", "risk/high", "y1984"}


@pytest.mark.parametrize("line,tags", [
    ("see [[#Keyboard shortcuts]] and [[Note#Heading|that]]", ()),
    ("a colour in code `#ff0000` and in HTML <span style=\"color: #00ff00\">x</span>", ()),
    ("a colour in prose #ff0000 is a tag, as Obsidian shows it", ("ff0000",)),
    ("https://example.com/#anchor and [text](#anchor) and a#b", ()),
    ("#1984 is a number, #y1984 and #2024_q1 are tags", ("y1984", "2024_q1")),
    ("nested #area/sub-area_2 and #Café.", ("area/sub-area_2", "Café")),
    ("math $x #m$ and $$y #n$$", ()),
    ("%% #hidden %% #shown", ("shown",)),
    ("> [!note] #in-callout\n> ```css\n> a { color: #fff; }\n> ```\n> #after-fence", ("in-callout", "after-fence")),
    ("- item\n    ```\n    #indented-fence\n    ```", ()),
    ("$$\n#in-math-block\n$$\n#after-math", ("after-math",)),
    ("# Heading #with-tag", ("with-tag",)),
])
def test_inline_tags_follow_obsidian(line, tags):
    assert md(line).tags == tags


def test_frontmatter_tags_in_every_form_and_case_insensitive():
    doc = md("---\ntags: [Alpha, '#beta']\ntag: \"gamma, #delta\"\n---\nBody #alpha #BETA #epsilon\n")
    assert doc.tags == ("Alpha", "beta", "gamma", "delta", "epsilon")
    assert md("---\ntags: \"#one two, three\"\n---\nx\n").tags == ("one", "two", "three")


# -- the note as written -----------------------------------------------------------------------

def test_document_text_is_the_note_as_written_without_frontmatter_and_comments():
    raw = (VAULT / "Projects/Work/Kube Upgrade.md").read_text()
    text = note("Projects/Work/Kube Upgrade.md").text
    assert text.startswith("# Kube Upgrade\n\nThe upgrade")  # frontmatter left out (it is tags and metadata)
    assert "See [[Runbook|the runbook]] and [[Incidents#March]]" in text and "![[diagram.png|300]]" in text
    assert text.count("## Risks") == 1 and "\n### Timeline\n" in text  # heading levels as written
    assert "```dataview\nTABLE status FROM #ops\n```" in text  # code as written
    assert "private comment" not in text and "private comment" in raw
    assert "> [!warning]+ Rollback plan" in text


def test_text_of_documents_without_markdown_has_each_heading_once():
    doc = Document("Report", (Section("Intro text.", ("Report",), 1), Section("More intro.", ("Report",), 1),
                              Section("Costs fell.", ("Report", "Costs"), 2)))
    assert document_text(doc) == "[page 1]\n\n# Report\n\nIntro text.\n\nMore intro.\n\n[page 2]\n\n## Costs\n\nCosts fell."


# -- snippets --------------------------------------------------------------------------------------

def test_snippets_show_no_markdown_emphasis_beside_the_marks():
    text = "To change the zoom level, select **Reset zoom** in the _zoom_ controls.\n## Zoom ==tips=="
    got = snippet(text, term_pattern(["zoom"]))
    assert got == "To change the **zoom** level, select Reset **zoom** in the **zoom** controls. **Zoom** tips"
    assert plain("Reset zoom** in the controls") == "Reset zoom in the controls"  # a chunk cut inside **bold**
    for kept in ("a*b*c and snake_case and 2**3 and __init__", "`**bold**` in code", "f(*args, **kwargs)"):
        assert plain(kept) == kept


# -- a vault's notes, not its settings -------------------------------------------------------------

def test_obsidian_source_skips_data_and_settings_files_by_default(tmp_path):
    for rel in ("site-options.json", "data/table.csv", "export.yaml", "note.md", "paper.pdf", "book.epub",
                "sub/doc.docx", ".obsidian/app.json", ".obsidian/plugins/x/data.json"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    vault = FileSource(FileOptions(type="obsidian", paths=(tmp_path,)))
    project = FileSource(FileOptions(type="project", paths=(tmp_path,)))
    assert set(vault.scan().items) == {"note.md", "paper.pdf", "book.epub", "sub/doc.docx"}
    assert set(project.scan().items) == {"note.md", "paper.pdf", "book.epub", "sub/doc.docx", "site-options.json",
                                         "data/table.csv", "export.yaml"}
    chosen = FileSource(FileOptions(type="obsidian", paths=(tmp_path,), include=("**/*.json",)))
    assert set(chosen.scan().items) == {"site-options.json"}  # an explicit include still wins
    assert "site-options.json" not in FileSource(FileOptions(type="obsidian", paths=(VAULT,))).scan().items
    assert "include" not in FileOptions(type="obsidian", paths=(tmp_path,)).model_dump(exclude_defaults=True)  # registry.yaml


# -- rag_get_document: the note as written, from the index alone ------------------------------------

def index_vault(tmp_path, embedder, **source):
    import shutil

    from rag_pipelines.indexing import items
    from rag_pipelines.indexing import scan
    from rag_pipelines.config import validate_collection
    from rag_search.store import Store

    vault = tmp_path / "vault"
    shutil.copytree(VAULT, vault)
    cfg = validate_collection({"name": "notes", "sources": [  # OCR off: its own tests (test_ocr.py) read images
        {"type": "obsidian", "paths": [str(vault)], "ocr": False, **source}]})
    store = Store.open(tmp_path / "rag.db")
    sources = scan.open_sources(cfg)
    items.index_keys(store, embedder, cfg, [k for s in sources for k in s.scan().items], sources=sources)
    return store, vault


def test_get_document_returns_the_note_as_written_even_with_the_vault_gone(tmp_path, fake_embedder):
    import shutil

    from rag_search.store import reads

    store, vault = index_vault(tmp_path, fake_embedder)
    written = (vault / HELP).read_text(encoding="utf-8").split("---\n", 2)[2].strip("\n")
    shutil.rmtree(vault)  # an unmounted drive: the index still answers
    doc = reads.get_document(store, HELP)
    assert doc["chunks"] > 1 and doc["text"] == written
    for heading in ("# Formatting help\n", "\n## Links in code\n", "\n## Tags\n", "\n### Keyboard shortcuts\n"):
        assert doc["text"].count(heading) == 1, heading  # each heading once, at its level
    canvas = reads.get_document(store, "Board.canvas")["text"]
    assert canvas == "Canvas text"  # no Markdown kept by its parser: the sections' text
    store.close()


def test_file_path_ingest_stores_no_text(tmp_path, fake_embedder):
    store, _ = index_vault(tmp_path, fake_embedder, ingest="file-path")
    assert store.conn.execute("SELECT count(*) FROM item_texts").fetchone() == (0,)
    assert store.conn.execute("SELECT count(*) FROM items WHERE status = 'indexed'").fetchone()[0] == 12  # + Templates
    store.close()
