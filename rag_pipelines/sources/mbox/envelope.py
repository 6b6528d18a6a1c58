"""mbox envelope lines (`From <sender> <date>`): which lines are one, their sender and the time they carry.

Writers differ in everything but the leading `From ` (the shapes below are from real files; tests name them):

    Google Takeout     From 1771000000000000011@xxx Tue Mar 03 08:15:00 +0000 2026
    mutt, Python       From MAILER-DAEMON Mon Jan  1 00:00:00 2024
    Thunderbird        From - Sat Jan 03 01:05:34 1996
    Mailman pipermail  From goran at domain.com  Wed Dec  1 08:26:40 2010   (the sender's '@' obfuscated)
    older MTAs         From magick-owner@host Wed Feb  9 22:02 MET 2000    (no seconds; a zone, before or after
                                                                            the year; `remote from <host>` after it)
    Exim, mboxcl       From daemon@host Sun, 11 Nov 2007 06:58:35 +0200    (an RFC 5322 date)
    any                From "Jörg Müller" <jm@beispiel.de> Mon Jan  1 …    (quoted, UTF-8 or raw 8-bit senders)

A line is an envelope when it starts with `From `, is at most MAX_LINE bytes long and holds a plausible date after
the sender, within its last DATE_WITHIN bytes: asctime (`[Day] Mon d hh:mm[:ss] [zone] yyyy [zone]`) or RFC 5322
(`[Day,] d Mon yyyy hh:mm[:ss] [zone]`), with a real month, day 1-31, hour < 24, minute < 60 and a year 1900-2199.
Body lines such as `From the desk of Carol:` or `From perl5-porters:` carry no date and are no envelopes. Whether an
envelope starts a message (the empty line before it, the header after it) is decided by mbox_index.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import NamedTuple

MAX_LINE = 1000  # bytes: a longer line is body text
DATE_WITHIN = 160  # bytes at the end of the line the date is looked for in (a date, a zone, `remote from <host>`)
MONTHS = (b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec")
_DAY = rb"(?:(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun),?[ \t]+)?"
_MONTH = rb"(?P<month>" + b"|".join(MONTHS) + rb")"
_TIME = rb"(?P<hour>\d{1,2}):(?P<minute>\d\d)(?::(?P<second>\d\d))?"
_ZONE = rb"(?:(?P<%s>[+-]\d{4})|[A-Z]{1,5}(?:[ \t]+DST)?)"
ASCTIME = re.compile(_DAY + _MONTH + rb"[ \t]+(?P<day>\d{1,2})[ \t]+" + _TIME + rb"(?:[ \t]+" + _ZONE % b"z1" +
                     rb")?[ \t]+(?P<year>\d{4})(?:[ \t]+" + _ZONE % b"z2" + rb")?(?![\w:])")
RFC5322 = re.compile(_DAY + rb"(?P<day>\d{1,2})[ \t]+" + _MONTH + rb"[ \t]+(?P<year>\d{4})[ \t]+" + _TIME +
                     rb"(?:[ \t]+" + _ZONE % b"z1" + rb")?(?![\w:])")
TAKEOUT = re.compile(rb"From (\d{1,30}@xxx) ")  # the fast path for Takeout's own lines


class Envelope(NamedTuple):
    sender: str  # as written (UTF-8, else latin-1); Takeout: the Gmail message id `<digits>@xxx`
    ts: int | None  # unix seconds (no zone: UTC); None when the date does not exist (31 Feb) or is out of range


def parse(line: bytes) -> Envelope | None:
    """The envelope of a line (its line end optional), or None when it is no envelope line."""
    line = line.rstrip(b"\r\n")
    if not line.startswith(b"From ") or len(line) > MAX_LINE:
        return None
    for pattern in (ASCTIME, RFC5322):
        for m in pattern.finditer(line, max(5, len(line) - DATE_WITHIN)):
            if line[m.start() - 1 : m.start()] in b" \t" and _plausible(m):
                return Envelope(_text(line[5 : m.start()].strip()), _time(m))
    return None


def sender(line: bytes) -> str:
    """The sender of an envelope line ('' when it is none)."""
    m = TAKEOUT.match(line)
    if m:
        return m.group(1).decode("ascii")
    env = parse(line)
    return env.sender if env else ""


def envelope_time(line: bytes) -> int | None:
    """The date of an envelope line → unix seconds; None when it is no envelope or its date is impossible."""
    env = parse(line)
    return env.ts if env else None


def _text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _plausible(m: re.Match) -> bool:
    day, hour, minute, year = (int(m.group(g)) for g in ("day", "hour", "minute", "year"))
    return 1 <= day <= 31 and hour < 24 and minute < 60 and int(m.group("second") or 0) <= 60 and 1900 <= year < 2200


def _time(m: re.Match) -> int | None:
    try:
        when = datetime(int(m.group("year")), MONTHS.index(m.group("month")) + 1, int(m.group("day")),
                        int(m.group("hour")), int(m.group("minute")), tzinfo=timezone.utc)
    except ValueError:
        return None  # 31 Feb
    when += timedelta(seconds=int(m.group("second") or 0))
    zone = next((z for z in (m.groupdict().get("z1"), m.groupdict().get("z2")) if z), None)
    if zone:
        sign = 1 if zone[:1] == b"+" else -1
        when -= sign * timedelta(hours=int(zone[1:3]), minutes=int(zone[3:5]))
    ts = int(when.timestamp())
    return ts if 0 < ts < 4102444800 else None  # 1970 … 2100, as rfc822.unix
