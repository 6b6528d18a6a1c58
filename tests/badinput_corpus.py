"""A generated corpus of bad input (floods, binary, bombs, odd encodings) with the outcome each file must have.

    make_corpus(folder, scale=1.0, limits=None) -> {relative filename: "indexed" | "failed:<kind>"}

Sizes grow with `scale` (1.0: a few MB, each file parsed well under a second). Outcomes that depend on
a size limit are computed against `limits`, by default corpus_limits(scale) (small limits, so "too large"
files stay small); a bench indexing the corpus with other limits passes them here to get its expectations.
ENCODED_TITLE and ENCODED_TEXT are what every file under encodings/ must decode to.
"""

from __future__ import annotations

import io
import random
import zipfile
from pathlib import Path

from document_builders import docx_file, epub_file, pdf_file, runs_docx, styles_xml

from rag_pipelines.parsers.limits import MB, Limits, is_text_format

ENCODED_TITLE = "Über Straße"
ENCODED_TEXT = "Café crème, naïve façade — 日本語のテキスト and emoji 🎉."
ENCODED_NOTE = f"# {ENCODED_TITLE}\n\n{ENCODED_TEXT}\n"
WESTERN_TEXT = "Café crème brûlée, Größe, naïve façade: déjà vu."
CONTENT_TYPES = ('<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
                 'content-types"><Default Extension="xml" ContentType="application/xml"/></Types>')
DOCX_MEMBERS = ("[Content_Types].xml", CONTENT_TYPES, "word/document.xml")
EPUB_MEMBERS = ("mimetype", "application/epub+zip", "OEBPS/chapter1.xhtml")
DOCUMENT_XML = ('<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/'
                'wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>')


def corpus_limits(scale: float = 1.0) -> Limits:
    """The limits the default expectations assume: small, so the "too large" files stay small."""
    return Limits(max_file_mb=4 * scale, max_text_mb=2 * scale, max_unzipped_mb=4 * scale)


def make_corpus(folder: Path, scale: float = 1.0, limits: Limits | None = None) -> dict[str, str]:
    """Write the corpus under folder; return {relative filename: expected outcome}."""
    limits = limits or corpus_limits(scale)
    rng = random.Random(7)
    files: dict[str, tuple[bytes, str]] = {}
    for group in (_floods, _binaries, _encodings, _frontmatter, _sizes, _documents, _hostile_documents):
        files.update(group(scale, limits, rng))
    expected = {}
    for rel, (data, outcome) in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        expected[rel] = _by_size(rel, len(data), outcome, limits)
    return expected


def flood(unit: str, count: int) -> bytes:
    return (unit * count).encode()


def _n(count: int, scale: float) -> int:
    return max(1, int(count * scale))


def _by_size(rel: str, size: int, outcome: str, limits: Limits) -> str:
    limit = limits.max_text_mb if is_text_format(rel) else limits.max_file_mb
    return "failed:too_large" if size > limit * MB else outcome


def _floods(scale, limits, rng) -> dict:
    """Markdown and HTML that defeat backtracking regexes or per-element upward searches."""
    units = {"wikilink": "[[", "bracket": "[", "paren": "](", "link": "[](", "image": "![", "field": "[a::",
             "paren_field": "(a::", "pipe": "[[a|", "hash": "#", "colons": "::", "percent": "%%a", "quote": "> ["}
    out = {f"floods/{name}.md": (flood(unit, _n(20_000, scale)) + b"\ntail text\n", "indexed")
           for name, unit in units.items()}
    out["floods/heading.md"] = (b"# " + flood("#", _n(40_000, scale)) + b"x\n", "indexed")
    out["floods/spaces.md"] = (b"# a" + flood(" ", _n(40_000, scale)) + b"#x\n", "indexed")
    out["floods/nested.html"] = (flood("<b>x", _n(10_000, scale)), "indexed")
    out["floods/attributes.html"] = (flood("<a b='", _n(20_000, scale)) + b"<p>tail</p>", "indexed")
    out["floods/comments.html"] = (flood("<!--", _n(20_000, scale)) + b"<p>tail</p>", "failed:no_text")
    words = " ".join(rng.choice(["alpha", "[[beta]]", "#gamma", "[d](e.md)", "zeta::", "eta"]) for _ in range(20_000))
    line = (words * (_n(MB, scale) // len(words) + 1))[: _n(MB, scale)]
    out["floods/one_line.md"] = (line.encode(), "indexed")
    out["floods/tags_10k.md"] = (" ".join(f"#tag{i}x" for i in range(_n(10_000, scale))).encode(), "indexed")
    return out


def _binaries(scale, limits, rng) -> dict:
    noise = rng.randbytes(_n(160 * 1024, scale))
    body = rng.randbytes(_n(64 * 1024, scale))
    elf = b"\x7fELF\x02\x01\x01" + bytes(9) + bytes(b if i % 3 else 0 for i, b in enumerate(body))  # NULs, as in libc
    controls = bytes(rng.choice(b"abc \n\x01\x02\x03\x04\x05\x06") for _ in range(_n(20_000, scale)))
    return {
        "binary/random.md": (noise, "failed:binary"),
        "binary/libc_like.md": (elf, "failed:binary"),
        "binary/image.txt": (b"\x89PNG\r\n\x1a\n" + noise[:4096], "failed:binary"),
        "binary/controls.txt": (controls, "failed:binary"),
        "binary/random.docx": (noise[:8192], "failed:corrupt"),
        "binary/empty.txt": (b"", "failed:empty"),
        "binary/empty.md": (b"", "indexed"),
        "binary/truncated.pdf": (_pdf()[: len(_pdf()) // 2], "indexed"),  # pymupdf recovers the first pages
    }


def _encodings(scale, limits, rng) -> dict:
    note = ENCODED_NOTE * _n(1, scale)
    encoded = {
        "utf8_bom.md": b"\xef\xbb\xbf" + note.encode("utf-8"),
        "utf16le_bom.md": b"\xff\xfe" + note.encode("utf-16-le"),
        "utf16be_bom.md": b"\xfe\xff" + note.encode("utf-16-be"),
        "utf16le_nobom.md": note.encode("utf-16-le"),
        "utf16be_nobom.txt": note.encode("utf-16-be"),
        "utf32le_bom.md": b"\xff\xfe\x00\x00" + note.encode("utf-32-le"),
        "utf32be_bom.md": b"\x00\x00\xfe\xff" + note.encode("utf-32-be"),
        "utf8_cut.md": note.encode("utf-8")[:-2] + "日".encode()[:2],  # a multi-byte character cut short
    }
    out = {f"encodings/{name}": (data, "indexed") for name, data in encoded.items()}
    out["legacy/cp1252.md"] = (WESTERN_TEXT.encode("cp1252"), "indexed")
    out["legacy/cp1251.md"] = (("Привет, это русский текст в старой кодировке. " * 20).encode("cp1251"),
                               "failed:undecodable")
    out["legacy/shift_jis.txt"] = (("日本語のテキストです。" * 40).encode("shift_jis"), "failed:undecodable")
    out["legacy/utf16_broken.md"] = (b"\xff\xfe" + "ok".encode("utf-16-le") + b"\x00\xd8" * 8, "failed:undecodable")
    return out


def _frontmatter(scale, limits, rng) -> dict:
    laughs = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi"))
    merges = "m0: &m0 {k: v}\n" + "".join(f"m{i + 1}: &m{i + 1} {{<<: [*m{i}, *m{i}]}}\n" for i in range(40))
    keys = "".join(f"k{i}: v\n" for i in range(_n(100_000, scale)))
    some_keys = "".join(f"k{i}: v\n" for i in range(5_000))
    note = lambda front, body="Body text.": f"---\n{front}---\n{body}\n".encode()  # noqa: E731
    return {
        "frontmatter/alias_bomb.md": (note(laughs + "tags: *i\naliases: *i\ntitle: *i\n"), "indexed"),
        "frontmatter/merge_bomb.md": (note(merges), "indexed"),
        "frontmatter/keys_100k.md": (note(keys), "indexed"),
        "frontmatter/keys_5k.md": (note(some_keys), "indexed"),
        "frontmatter/deep.md": (note("a: " + "[" * 10_000 + "\n"), "indexed"),
        "frontmatter/long_values.md": (note(f"tags: [{', '.join(f't{i}' for i in range(1000))}]\n"
                                            f"summary: {'word ' * 5000}\n"), "indexed"),
    }


def _sizes(scale, limits, rng) -> dict:
    big = int(limits.max_text_mb * MB) + 1
    line = b"a plain line of text that repeats\n"
    return {"sizes/big.txt": ((line * (big // len(line) + 1))[:big], "failed:too_large")}


def _documents(scale, limits, rng) -> dict:
    bomb = int((limits.max_unzipped_mb + 4 * scale) * MB)
    out = {"documents/bomb.docx": (_docx(b" ", bomb), "failed:zip_bomb"),
           "documents/bomb.epub": (_docx(b"<p>x</p>", bomb, EPUB_MEMBERS), "failed:zip_bomb")}
    if limits.max_unzipped_mb <= 8 * scale:  # an honest DOCX over the limit is as big as the limit: only when small
        over = int(limits.max_unzipped_mb * MB) + 64 * 1024
        out["documents/big.docx"] = (_docx(rng.randbytes(32 * 1024).hex().encode(), over), "failed:too_large")
    return out


ENTITY_DOCTYPE = '<!DOCTYPE w:document [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
ENTITY_RUN = '<w:p><w:r><w:t>Before the entity &x; and after it, in the same run.</w:t></w:r></w:p>'


def _hostile_documents(scale, limits, rng) -> dict:
    """Empty files, a PDF page of one huge line, a DOCX of many runs, an external entity, a path traversal."""
    line = (b"lorem ipsum dolor sit amet " * (_n(MB, scale) // 27 + 1))[: _n(MB, scale)]
    traversal = epub_file([("one.xhtml", "<h1>One</h1><p>The first legitimate chapter.</p>"),
                           ("two.xhtml", "<h1>Two</h1><p>The second legitimate chapter.</p>")],
                          [("One", "one.xhtml"), ("Two", "two.xhtml")],
                          extra_manifest=("../../evil.xhtml",), extra_members={"../../evil.xhtml": "<p>evil</p>"})
    return {
        "documents/empty.docx": (b"", "failed:empty"),
        "documents/empty.epub": (b"", "failed:empty"),
        "documents/empty.pdf": (b"", "failed:empty"),
        "documents/one_line.pdf": (pdf_file([[b"The first page holds ordinary text."], [line]], 300 / len(line)),
                                   "indexed"),  # a font so small that the whole line is on the page
        "documents/runs.docx": (runs_docx(_n(10_000, scale), styles_xml(150)), "indexed"),
        "documents/entity.docx": (docx_file(ENTITY_RUN, doctype=ENTITY_DOCTYPE), "indexed"),
        "documents/traversal.epub": (traversal, "indexed"),
    }


def _docx(unit: bytes, size: int, members: tuple[str, str, str] = DOCX_MEMBERS) -> bytes:
    """A DOCX-shaped zip (or EPUB-shaped) whose main member holds `size` bytes of `unit` repeated."""
    small, small_text, big = members
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(small, small_text)
        with z.open(big, "w", force_zip64=size > 2**31) as member:
            member.write(DOCUMENT_XML.encode())
            piece = (unit * (MB // len(unit) + 1))[:MB]
            for start in range(0, size, MB):
                member.write(piece[: min(MB, size - start)])
    return buf.getvalue()


_PDF: list[bytes] = []


def _pdf() -> bytes:
    if not _PDF:
        import pymupdf

        doc = pymupdf.open()
        for i in range(6):
            doc.new_page().insert_text((72, 72), f"Page {i + 1} of the report says hello.")
        _PDF.append(doc.tobytes(deflate=True))
    return _PDF[0]
