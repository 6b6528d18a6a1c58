"""The text of an iMessage `attributedBody`: the string of an NSAttributedString archived as a typedstream.

Since macOS 13 `message.text` is often NULL and the text lives only in `attributedBody`, an NSArchiver
*typedstream* (not a keyed-archiver plist; ../shared/reference/sources.md §4). The layout, as Apple writes it:

    04 0B "streamtyped" 81 E8 03          header: stream version 4, signature, system version 1000
    84 01 "@"                              the root's type: an object
    84 84 84 12 "NSAttributedString" 00    object start, its class chain (new class, new name, version) …
       84 84 08 "NSObject" 00 85           … up to NSObject, then EMPTY (end of the chain)
    92                                      a type by reference (0x92 + index into the table of seen strings): "@"
    84 84 84 08 "NSString" 01 94           the string object: class NSString, parent NSObject by reference
    84 01 "+" <length> <UTF-8 bytes> 86    its value: type "+", a length in BYTES, the bytes, END
    …                                       attribute runs ("iI" ranges, NSDictionary of attributes)

Integers (lengths included) are one byte below 0x80, else 0x81 + uint16 LE, 0x82 + uint32 LE or 0x87 + uint64 LE.
Bytes ≥ 0x92 in a type or class position are references into the tables of strings and objects seen so far.
The mutable variants (NSMutableAttributedString, NSMutableString) only lengthen the class chains.

`attributed_text` follows that structure (and raises TypedStreamError when a blob does not have it);
`text_or_none` is the same with None for an undecodable blob, which callers count.
"""

from __future__ import annotations

I16, I32, DECIMAL, START, EMPTY, END, I64, REF = 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x92
SIGNATURE = b"streamtyped"
STRINGS = (b"NSString", b"NSMutableString")
ATTRIBUTED = (b"NSAttributedString", b"NSMutableAttributedString")


def _prefix(mutable: bool) -> bytes:
    """The bytes before the text's length in the blobs Messages writes (both string variants)."""
    chain = b"\x84\x84\x19NSMutableAttributedString\x00" if mutable else b""
    string = (b"\x84\x84\x84\x0fNSMutableString\x01\x84\x84\x08NSString\x01\x95" if mutable
              else b"\x84\x84\x84\x08NSString\x01\x94")
    root = b"\x84\x84\x12NSAttributedString\x00\x84\x84\x08NSObject\x00\x85\x92"
    return b"\x04\x0bstreamtyped\x81\xe8\x03\x84\x01@\x84" + chain + root + string + b"\x84\x01+"


# the two layouts of nearly every message: read directly (the same result as the general reader, ~30x faster)
PREFIXES = (_prefix(False), _prefix(True))


class TypedStreamError(ValueError):
    """A blob that is not the typedstream of an attributed string (damaged, cut off, another class)."""


class _Reader:
    """A cursor over the stream with the two tables a typedstream refers back into."""

    __slots__ = ("data", "pos", "strings", "objects")

    def __init__(self, data: bytes):
        self.data, self.pos = data, 0
        self.strings: list[bytes] = []  # type encodings and class names, in order of first appearance
        self.objects: list[tuple[bytes, int | None] | None] = []  # classes (name, parent) and objects (None)

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise TypedStreamError(f"cut off at byte {self.pos}")
        self.pos += 1
        return self.data[self.pos - 1]

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise TypedStreamError(f"a length of {n} bytes at byte {self.pos} runs past the end ({len(self.data)})")
        self.pos += n
        return self.data[self.pos - n : self.pos]

    def uint(self) -> int:
        """An unsigned integer: one byte, or a 0x81/0x82/0x87 tag and 2/4/8 little-endian bytes."""
        tag = self.byte()
        size = {I16: 2, I32: 4, I64: 8}.get(tag)
        if size is None:
            if tag in (DECIMAL, START, EMPTY, END):
                raise TypedStreamError(f"expected an integer at byte {self.pos - 1}, found tag {tag:#04x}")
            return tag
        return int.from_bytes(self.raw(size), "little")

    def string(self) -> bytes:
        """Length-prefixed bytes (the value of a '+' type, a signature)."""
        return self.raw(self.uint())

    def shared(self) -> bytes:
        """A type encoding or class name: new (START + bytes, remembered) or a reference to one seen before."""
        tag = self.byte()
        if tag == START:
            self.strings.append(self.string())
            return self.strings[-1]
        index = tag - REF
        if 0 <= index < len(self.strings):
            return self.strings[index]
        raise TypedStreamError(f"bad string reference {tag:#04x} at byte {self.pos - 1}")

    def object_classes(self) -> list[bytes]:
        """START of an object, then its class chain; the class names from the object's own class up."""
        if self.byte() != START:
            raise TypedStreamError(f"expected an object at byte {self.pos - 1}")
        self.objects.append(None)  # the object itself takes a slot before its classes
        new: list[int] = []
        while True:
            tag = self.byte()
            if tag == START:  # a class seen for the first time: its name, its version
                name, _version = self.shared(), self.uint()
                new.append(len(self.objects))
                self.objects.append((name, None))
                continue
            parent = None if tag == EMPTY else tag - REF  # EMPTY ends the chain; else a class seen before
            if parent is not None and not (0 <= parent < len(self.objects) and self.objects[parent]):
                raise TypedStreamError(f"bad class reference {tag:#04x} at byte {self.pos - 1}")
            break
        for child, up in zip(new, new[1:] + [parent]):
            self.objects[child] = (self.objects[child][0], up)
        names, at = [], new[0] if new else parent
        while at is not None and len(names) < 64:
            name, at = self.objects[at]
            names.append(name)
        return names


def _header(r: _Reader) -> None:
    if not r.data.startswith(b"\x04\x0b" + SIGNATURE):
        raise TypedStreamError("not a typedstream (no 'streamtyped' header)")
    r.pos = 2 + len(SIGNATURE)
    if r.uint() != 1000:
        raise TypedStreamError("a typedstream of an unknown system version")


def attributed_text(blob: bytes) -> str:
    """The string of an archived NS(Mutable)AttributedString (or of a bare NS(Mutable)String)."""
    if not blob:
        raise TypedStreamError("empty blob")
    blob = bytes(blob)
    for prefix in PREFIXES:
        if blob.startswith(prefix):
            r = _Reader(blob)
            r.pos = len(prefix)
            return _utf8(r.string())
    r = _Reader(blob)
    _header(r)
    if r.shared() != b"@":
        raise TypedStreamError("the root is not an object")
    classes = r.object_classes()
    if any(c in ATTRIBUTED for c in classes):
        if r.shared() != b"@":
            raise TypedStreamError("an attributed string without its string object")
        classes = r.object_classes()
    if not any(c in STRINGS for c in classes):
        names = ", ".join(c.decode("ascii", "replace") for c in classes)
        raise TypedStreamError(f"holds {names or 'no class'}, not an attributed string")
    if r.shared() != b"+":
        raise TypedStreamError("the string object has no UTF-8 value")
    return _utf8(r.string())


def _utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TypedStreamError(f"the string is not valid UTF-8 ({exc.reason} at byte {exc.start})") from exc


def text_or_none(blob: bytes | None) -> str | None:
    """attributed_text, or None for a missing or undecodable blob."""
    if not blob:
        return None
    try:
        return attributed_text(blob)
    except TypedStreamError:
        return None
