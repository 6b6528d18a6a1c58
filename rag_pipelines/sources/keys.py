"""Item path → Dagster partition key: stable, printable, bounded; rag.db keeps key → real path.

Keys are the POSIX path relative to the source root (prefixed by the root's label when a collection
has several roots), NFC-normalised, with '%', control characters and '...' percent-encoded; a key
over 512 bytes is cut and given a sha1 suffix. Paths are never rebuilt from keys.
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
        if ch == "%" or ord(ch) < 32 or ord(ch) == 127:
            out.append("".join(f"%{b:02X}" for b in ch.encode("utf-8")))
        else:
            out.append(ch)
    key = "".join(out).replace("...", "%2E%2E%2E")
    raw = key.encode("utf-8")
    if len(raw) > MAX_KEY_BYTES:
        digest = hashlib.sha1(raw).hexdigest()[:16]
        head = raw[: MAX_KEY_BYTES - 18].decode("utf-8", errors="ignore")
        key = f"{head}~{digest}"
    return key or "%00"
