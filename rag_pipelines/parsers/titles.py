"""A file's metadata title, unless it is generic: what an application writes by default names no file.

`meta_title` returns None for an empty title and for these, so the parser takes its next choice (a deck's first
slide title, a document's first heading, the file name):
- an application's default for a new file: "PowerPoint Presentation" (PowerPoint; python-pptx's default core
  properties), "Presentation" (python-pptx's template: tests/fixtures/public/sld-notes.pptx and tbl-cell.pptx carry
  it), its translations ("PowerPoint-Präsentation", "Présentation PowerPoint", ...), "Presentation1", "Document1",
  "Book1", "Untitled", "Untitled-1" (Adobe), "Untitled 1" (LibreOffice, and "Unbenannt 1", "Sans nom 1", ...),
  "Untitled document/spreadsheet/presentation" (Google Docs, Sheets, Slides);
- a program's name where the title goes: "Adobe Photoshop PDF" (scans saved through Photoshop), "Adobe Acrobat",
  "Microsoft Word", "R Graphics Output" (R's pdf() device), "Print", "Scanned Document", "CamScanner ...";
- a printed file's name: "Microsoft Word - report.doc" (Acrobat's PDFMaker and PDF printers), "Microsoft
  PowerPoint - deck.ppt", "Microsoft Excel - Book1.xls";
- a file name: print-production tools write their source file's ("i-xx_Phobias-fm.indd", "SEAJPH-April 13.indb").
Matching ignores case, spaces and a trailing number.
"""

from __future__ import annotations

import re

GENERIC = frozenset({
    # defaults of new files (English and the common translations of PowerPoint's)
    "presentation", "powerpoint presentation", "powerpoint-präsentation", "présentation powerpoint",
    "presentación de powerpoint", "presentazione di powerpoint", "powerpoint-presentatie",
    "apresentação do powerpoint", "prezentacja programu powerpoint", "document", "book", "workbook", "sheet",
    "slide", "drawing", "title", "untitled", "untitled document", "untitled spreadsheet", "untitled presentation",
    "untitled form", "untitled drawing", "unbenannt", "sans nom", "sans titre", "sin título", "senza titolo",
    "naamloos", "sem título", "new document", "new presentation", "new microsoft word document",
    # programs and devices in the title's place
    "adobe photoshop pdf", "adobe acrobat", "adobe pdf", "pdf", "pdf document", "microsoft word",
    "microsoft excel", "microsoft powerpoint", "microsoft office", "libreoffice", "openoffice", "word",
    "excel", "powerpoint", "keynote", "r graphics output", "print", "printout", "scan", "scanned document",
    "scanned image", "scanned file", "image", "full page photo",
})
PRINTED = re.compile(r"microsoft (?:office )?(?:word|excel|powerpoint|visio|publisher|project) - ", re.I)
FILE_NAME = re.compile(r"\.(?:docx?|dotx?|xlsx?|pptx?|od[tsp]|pdf|rtf|txt|indd|indb|qxd|qxp|pages|key|numbers|tex|"
                       r"dvi|ps|psd|ai|eps|tiff?|jpe?g|png)$", re.I)
NUMBERED = re.compile(r"[\s_-]*\d+$")


def meta_title(value: str | None) -> str | None:
    """The title, whitespace collapsed; None when it is empty or generic (see the module's docstring)."""
    title = " ".join((value or "").split())
    if not title or PRINTED.match(title) or FILE_NAME.search(title) or "camscanner" in title.lower():
        return None
    return None if NUMBERED.sub("", title).casefold() in GENERIC else title
