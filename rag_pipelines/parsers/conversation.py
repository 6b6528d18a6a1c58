"""Chat messages → conversation windows: the unit that chat sources (iMessage, Slack, …) index.

A conversation (a chat, a channel, a DM, a thread) is cut into windows: a new window starts after a silence
longer than `gap_seconds` (4 h by default), or when the current window already holds `max_chars` characters
or `max_messages` messages (so a window is a few chunks at most, however busy the day was).

The cut is greedy from the conversation's first message: where a window ends depends only on the messages in
and before it. New messages at the end therefore only grow the last window or open new ones; every earlier
window keeps its key and its content, and a sync re-indexes just the last window. A message that turns up in
the middle (a late sync, a deletion) re-cuts only its own session, up to the next silence.

Keys are `<conversation>/<first message's UTC time>~<first message's id>`: stable while messages arrive, and
readable (`with/+15555550100/20260302T140507Z~5F2B…`). Documents title the window with the conversation's
name and its local date range, carry one line per message (`[14:05] Ann: text`), the window's start as `ts`,
and start/end (ISO with offset, and unix seconds) and the message count as metadata. Participants are everyone
in the conversation; `authors` (metadata, so one filter row each) are the people who wrote in this window, in
the same form, which is what `--from` matches on a chat (present vs wrote: `--with` vs `--from`).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone, tzinfo
from pathlib import Path
from typing import NamedTuple, Sequence

from rag_search.records import Document, Section

KEY_SAFE = re.compile(r"[\x21-\x24\x26-\x7e]{1,120}")  # printable ASCII without space or '%'


class Stub(NamedTuple):
    """What cutting needs of a message: known at scan time, without its text."""

    id: str  # stable within the conversation: a GUID, a Slack ts
    ts: float  # unix seconds
    size: int  # characters (or UTF-8 bytes) of its text


@dataclass(frozen=True)
class WindowSpec:
    gap_seconds: float = 4 * 3600
    max_chars: int = 1500
    max_messages: int = 50


class Line(NamedTuple):
    """One message as a window shows it."""

    ts: float
    sender: str  # a name, an identifier, or the user's own label ("Me")
    text: str
    notes: tuple[str, ...] = ()  # "edited", "attachment: IMG_0001.HEIC", "3 replies", …


def split(stubs: Sequence[Stub], spec: WindowSpec = WindowSpec()) -> list[list[Stub]]:
    """The conversation's windows, in time order (messages ordered by time, then id)."""
    out: list[list[Stub]] = []
    chars, last = 0, None
    for stub in sorted(stubs, key=lambda s: (s.ts, s.id)):
        size = max(1, stub.size)
        if (not out or last is None or stub.ts - last > spec.gap_seconds
                or len(out[-1]) >= spec.max_messages or chars + size > spec.max_chars):
            out.append([])
            chars = 0
        out[-1].append(stub)
        chars, last = chars + size, stub.ts
    return out


def key_part(ident: str, limit: int = 120) -> str:
    """An identifier as a key segment: itself when short printable ASCII (no '%', '...', '/'), else `~` + sha1."""
    if KEY_SAFE.fullmatch(ident) and "..." not in ident and "/" not in ident and len(ident) <= limit:
        return ident
    return "~" + hashlib.sha1(ident.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def window_key(conversation: str, first: Stub) -> str:
    """`<conversation>/<UTC start>~<first id>`; the conversation part is already key-safe."""
    when = datetime.fromtimestamp(first.ts, timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{conversation}/{when}~{key_part(first.id, 80)}"


def render(line: Line, zone: tzinfo) -> str:
    when = datetime.fromtimestamp(line.ts, zone).strftime("%H:%M")
    notes = "".join(f" [{n}]" for n in line.notes)
    text = line.text.strip()
    return f"[{when}] {line.sender}: {text}{notes}" if text else f"[{when}] {line.sender}:{notes}"


def date_range(start: float, end: float, zone: tzinfo) -> str:
    a, b = datetime.fromtimestamp(start, zone), datetime.fromtimestamp(end, zone)
    if a.date() == b.date():
        return f"{a:%Y-%m-%d %H:%M}" if (a.hour, a.minute) == (b.hour, b.minute) else f"{a:%Y-%m-%d %H:%M}–{b:%H:%M}"
    return f"{a:%Y-%m-%d %H:%M} – {b:%Y-%m-%d %H:%M}"


def window_document(name: str, lines: Sequence[Line], zone: tzinfo, participants: Sequence[str] = (),
                    metadata: dict | None = None, tags: Sequence[str] = (), authors: Sequence[str] = ()) -> Document:
    """A window as a Document: one paragraph per message, so chunks break between messages; `authors` are the
    participants (same form) who wrote in it."""
    lines = sorted(lines, key=lambda ln: ln.ts)
    start, end = lines[0].ts, lines[-1].ts
    meta = {"start": iso(start, zone), "end": iso(end, zone), "start_ts": int(start), "end_ts": int(end),
            "messages": len(lines), "authors": sorted(set(a for a in authors if a)), **(metadata or {})}
    text = "\n\n".join(render(line, zone) for line in lines)
    return Document(title=f"{name} · {date_range(start, end, zone)}", sections=(Section(text),), ts=int(start),
                    participants=tuple(sorted(set(p for p in participants if p))), tags=tuple(tags),
                    metadata={k: v for k, v in meta.items() if v not in (None, "", [], ())})


def iso(ts: float, zone: tzinfo) -> str:
    return datetime.fromtimestamp(int(ts), zone).isoformat()


def local_zone(name: str | None = None) -> tzinfo:
    """The named IANA zone; else this machine's (TZ, /etc/localtime); UTC when neither can be read."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    name = name or os.environ.get("TZ", "").lstrip(":") or None
    if name:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            pass
    link = Path("/etc/localtime")
    try:
        target = str(link.resolve())
        if "zoneinfo/" in target:
            return ZoneInfo(target.split("zoneinfo/", 1)[1])
        with link.open("rb") as fh:
            return ZoneInfo.from_file(fh, key="localtime")
    except (OSError, ZoneInfoNotFoundError, ValueError):
        return timezone.utc
