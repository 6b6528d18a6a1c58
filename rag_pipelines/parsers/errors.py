"""Why an item could not be parsed: a kind (corrupt, encrypted, no_text, unsupported, unreadable) and a message."""

from __future__ import annotations

from rag_search.errors import RagError


class ParseError(RagError):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
