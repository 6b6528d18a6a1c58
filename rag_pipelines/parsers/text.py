"""Bytes → text: tells binary data from text, and decodes text in the encoding it was saved in.

Order: a BOM (UTF-32 before UTF-16, since FF FE 00 00 starts with FF FE), BOM-less UTF-32/16 (NUL bytes
in fixed lanes), UTF-8 (a few bad bytes replaced when the rest is clearly UTF-8), then cp1252 only for
data that looks like Western text. Otherwise a ParseError: "binary" (a known binary header, NUL bytes,
control characters) or "undecodable". Every step is linear in the size of the data.
"""

from __future__ import annotations

import re

from rag_pipelines.parsers.errors import ParseError

BOMS = ((b"\x00\x00\xfe\xff", "utf-32-be"), (b"\xff\xfe\x00\x00", "utf-32-le"),
        (b"\xfe\xff", "utf-16-be"), (b"\xff\xfe", "utf-16-le"), (b"\xef\xbb\xbf", "utf-8"))
MAGIC = {  # headers of binary formats; each has bytes no text file starts with, or is a format of its own
    b"\x7fELF": "an ELF executable", b"\x89PNG": "a PNG image", b"PK\x03\x04": "a zip archive",
    b"PK\x05\x06": "a zip archive", b"%PDF-": "a PDF", b"\x1f\x8b": "gzip data", b"\xff\xd8\xff": "a JPEG image",
    b"SQLite format 3\x00": "an SQLite database", b"7z\xbc\xaf\x27\x1c": "a 7z archive",
    b"\xfd7zXZ\x00": "xz data", b"Rar!\x1a\x07": "a RAR archive",
    b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1": "an OLE document (old .doc/.xls)",
    b"\xca\xfe\xba\xbe": "a Mach-O or Java class file", b"\xfe\xed\xfa\xce": "a Mach-O executable",
    b"\xfe\xed\xfa\xcf": "a Mach-O executable", b"\xce\xfa\xed\xfe": "a Mach-O executable",
    b"\xcf\xfa\xed\xfe": "a Mach-O executable", b"\x00asm": "WebAssembly",
}
CONTROLS = bytes([*range(0, 9), *range(14, 27), *range(28, 32), 127])  # not \t \n \v \f \r, not ESC (ANSI logs)
NOT_CONTROLS = bytes(b for b in range(256) if b not in CONTROLS)
ASCII = bytes(range(128))
CP1252_UNDEFINED = re.compile(rb"[\x81\x8d\x8f\x90\x9d]")
HIGH_RUN = re.compile(rb"[\x80-\xff]{3,}")
MAX_CONTROL_SHARE = 0.05
SAMPLE = 65536  # bytes looked at to guess a BOM-less UTF-32/16
FIX = "save it as UTF-8, or exclude it from the collection"


def decode(data: bytes) -> str:
    """The text of data, newlines normalised to \\n; ParseError("binary" or "undecodable") when it is not text."""
    reason = binary_reason(data)
    if reason:
        raise ParseError("binary", f"it looks like binary data ({reason}), not text; exclude it from the collection "
                                   "or give it the suffix of its real format")
    text = _decode(data)
    return text.replace("\r\n", "\n").replace("\r", "\n")


def looks_binary(data: bytes) -> bool:
    return binary_reason(data) is not None


def binary_reason(data: bytes) -> str | None:
    """Why data is binary (a known header, NUL bytes, many control bytes), or None when it may be text."""
    for magic, what in MAGIC.items():
        if data.startswith(magic):
            return f"it starts like {what}"
    if wide_encoding(data):
        return None  # NUL bytes are part of UTF-32/16; decode() checks the decoded text
    if b"\x00" in data:
        return "it has NUL bytes"
    share = control_share(data)
    return f"{share:.0%} of it is control characters" if share > MAX_CONTROL_SHARE else None


def control_share(data: bytes) -> float:
    return len(data.translate(None, NOT_CONTROLS)) / len(data) if data else 0.0


def wide_encoding(data: bytes) -> tuple[str, int] | None:
    """(codec, BOM length) of UTF-32/16 data, by its BOM or by NUL bytes in fixed lanes; None for others."""
    for bom, codec in BOMS:
        if data.startswith(bom):
            return (codec, len(bom)) if codec != "utf-8" else None
    if len(data) < 4 or len(data) % 2:
        return None
    sample = data[: SAMPLE]
    if len(data) % 4 == 0:
        lanes = [sample[i::4].count(0) / (len(sample) // 4) for i in range(4)]
        if lanes[3] == 1 and lanes[2] > 0.9 and lanes[0] < 0.1:
            return "utf-32-le", 0
        if lanes[0] == 1 and lanes[1] > 0.9 and lanes[3] < 0.1:
            return "utf-32-be", 0
    even, odd = (sample[i::2].count(0) / (len(sample) // 2) for i in (0, 1))
    if odd > 0.3 and even < 0.05:
        return "utf-16-le", 0
    if even > 0.3 and odd < 0.05:
        return "utf-16-be", 0
    return None


def _decode(data: bytes) -> str:
    wide = wide_encoding(data)
    if wide:
        return _decode_wide(data, *wide)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    text = data.decode("utf-8", errors="replace")
    bad = text.count("\ufffd")
    multibyte = len(text) - len(text.encode("ascii", errors="ignore")) - bad
    if bad * 10 <= multibyte:  # clearly UTF-8 with a few broken bytes (a cut or a stray byte)
        return text.removeprefix("\ufeff")
    if _looks_western(data):
        return data.decode("cp1252")
    raise ParseError("undecodable", f"it is not UTF-8, UTF-16 or UTF-32 text ({bad} invalid byte sequences) and "
                                    f"does not look like Western (cp1252) text either; {FIX}")


def _decode_wide(data: bytes, codec: str, bom: int) -> str:
    try:
        text = data[bom:].decode(codec)
    except UnicodeDecodeError as exc:
        raise ParseError("undecodable", f"it looks like {codec.upper()} text but byte {exc.start + bom} is invalid "
                                        f"({exc.reason}); {FIX}") from exc
    if control_share(text.encode("utf-8", errors="surrogatepass")) > MAX_CONTROL_SHARE:
        raise ParseError("binary", f"it looks like binary data (as {codec.upper()} it is mostly control "
                                   "characters), not text; exclude it from the collection")
    return text


def _looks_western(data: bytes) -> bool:
    """Legacy Western text: every byte defined in cp1252, and accented letters mostly on their own.

    Cyrillic, Greek or CJK legacy encodings put high bytes in long runs; Western text rarely does.
    """
    if CP1252_UNDEFINED.search(data):
        return False
    high = len(data.translate(None, ASCII))
    in_runs = sum(map(len, HIGH_RUN.findall(data)))
    return in_runs * 2 <= high
