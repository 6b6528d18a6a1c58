"""DOCX, EPUB and PDF files written byte by byte, for shapes their libraries will not make (hostile or odd ones).

    docx_file(paragraphs_xml, styles=..., doctype=...)   a WordprocessingML package (zip)
    runs_docx(runs, styles)                             one run per paragraph, a heading every 1000 runs
    epub_file(chapters, toc, ...)                       an EPUB 2 (NCX) or EPUB 3 (nav) book
    pdf_file(pages)                                     a PDF whose pages each show the given lines of text
"""

from __future__ import annotations

import io
import zipfile
import zlib
from xml.sax.saxutils import escape

W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
CONTENT_TYPES = (
    '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType='
    '"application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/><Override PartName='
    '"/word/styles.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.styles+xml"/>'
    '<Override PartName="/docProps/core.xml" ContentType="application/vnd.openxmlformats-package.core-properties+xml"/>'
    '</Types>')
RELS = ('<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/'
        'relationships">{}</Relationships>')
REL = '<Relationship Id="rId{}" Type="http://schemas.openxmlformats.org/{}" Target="{}"/>'
OFFICE_DOCUMENT = "officeDocument/2006/relationships/officeDocument"
STYLES_REL = "officeDocument/2006/relationships/styles"
CORE_REL = "package/2006/relationships/metadata/core-properties"


def styles_xml(extra: int = 0) -> str:
    """Normal (the default), Title, heading 1-3 (as Word names them), and `extra` more paragraph styles."""
    style = '<w:style w:type="paragraph"{} w:styleId="{}"><w:name w:val="{}"/></w:style>'
    styles = [style.format(' w:default="1"', "Normal", "Normal"), style.format("", "Title", "Title")]
    styles += [style.format("", f"Heading{n}", f"heading {n}") for n in (1, 2, 3)]
    styles += [style.format("", f"Custom{i}", f"Custom style {i}") for i in range(extra)]
    return f'<?xml version="1.0" encoding="UTF-8"?><w:styles xmlns:w="{W_NS}">{"".join(styles)}</w:styles>'


def paragraph(text: str, style: str | None = None) -> str:
    props = f'<w:pPr><w:pStyle w:val="{style}"/></w:pPr>' if style else ""
    return f'<w:p>{props}<w:r><w:t xml:space="preserve">{escape(text)}</w:t></w:r></w:p>'


def docx_file(body: str, styles: str | None = None, doctype: str = "", core: str | None = None) -> bytes:
    """A DOCX whose word/document.xml body is `body` (paragraph and table XML), with an optional DTD before it."""
    document = (f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>{doctype}'
                f'<w:document xmlns:w="{W_NS}"><w:body>{body}</w:body></w:document>')
    parts = {"[Content_Types].xml": CONTENT_TYPES, "word/document.xml": document}
    package_rels = [REL.format(1, OFFICE_DOCUMENT, "word/document.xml")]
    if styles is not None:
        parts["word/styles.xml"] = styles
        parts["word/_rels/document.xml.rels"] = RELS.format(REL.format(1, STYLES_REL, "styles.xml"))
    if core is not None:
        parts["docProps/core.xml"] = core
        package_rels.append(REL.format(2, CORE_REL, "docProps/core.xml"))
    parts["_rels/.rels"] = RELS.format("".join(package_rels))
    return zip_file(parts)


def runs_docx(runs: int, styles: str) -> bytes:
    """`runs` runs of one word each, one per paragraph, a "heading 2" paragraph before every 1000th run."""
    body = []
    for i in range(runs):
        if i % 1000 == 0:
            body.append(paragraph(f"Part {i // 1000 + 1}", "Heading2"))
        body.append(paragraph(f"word{i} "))
    return docx_file("".join(body), styles)


def zip_file(members: dict[str, str | bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(zipfile.ZipInfo(name), data, zipfile.ZIP_STORED if name == "mimetype" else zipfile.ZIP_DEFLATED)
    return buf.getvalue()


CONTAINER = ('<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
             '<rootfiles><rootfile full-path="{}" media-type="application/oebps-package+xml"/></rootfiles></container>')
XHTML = '<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>{}</title>' \
        '</head><body>{}</body></html>'


def epub_file(chapters: list[tuple[str, str]], toc: list, *, title: str = "A Book", nav: bool = False,
              extra_manifest: tuple[str, ...] = (), extra_members: dict[str, str] | None = None,
              opf_dir: str = "OEBPS") -> bytes:
    """An EPUB whose spine is `chapters` ((file name, body HTML), in order) and whose table of contents is `toc`:
    (label, href) entries, or (label, href, [children]) for nested ones. An NCX (EPUB 2), or a nav document when
    `nav` (EPUB 3). `extra_manifest` hrefs are added to the manifest and spine as they are (hostile ones too)."""
    base = f"{opf_dir}/" if opf_dir else ""
    items = [(f"c{i}", name) for i, (name, _) in enumerate(chapters)] + \
            [(f"x{i}", href) for i, href in enumerate(extra_manifest)]
    manifest = "".join(f'<item id="{i}" href="{escape(h)}" media-type="application/xhtml+xml"/>' for i, h in items)
    manifest += '<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>' if not nav else \
        '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>'
    spine = "".join(f'<itemref idref="{i}"/>' for i, _ in items)
    opf = (f'<?xml version="1.0" encoding="UTF-8"?><package xmlns="http://www.idpf.org/2007/opf" version="'
           f'{"3.0" if nav else "2.0"}" unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
           f'<dc:identifier id="id">urn:test:{escape(title)}</dc:identifier><dc:title>{escape(title)}</dc:title>'
           f'<dc:creator>Test Author</dc:creator><dc:language>en</dc:language></metadata><manifest>{manifest}'
           f'</manifest><spine{"" if nav else " toc=" + chr(34) + "ncx" + chr(34)}>{spine}</spine></package>')
    members = {"mimetype": "application/epub+zip", "META-INF/container.xml": CONTAINER.format(f"{base}content.opf"),
               f"{base}content.opf": opf}
    members.update({f"{base}{name}": XHTML.format(escape(name), body) for name, body in chapters})
    members[f"{base}{'nav.xhtml' if nav else 'toc.ncx'}"] = _nav(toc) if nav else _ncx(toc)
    members.update(extra_members or {})
    return zip_file(members)


def _ncx(toc: list) -> str:
    counter = iter(range(1, 10**6))

    def points(entries) -> str:
        return "".join(f'<navPoint id="np{n}" playOrder="{n}"><navLabel><text>{escape(e[0])}</text></navLabel>'
                       f'<content src="{escape(e[1])}"/>{points(e[2] if len(e) > 2 else [])}</navPoint>'
                       for e in entries for n in [next(counter)])

    return ('<?xml version="1.0" encoding="UTF-8"?><ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1">'
            f'<head/><docTitle><text>Book</text></docTitle><navMap>{points(toc)}</navMap></ncx>')


def _nav(toc: list) -> str:
    def items(entries) -> str:
        return "".join(f'<li><a href="{escape(e[1])}">{escape(e[0])}</a>'
                       f'{"<ol>" + items(e[2]) + "</ol>" if len(e) > 2 else ""}</li>' for e in entries)

    return ('<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.'
            f'idpf.org/2007/ops"><head><title>Contents</title></head><body><nav epub:type="toc"><ol>{items(toc)}'
            '</ol></nav></body></html>')


def pdf_file(pages: list[list[bytes]], font_size: float = 10) -> bytes:
    """A PDF (Helvetica, one compressed content stream per page) whose page i shows the lines pages[i]."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b""]
    kids = []
    for lines in pages:
        shown = b"".join(b"(" + line.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)") + b") Tj T* "
                         for line in lines)
        size = f"{font_size:.10f}".rstrip("0").rstrip(".").encode()  # PDF numbers have no exponent
        stream = zlib.compress(b"BT /F1 " + size + b" Tf 12 TL 40 750 Td " + shown + b"ET", 6)
        objects.append(b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream")
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 %d 0 R >> "
                       b">> /Contents %d 0 R >>" % (2 * len(pages) + 3, len(objects)))
        kids.append(b"%d 0 R" % len(objects))
    objects[1] = b"<< /Type /Pages /Kids [" + b" ".join(kids) + b"] /Count %d >>" % len(pages)
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out, offsets = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)
