"""Real office files and images made by their libraries (python-pptx, openpyxl, odfpy, Pillow, pymupdf), and the
huge ones written part by part (a 5,000-slide deck through python-pptx takes minutes).

    deck(slides)               PPTX: [(title, [body lines], notes or None, table rows or None)] via python-pptx
    big_deck(count)            PPTX of `count` small slides, each part written directly into the zip
    workbook(sheets)           XLSX: {sheet: rows} via openpyxl (dates, numbers, booleans kept as such)
    big_workbook(rows, cols)   XLSX of rows x cols cells via openpyxl's write-only mode
    odt / ods / odp(...)       OpenDocument files via odfpy
    text_image(lines, ...)     a PNG of text rendered by Pillow: font size, turn, noise, JPEG instead
    image_pdf(images)          a PDF whose pages are only those images (a scan)
    picture()                  a PNG with no text in it (a gradient), and files holding only such a picture:
    picture_deck / picture_workbook / picture_docx / picture_odf(kind)   each with an optional metadata title
"""

from __future__ import annotations

import io
import random
import zipfile
from pathlib import Path

FONTS = (Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"),
         Path("/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf"))


def deck(slides: list[tuple]) -> bytes:
    from pptx import Presentation
    from pptx.util import Inches

    prs = Presentation()
    for title, body, notes, table in slides:
        slide = prs.slides.add_slide(prs.slide_layouts[5 if table else 1])
        slide.shapes.title.text = title
        if body and not table:
            frame = slide.placeholders[1].text_frame
            frame.text = body[0]
            for line in body[1:]:
                frame.add_paragraph().text = line
        if table:
            grid = slide.shapes.add_table(len(table), len(table[0]), Inches(1), Inches(2), Inches(8), Inches(3)).table
            for r, row in enumerate(table):
                for c, value in enumerate(row):
                    grid.cell(r, c).text = value
        if notes:
            slide.notes_slide.notes_text_frame.text = notes
    out = io.BytesIO()
    prs.save(out)
    return out.getvalue()


P_NS = ('xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" '
        'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" '
        'xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main"')
SLIDE = ('<?xml version="1.0" encoding="UTF-8"?><p:sld {ns}><p:cSld><p:spTree>'
         '<p:sp><p:nvSpPr><p:cNvPr id="2" name="T"/><p:cNvSpPr/><p:nvPr><p:ph type="title"/></p:nvPr></p:nvSpPr>'
         '<p:txBody><a:p><a:r><a:t>Slide title {n}</a:t></a:r></a:p></p:txBody></p:sp>'
         '<p:sp><p:nvSpPr><p:cNvPr id="3" name="B"/><p:cNvSpPr/><p:nvPr><p:ph idx="1"/></p:nvPr></p:nvSpPr>'
         '<p:txBody><a:p><a:r><a:t>Point {n}: the quarterly figure for region {n} is {v}.</a:t></a:r></a:p>'
         '</p:txBody></p:sp></p:spTree></p:cSld></p:sld>')
REL_TYPE = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/"


def big_deck(count: int) -> bytes:
    """A PPTX of `count` slides (title and one line each): the package parts a parser reads, nothing else."""
    rels = "".join(f'<Relationship Id="rId{i}" Type="{REL_TYPE}slide" Target="slides/slide{i}.xml"/>'
                   for i in range(1, count + 1))
    ids = "".join(f'<p:sldId id="{255 + i}" r:id="rId{i}"/>' for i in range(1, count + 1))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/'
                   'package/2006/content-types"><Default Extension="xml" ContentType="application/xml"/></Types>')
        z.writestr("_rels/.rels", '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/'
                   f'package/2006/relationships"><Relationship Id="rId1" Type="{REL_TYPE}officeDocument" '
                   'Target="ppt/presentation.xml"/></Relationships>')
        z.writestr("ppt/presentation.xml", f'<?xml version="1.0"?><p:presentation {P_NS}><p:sldIdLst>{ids}'
                   '</p:sldIdLst></p:presentation>')
        z.writestr("ppt/_rels/presentation.xml.rels", '<?xml version="1.0"?><Relationships xmlns="http://schemas.'
                   f'openxmlformats.org/package/2006/relationships">{rels}</Relationships>')
        for i in range(1, count + 1):
            z.writestr(f"ppt/slides/slide{i}.xml", SLIDE.format(ns=P_NS, n=i, v=i * 7 % 1000))
    return out.getvalue()


def workbook(sheets: dict[str, list[list]]) -> bytes:
    import openpyxl

    book = openpyxl.Workbook()
    book.remove(book.active)
    for name, rows in sheets.items():
        sheet = book.create_sheet(name)
        for row in rows:
            sheet.append(row)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def big_workbook(rows: int, cols: int) -> bytes:
    import openpyxl

    book = openpyxl.Workbook(write_only=True)
    sheet = book.create_sheet("Data")
    sheet.append([f"Column {c}" for c in range(1, cols + 1)])
    for r in range(rows - 1):
        sheet.append([f"r{r}c{c}" if c % 2 else r * cols + c for c in range(cols)])
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def _odf_bytes(doc) -> bytes:
    out = io.BytesIO()
    doc.write(out)
    return out.getvalue()


def odt(title: str, blocks: list[tuple[int, str]]) -> bytes:
    """blocks: (heading level, text) for headings, (0, text) for paragraphs."""
    from odf import dc
    from odf.opendocument import OpenDocumentText
    from odf.text import H, P

    doc = OpenDocumentText()
    doc.meta.addElement(dc.Title(text=title))
    for level, text in blocks:
        doc.text.addElement(H(outlinelevel=level, text=text) if level else P(text=text))
    return _odf_bytes(doc)


def ods(sheets: dict[str, list[list]], trailing_repeat: int = 0) -> bytes:
    """Rows of text or numbers; each row ends with an empty cell repeated 1,000 times, as LibreOffice writes, and
    the sheet with `trailing_repeat` empty rows."""
    from odf.opendocument import OpenDocumentSpreadsheet
    from odf.table import Table, TableCell, TableRow
    from odf.text import P

    doc = OpenDocumentSpreadsheet()
    for name, rows in sheets.items():
        table = Table(name=name)
        for row in rows:
            tr = TableRow()
            for value in row:
                number = isinstance(value, (int, float))
                cell = TableCell(valuetype="float", value=value) if number else TableCell()
                cell.addElement(P(text=str(value)))
                tr.addElement(cell)
            tr.addElement(TableCell(numbercolumnsrepeated=1000))
            table.addElement(tr)
        if trailing_repeat:
            table.addElement(TableRow(numberrowsrepeated=trailing_repeat))
        doc.spreadsheet.addElement(table)
    return _odf_bytes(doc)


def odp(slides: list[tuple[str, str, str | None]]) -> bytes:
    """slides: (title, body, notes or None)."""
    from odf.draw import Frame, Page, TextBox
    from odf.namespaces import PRESENTATIONNS
    from odf.opendocument import OpenDocumentPresentation
    from odf.presentation import Notes
    from odf.style import MasterPage, PageLayout
    from odf.text import P

    doc = OpenDocumentPresentation()
    layout = PageLayout(name="PL")
    doc.automaticstyles.addElement(layout)
    master = MasterPage(name="Default", pagelayoutname=layout)
    doc.masterstyles.addElement(master)

    def frame(parent, kind: str, text: str) -> None:
        f = Frame(width="20cm", height="4cm", x="1cm", y="1cm")
        f.setAttrNS(PRESENTATIONNS, "class", kind)
        box = TextBox()
        box.addElement(P(text=text))
        f.addElement(box)
        parent.addElement(f)

    for title, body, notes in slides:
        page = Page(masterpagename=master)
        doc.presentation.addElement(page)
        frame(page, "title", title)
        frame(page, "outline", body)
        if notes:
            note = Notes()
            page.addElement(note)
            frame(note, "notes", notes)
    return _odf_bytes(doc)


def font(size: int):
    from PIL import ImageFont

    for path in FONTS:
        if path.is_file():
            return ImageFont.truetype(str(path), size)
    return ImageFont.load_default(size=size)  # Pillow's own font: ASCII only


def text_image(lines: list[str], size: int = 33, turn: int = 0, noise: float = 0.0, jpeg: bool = False,
               seed: int = 1) -> bytes:
    """A white page with the lines in black: size in pixels (33 = 12 pt at 200 dpi), turned by `turn` degrees,
    gaussian noise of that standard deviation and a slight blur when noise > 0, saved as PNG (or JPEG q=40)."""
    from PIL import Image, ImageDraw, ImageFilter

    face = font(size)
    width = max(int(face.getlength(line)) for line in lines) + 2 * size
    image = Image.new("L", (width, int(len(lines) * size * 1.6) + 2 * size), 255)
    draw = ImageDraw.Draw(image)
    for i, line in enumerate(lines):
        draw.text((size, size + int(i * size * 1.6)), line, fill=0, font=face)
    if noise:
        rng = random.Random(seed)
        image = image.filter(ImageFilter.GaussianBlur(0.7))
        image = Image.frombytes("L", image.size, bytes(max(0, min(255, int(p + rng.gauss(0, noise))))
                                                         for p in image.tobytes()))
    if turn:
        image = image.rotate(turn, expand=True, fillcolor=255)
    out = io.BytesIO()
    image.convert("RGB").save(out, format="JPEG" if jpeg else "PNG", **({"quality": 40} if jpeg else {}))
    return out.getvalue()


def image_pdf(images: list[bytes], text_pages: dict[int, str] | None = None, dpi: int = 200) -> bytes:
    """A PDF with one page per image, sized as a scanner sizes it (the image at `dpi`) and without a text layer;
    text_pages[i] adds a page of text before image i."""
    import pymupdf
    from PIL import Image

    doc = pymupdf.open()
    for index, data in enumerate(images):
        if text_pages and index in text_pages:
            doc.new_page().insert_text((72, 72), text_pages[index])
        width, height = Image.open(io.BytesIO(data)).size
        page = doc.new_page(width=width * 72 / dpi, height=height * 72 / dpi)
        page.insert_image(page.rect, stream=data)
    return doc.tobytes(deflate=True)


def picture() -> bytes:
    """A 64x48 PNG gradient: a picture with no text."""
    from PIL import Image

    image = Image.linear_gradient("L").resize((64, 48)).convert("RGB")
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def picture_deck(slides: int = 2, title: str | None = None) -> bytes:
    """A PPTX whose slides hold a picture each and no text (python-pptx's blank layout)."""
    from pptx import Presentation
    from pptx.util import Inches

    prs = Presentation()
    for _ in range(slides):
        prs.slides.add_slide(prs.slide_layouts[6]).shapes.add_picture(io.BytesIO(picture()), Inches(1), Inches(1))
    prs.core_properties.title = title or ""
    out = io.BytesIO()
    prs.save(out)
    return out.getvalue()


def picture_workbook(title: str | None = None) -> bytes:
    """An XLSX whose one sheet holds a picture and no cell values."""
    import openpyxl
    from openpyxl.drawing.image import Image

    book = openpyxl.Workbook()
    book.active.add_image(Image(io.BytesIO(picture())), "B2")
    book.properties.title = title
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def picture_docx(title: str | None = None) -> bytes:
    """A DOCX holding a picture and no text (python-docx)."""
    import docx

    doc = docx.Document()
    doc.add_picture(io.BytesIO(picture()))
    doc.core_properties.title = title or ""
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()


def picture_odf(kind: str, title: str | None = None) -> bytes:
    """An ODT, ODP (a page) or ODS (an empty sheet) holding only a picture (odfpy)."""
    from odf import dc
    from odf.draw import Frame, Image, Page
    from odf.opendocument import OpenDocumentPresentation, OpenDocumentSpreadsheet, OpenDocumentText
    from odf.style import MasterPage, PageLayout
    from odf.table import Table
    from odf.text import P

    doc = {"odt": OpenDocumentText, "odp": OpenDocumentPresentation, "ods": OpenDocumentSpreadsheet}[kind]()
    if title:
        doc.meta.addElement(dc.Title(text=title))
    if kind == "ods":
        doc.spreadsheet.addElement(Table(name="Sheet1"))
        return _odf_bytes(doc)
    if kind == "odp":
        layout = PageLayout(name="PL")
        doc.automaticstyles.addElement(layout)
        master = MasterPage(name="Default", pagelayoutname=layout)
        doc.masterstyles.addElement(master)
        holder = Page(masterpagename=master)
        doc.presentation.addElement(holder)
    else:
        holder = P()
        doc.text.addElement(holder)
    frame = Frame(width="5cm", height="4cm", x="1cm", y="1cm", anchortype="paragraph")
    frame.addElement(Image(href=doc.addPicture("Pictures/picture.png", "image/png", picture())))
    holder.addElement(frame)
    return _odf_bytes(doc)
