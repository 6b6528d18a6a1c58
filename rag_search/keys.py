"""Item keys: how a file's path becomes its key (the Dagster partition key, stable, printable, bounded), and how a
path with bytes that are not UTF-8 is shown. Shared: sources make keys, the store finds items by them.

Keys are the POSIX path relative to the source root (prefixed by the root's label when a collection
has several roots), NFC-normalised, with '%', control characters and '...' percent-encoded; a byte of a
file name that is not UTF-8 (an old archive's Latin-1 `é` = 0xE9; Python hands it over as the surrogate
escape U+DCE9) is percent-encoded as that byte (`%E9`), so the key stays faithful and reversible. A key
over 512 bytes is cut and given a sha1 suffix. Paths are never rebuilt from keys: rag.db keeps key → path.
"""

from __future__ import annotations

import hashlib
import unicodedata

MAX_KEY_BYTES = 512


def path_key(relpath: str, root_label: str | None = None) -> str:
    rel = unicodedata.normalize("NFC", relpath.replace("\\", "/"))
    if root_label:
        rel = f"{unicodedata.normalize('NFC', root_label)}/{rel}"
    out = []
    for ch in rel:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 in the file name
            out.append(f"%{code - 0xDC00:02X}")
        elif ch == "%" or code < 32 or code == 127 or 0xD800 <= code <= 0xDFFF:
            out.append("".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass")))
        else:
            out.append(ch)
    key = "".join(out).replace("...", "%2E%2E%2E")
    raw = key.encode("utf-8")
    if len(raw) > MAX_KEY_BYTES:
        digest = hashlib.sha1(raw).hexdigest()[:16]
        head = raw[: MAX_KEY_BYTES - 18].decode("utf-8", errors="ignore")
        key = f"{head}~{digest}"
    return key or "%00"


def readable(path: str) -> str:
    """A path as text that can be stored and shown: bytes of a name that were not UTF-8 are read as Windows-1252
    (what they nearly always are: names from old Windows or Latin-1 archives); other text is unchanged."""
    if not any(0xD800 <= ord(ch) <= 0xDFFF for ch in path):
        return path
    return "".join(_byte_text(ord(ch) - 0xDC00) if 0xDC80 <= ord(ch) <= 0xDCFF else
                   ("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch) for ch in path)


def _byte_text(byte: int) -> str:
    try:
        return bytes([byte]).decode("cp1252")
    except UnicodeDecodeError:  # 0x81, 0x8D, 0x8F, 0x90, 0x9D: unassigned in cp1252
        return bytes([byte]).decode("latin-1")
