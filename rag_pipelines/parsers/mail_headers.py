"""Mail headers as text: RFC 2047 encoded words, addresses as `Name <addr>`, Message-IDs, forward subjects.

Shared by the mail sources (eM Client, Gmail/mbox) through parsers/mail.py and parsers/rfc822.py. Decoding is
tolerant: an encoded word that does not decode (broken base64 — Python raises HeaderParseError for it —, an
unknown charset) is kept as it is written, and the other words of the header are decoded.
"""

from __future__ import annotations

import binascii
import re
from email.errors import HeaderParseError


def format_address(name: str | None, address: str | None) -> str:
    """'Name <addr>' with the address lower-cased; just the address or just the name when one is missing."""
    name = " ".join((name or "").replace('"', "").split())
    address = (address or "").strip().strip("<>").lower()
    if name and address and name.lower() != address:
        return f"{name} <{address}>"
    return address or name


def normalise_message_id(value: str | None) -> str:
    """The Message-ID without <>, whitespace or folding; '' when there is none (also for the empty '<>')."""
    text = (value or "").strip()
    if text[:1] == "<" and text[-1:] == ">" and text.count("<") == 1 and text.count(">") == 1 and \
            len(text.split()) == 1:
        return text[1:-1]  # the usual case, without regular expressions (scans normalise every row)
    inner = re.search(r"<([^<>]*)>", text)
    if inner:
        text = inner.group(1)
    return re.sub(r"[\s<>]+", "", text)


ENCODED_WORD = re.compile(r"=\?[^?\s]+\?[bBqQ]\?[^?\s]*\?=")
BAD_ENCODING = (LookupError, UnicodeError, ValueError, binascii.Error, HeaderParseError)


def decode_header_value(value: str | None) -> str:
    """An RFC 2047 header ('=?utf-8?q?Gr=C3=BC=C3=9Fe?=') as text; an encoded word that cannot be decoded (broken
    base64, an unknown charset) is kept as it is written, and the others are decoded."""
    if not value:
        return ""
    try:
        text = _decoded(value)
        if text.strip() or not value.strip():
            return text
    except BAD_ENCODING:
        pass
    words = ENCODED_WORD.split(value)
    out = [words[0]]
    for word, after in zip(ENCODED_WORD.findall(value), words[1:]):
        out += [_word(word), after]
    return "".join(out)


def _word(word: str) -> str:
    """One encoded word as text; as written when it does not decode, or decodes to nothing (broken base64)."""
    try:
        text = _decoded(word)
    except BAD_ENCODING:
        return word
    return text if text or word.endswith("??=") else word


def _decoded(value: str) -> str:
    from email.header import decode_header, make_header

    return str(make_header(decode_header(value)))


FORWARD = re.compile(r"^\s*(fwd?|wg|tr|rv|enc|doorst|vs|vb|fs|転送)\s*[:：]", re.IGNORECASE)


def is_forward(subject: str | None) -> bool:
    """Whether a subject says the message forwards another one (its quoted part is the content)."""
    return bool(FORWARD.match(subject or ""))
