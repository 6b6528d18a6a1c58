"""An mbox file's table of contents, kept current without re-reading the file: where each message is, and its headers.

A Takeout mbox is one file of many GB that only grows between exports. The table of contents (Toc) holds, per
message, (offset, length, Message-ID, X-GM-THRID, X-Gmail-Labels, stamp) and the file's identity (size, mtime,
inode, a hash of its first KB and of the KB before its end). `update(path, toc)` brings a Toc up to date:

    same size, mtime and inode            → nothing is read;
    grown, same inode, first and last KB  → only the new bytes are parsed (2 KB more are read to check the
      of the old size unchanged             prefix); when they do not start a message, the old last message
                                            is parsed again with them (it was still being written);
    anything else (a new export, a shrink) → the whole file is parsed again.

Tocs live in memory (per process) and in a sidecar SQLite file under the local-rag home (`cache/mbox-toc.sqlite`),
so `local-rag index gmail` in a fresh process does not re-read a file that did not change. The sidecar is a cache:
when it cannot be read or written, the file is parsed instead.

Message boundaries: an envelope line (`From <sender> <date>`, any of the shapes mbox_envelope reads: Takeout,
mutt, Thunderbird, Mailman's pipermail archives, ...) at the start of the file or after an empty line, followed by
a header line (`Name: value`); Takeout's `From 1234567890@xxx Thu Jan 01 00:00:00 +0000 2026` form is accepted
without the empty line. A body line that starts with `From ` but carries no date (`From the desk of Carol:`), or
follows a non-empty line, or is not followed by a header, does not start a message; `>From ` lines never do.
Lengths exclude the blank line that separates messages (at most 4 CR/LF bytes), so a message's length does not
depend on what is appended after it. CRLF and LF files alike.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, NamedTuple

from rag_pipelines.parsers.mail_headers import decode_header_value, normalise_message_id
from rag_pipelines.sources.mbox import envelope as mbox_envelope

FORMAT = 2  # of the sidecar's rows: bump when Rec or its parsing changes (old tables are then ignored)
BLOCK = 8 * 1024 * 1024  # bytes read at a time
SAMPLE = 1024  # bytes hashed at the start and before the end of the file
HEADER_MAX = 64 * 1024  # a header block longer than this is cut (its stamp still covers what was kept)
LOOK_BEHIND = 8  # bytes kept before a candidate From_ line (the blank-line check and the length trim need 4)
DAYS = rb"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
MONTHS = rb"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
TAKEOUT_FROM = re.compile(rb"From \d{1,30}@xxx " + DAYS + b" " + MONTHS + rb" [ \d]?\d \d\d:\d\d:\d\d(?: [+-]\d{4})? \d{4}\r?\n")
HEADER_LINE = re.compile(rb"[\x21-\x39\x3b-\x7e]{1,200}[ \t]*:")  # `Name:` (the line after an envelope)
WANTED = re.compile(rb"^(message-id|x-gm-thrid|x-gmail-labels|date|from|subject)[ \t]*:[ \t]*(.*(?:\r?\n[ \t].*)*)",
                    re.IGNORECASE | re.MULTILINE)  # a header and its continuation lines
FOLD = re.compile(rb"\r?\n(?=[ \t])")
GZIP = "it is gzip-compressed"  # a NotMbox reason


class NotMbox(Exception):
    """The file (or the bytes appended to it) does not start with an envelope line; the message says why."""

    def __init__(self, message: str, read: int = 0):
        super().__init__(message)
        self.read = read  # bytes read before finding out


class Rec(NamedTuple):  # a tuple: a Toc holds one per message (100k+)
    offset: int  # of the From_ line
    length: int  # From_ line to the end of the message, the separating blank line excluded
    mid: str  # normalised Message-ID; '' when none
    thread: str  # X-GM-THRID
    labels: tuple[str, ...]  # X-Gmail-Labels, decoded, in their order
    nomid: str  # without a Message-ID: a hash of Date, From, Subject and thread; else ''
    stamp: str  # hash of the header block and the length: changes when labels (or anything) change
    gmail_id: str  # the envelope's sender (Takeout: the Gmail message id, `<digits>@xxx`)


@dataclass
class Toc:
    path: str
    size: int = 0
    mtime_ns: int = 0
    inode: int = 0
    head: str = ""  # hash of the first min(SAMPLE, size) bytes
    tail: str = ""  # hash of the min(SAMPLE, size) bytes before `size`
    records: list[Rec] = field(default_factory=list)


@dataclass
class Update:
    """How a Toc was brought up to date (for status, benches and tests)."""

    mode: str  # unchanged | grown | full
    parsed_from: int = 0  # offset where parsing started (grown: the old size, or the old last message)
    bytes_parsed: int = 0  # bytes read to find messages
    bytes_checked: int = 0  # bytes read to check that the old prefix is unchanged
    new: int = 0  # records added


def update(path: Path, toc: Toc | None) -> tuple[Toc, Update]:
    """The file's current Toc, re-using `toc` (same path) as far as the file allows. Raises OSError, NotMbox."""
    st = os.stat(path)
    if toc and (toc.size, toc.mtime_ns, toc.inode) == (st.st_size, st.st_mtime_ns, st.st_ino):
        return toc, Update("unchanged")
    with open(path, "rb", buffering=0) as fh:
        if toc and toc.records and st.st_ino == toc.inode and st.st_size > toc.size:
            grown = _grow(fh, toc, st)
            if grown:
                return grown
        records, parsed = parse(fh, 0, st.st_size, first=True)
        head, tail, _ = _samples(fh, st.st_size)
    return Toc(str(path), st.st_size, st.st_mtime_ns, st.st_ino, head, tail, records), \
        Update("full", 0, parsed, 0, len(records))


def _grow(fh: BinaryIO, toc: Toc, st: os.stat_result) -> tuple[Toc, Update] | None:
    """The Toc of a file that grew after `toc.size` bytes that did not change; None when they changed."""
    head, tail, checked = _samples(fh, toc.size)
    if (head, tail) != (toc.head, toc.tail):
        return None
    records, start, wasted = list(toc.records), toc.size, 0
    line_end = os.pread(fh.fileno(), 1, toc.size - 1) == b"\n"
    try:
        if not line_end and os.pread(fh.fileno(), 1, toc.size) not in (b"\r", b"\n"):
            raise NotMbox("the appended bytes continue the last line", 1)
        new, parsed = parse(fh, start, st.st_size, first=True)
    except NotMbox as exc:  # the new bytes do not start a message: the old last one was being written
        start, wasted = records.pop().offset, exc.read
        new, parsed = parse(fh, start, st.st_size, first=True)
    if toc.size >= SAMPLE:  # the first KB is the one just checked
        last = os.pread(fh.fileno(), SAMPLE, st.st_size - SAMPLE)
        tail, more = _h(last), len(last)
    else:
        head, tail, more = _samples(fh, st.st_size)
    out = Toc(toc.path, st.st_size, st.st_mtime_ns, st.st_ino, head, tail, records + new)
    return out, Update("grown", start, parsed + wasted, checked + more + 1, len(new))


def _samples(fh: BinaryIO, size: int) -> tuple[str, str, int]:
    """(hash of the first KB, hash of the KB before `size`, bytes read)."""
    n = min(SAMPLE, size)
    first = os.pread(fh.fileno(), n, 0)
    last = os.pread(fh.fileno(), n, size - n)
    return _h(first), _h(last), len(first) + len(last)


def _h(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=12).hexdigest()


# -- parsing ------------------------------------------------------------------------------------------------


def parse(fh: BinaryIO, start: int, end: int, first: bool) -> tuple[list[Rec], int]:
    """Records of the messages in [start, end) and the bytes read; the region must start with a From_ line."""
    found: list[tuple[int, int, bytes, bytes]] = []  # (offset, previous message's end, From_ line, header)
    fh.seek(start)
    base, data, lo, read = start, b"", 0, 0
    while True:
        want = max(BLOCK, 2 * HEADER_MAX) if first else BLOCK  # the first message's header in the first read
        chunk = fh.read(min(want, end - base - len(data))) if base + len(data) < end else b""
        read += len(chunk)
        data += chunk
        final = base + len(data) >= end or not chunk
        if first:
            try:
                lo = _first_separator(data, final, found, base)
            except NotMbox as exc:
                exc.read = read
                raise
            first = False
        resume = _separators(data, lo, final, found, base)
        if final:
            break
        keep = max(0, resume - LOOK_BEHIND)
        base, data, lo = base + keep, data[keep:], resume - keep
    if not found:
        return [], read
    ends = [f[1] for f in found[1:]] + [base + _trim(data, len(data))]
    return [_record(o, e, line, header) for (o, _, line, header), e in zip(found, ends)], read


def _first_separator(data: bytes, final: bool, found: list, base: int) -> int:
    """The region's first message (after blank lines); NotMbox when it does not start with an envelope line."""
    i = 0
    while i < len(data) and data[i] in b"\r\n":
        i += 1
    if i == len(data) and final:
        return i  # only blank lines: no message
    end = _envelope_end(data, i, True, final)
    if end < 0:
        raise NotMbox(not_mbox_reason(data, i))
    found.append((base + i, base, data[i:end], _header(data, end, final)))
    return end


def _separators(data: bytes, lo: int, final: bool, found: list, base: int) -> int:
    """Append the messages starting in data[lo:]; the index to resume from once more data is there."""
    i = lo
    while True:
        j = data.find(b"\nFrom ", i)
        if j < 0:
            return max(lo, len(data) - 6)  # '\nFrom' may be cut at the end of data
        nl = data.find(b"\n", j + 1)
        if nl < 0 or (not final and len(data) - nl < HEADER_MAX and data.find(b"\n\n", nl) < 0
                      and data.find(b"\n\r\n", nl) < 0):
            if not final:
                return j  # the From_ line or its header goes on in the next block
        blank = data[j - 1 : j] == b"\n" or data[j - 2 : j] == b"\n\r"
        end = _envelope_end(data, j + 1, blank, final)
        if end >= 0:
            found.append((base + j + 1, base + _trim(data, j + 1), data[j + 1 : end], _header(data, end, final)))
            i = end
        else:
            i = j + 1


def _envelope_end(data: bytes, i: int, blank_before: bool, final: bool) -> int:
    """Where the envelope line at data[i] ends (after its line end) when it starts a message, else -1."""
    takeout = TAKEOUT_FROM.match(data, i)
    if takeout:
        return takeout.end()
    nl = data.find(b"\n", i, i + mbox_envelope.MAX_LINE + 2)
    if not blank_before or nl < 0:
        return -1
    if not (HEADER_LINE.match(data, nl + 1) or (final and not data[nl + 1 : nl + 6].strip() and len(data) <= nl + 5)):
        return -1  # checked first: cheaper than looking for a date
    return nl + 1 if mbox_envelope.parse(data[i:nl]) is not None else -1


def not_mbox_reason(data: bytes, i: int = 0) -> str:
    """Why data[i:] does not start an mbox, in words (the message of NotMbox)."""
    if data[i : i + 2] == b"\x1f\x8b":
        return GZIP
    line = data[i : i + 200].split(b"\n", 1)[0].rstrip(b"\r")
    shown = f"'{line[:80].decode('utf-8', 'backslashreplace')}'" + ("…" if len(line) > 80 else "")
    if not line.startswith(b"From "):
        return f"it does not start with a `From ` envelope line (its first line is {shown})"
    if mbox_envelope.parse(line) is None:
        return f"its first line {shown} is no mbox envelope line (no date after the sender)"
    return f"no header line follows its first line {shown}"


def _header(data: bytes, start: int, final: bool) -> bytes:
    """The header block starting at data[start] (to its blank line, at most HEADER_MAX bytes)."""
    crlf = data[start - 2 : start] == b"\r\n"  # as the From_ line ends; the other form only when that finds none
    for blank, keep in ((b"\r\n\r\n", 2), (b"\n\n", 1)) if crlf else ((b"\n\n", 1), (b"\r\n\r\n", 2)):
        end = data.find(blank, start, start + HEADER_MAX)
        if end >= 0:
            return data[start : end + keep]
    return data[start : start + HEADER_MAX]


def _trim(data: bytes, end: int) -> int:
    """end minus the CR/LF bytes before it (at most 4: one blank line and the line end before it)."""
    k = end
    while k > max(0, end - 4) and data[k - 1] in b"\r\n":
        k -= 1
    return k


def _record(offset: int, end: int, line: bytes, header: bytes) -> Rec:
    length = max(end - offset, len(line.rstrip()))
    header = header[: max(0, length - len(line))]
    fields: dict[str, str] = {}
    for name, value in WANTED.findall(header):
        fields.setdefault(name.decode().lower(), FOLD.sub(b"", value).decode("latin-1").strip())
    mid = normalise_message_id(_text(fields.get("message-id", "")))
    thread = fields.get("x-gm-thrid", "").strip()
    nomid = "" if mid else hashlib.sha1("\x00".join(
        fields.get(k, "") for k in ("date", "from", "subject", "x-gm-thrid")).encode("latin-1", "replace")).hexdigest()[:20]
    stamp = hashlib.blake2b(header + b"%d" % length, digest_size=10).hexdigest()
    return Rec(offset, length, mid, thread, labels(fields.get("x-gmail-labels", "")), nomid, stamp,
               mbox_envelope.sender(line))


def still(raw: bytes, rec: Rec) -> bool:
    """Whether bytes read at rec.offset (rec.length of them) still are rec's message: its From_ line and stamp."""
    nl = raw.find(b"\n")
    line = raw[: nl + 1]
    if len(raw) != rec.length or nl < 0 or not (TAKEOUT_FROM.fullmatch(line) or mbox_envelope.parse(line)):
        return False
    return _record(rec.offset, rec.offset + len(raw), line, _header(raw, nl + 1, True)).stamp == rec.stamp


def labels(value: str) -> tuple[str, ...]:
    """X-Gmail-Labels (as read, latin-1) → labels: CSV (quoted when they hold commas), encoded words decoded."""
    import csv

    text = _text(value)
    if "=?" in text:
        text = decode_header_value(text)
    if '"' not in text:
        parts = text.split(",")
    else:
        parts = next(csv.reader([text], skipinitialspace=True), [])
    return tuple(dict.fromkeys(p for p in (" ".join(x.split()) for x in parts) if p))


def _text(value: str) -> str:
    """A header value read as latin-1 → text: UTF-8 when its bytes are UTF-8 (8-bit headers), else as it is."""
    if value.isascii():
        return value
    raw = value.encode("latin-1")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("cp1252", errors="replace")


# -- the sidecar -------------------------------------------------------------------------------------------


class Sidecar:
    """Tocs in an SQLite file of their own (a cache: any failure to read or write it is ignored)."""

    def __init__(self, path: Path | None):
        self.path = path

    def _connect(self) -> sqlite3.Connection:
        assert self.path is not None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=10)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.executescript(
            "CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, format INTEGER, size INTEGER, mtime_ns INTEGER, "
            "inode INTEGER, head TEXT, tail TEXT);"
            "CREATE TABLE IF NOT EXISTS messages (path TEXT, offset INTEGER, length INTEGER, mid TEXT, thread TEXT, "
            "labels TEXT, nomid TEXT, stamp TEXT, gmail_id TEXT, PRIMARY KEY (path, offset)) WITHOUT ROWID;")
        return conn

    def load(self, path: str) -> Toc | None:
        if self.path is None or not self.path.exists():
            return None
        try:
            conn = self._connect()
            try:
                row = conn.execute("SELECT size, mtime_ns, inode, head, tail FROM files WHERE path = ? AND format = ?",
                                   (path, FORMAT)).fetchone()
                if row is None:
                    return None
                rows = conn.execute("SELECT offset, length, mid, thread, labels, nomid, stamp, gmail_id FROM messages "
                                    "WHERE path = ? ORDER BY offset", (path,)).fetchall()
            finally:
                conn.close()
        except sqlite3.Error:
            return None
        recs = [Rec(o, n, m, t, tuple(lb.split("\n")) if lb else (), nm, s, g) for o, n, m, t, lb, nm, s, g in rows]
        return Toc(path, row[0], row[1], row[2], row[3], row[4], recs)

    def save(self, toc: Toc, keep_before: int) -> None:
        """Store toc: rows before offset `keep_before` are already stored (0: replace them all)."""
        if self.path is None:
            return
        try:
            conn = self._connect()
            try:
                with conn:
                    conn.execute("DELETE FROM messages WHERE path = ? AND offset >= ?", (toc.path, keep_before))
                    conn.executemany("INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", (
                        (toc.path, r.offset, r.length, r.mid, r.thread, "\n".join(r.labels), r.nomid, r.stamp,
                         r.gmail_id) for r in toc.records if r.offset >= keep_before))
                    conn.execute("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?)",
                                 (toc.path, FORMAT, toc.size, toc.mtime_ns, toc.inode, toc.head, toc.tail))
            finally:
                conn.close()
        except (sqlite3.Error, OSError):
            pass  # a cache: the next process parses the file again
