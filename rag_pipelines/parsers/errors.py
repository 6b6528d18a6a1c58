"""Why an item could not be parsed: a kind and a message that says what to do next.

Kinds: corrupt, encrypted, empty (a 0-byte file of a format that cannot be empty: PDF, DOCX, EPUB, TXT, ...),
no_text, unsupported, unreadable, too_large (over a size or chunk limit),
zip_bomb (a DOCX/EPUB that would inflate past the limit), binary (binary content in a text format),
undecodable (text in no encoding we can tell).
"""

from __future__ import annotations

from rag_search.errors import RagError


class ParseError(RagError):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
