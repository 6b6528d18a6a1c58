"""iCalendar (RFC 5545) bytes → calendars of events: our own tolerant content-line reader.

Why not icalendar's parser: it reads content lines character by character, about 3x slower than this reader
on a 20k-event export (bench/calendar_scale.py), and a big export is read again whenever one event in it changes.
icalendar and recurring_ical_events still do what they are best at: VTIMEZONE definitions, Windows and
vendor-prefixed TZIDs (through icalendar's tzp) and recurrence expansion (ics_instances.py).

Reading rules: a UTF-8 BOM (or a UTF-16 file) is accepted; lines are unfolded on bytes first, so a fold in the
middle of a multi-byte character joins it again; CRLF, bare LF and bare CR all end lines; TEXT escapes
(`\\n \\, \\; \\\\`) are undone; parameter values may be quoted (`CN="Doe, Jane: CEO"`). A line that is no content
line is skipped; an event without a readable DTSTART is reported (Calendar.problems) while the others are read;
a file that is not iCalendar at all or ends inside a component raises ParseError.

Events are cut out of the text as blocks first (a regular expression) and identified by a digest of their lines
(DTSTAMP aside) and of their calendar's zones; a re-read of a changed file reuses the events whose digest it
already knows, so editing one event of a 20k-event export parses one event again.
"""

from __future__ import annotations

import codecs
import hashlib
import re
import warnings
from bisect import bisect_right
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone, tzinfo
from functools import cached_property, lru_cache
from typing import Mapping

from rag_search.people import participant

from rag_pipelines.parsers.errors import ParseError

FOLD = re.compile(rb"\r\n[ \t]|\n[ \t]|\r[ \t]")
LINE = re.compile(r'([A-Za-z0-9-]+)((?:;[^:;"]*(?:"[^"]*"[^:;"]*)*)*):(.*)', re.DOTALL)
PARAM = re.compile(r';([A-Za-z0-9-]+)=((?:"[^"]*"|[^;"])*)')
ESCAPE = re.compile(r"\\(.)")
DT = re.compile(r"(\d{4})-?(\d\d)-?(\d\d)(?:T(\d\d):?(\d\d)(?::?(\d\d))?(?:[.,]\d+)?(Z)?)?")
DURATION = re.compile(r"([+-])?P(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?")
NOT_HASHED = re.compile(r"(?mi)^DTSTAMP[;:].*\n")  # an export sets it to the export time on every event: no edit
EVENT_BLOCK = re.compile(r"^BEGIN:VEVENT[ \t]*\n.*?^END:VEVENT[ \t]*(?:\n|\Z)", re.M | re.S | re.I)
CALENDAR_BEGIN = re.compile(r"^BEGIN:VCALENDAR[ \t]*$", re.M | re.I)
UNESCAPES = {"n": "\n", "N": "\n"}
NOT_A_CATEGORY = re.compile(r"(?i)(?:[a-z][a-z0-9+.-]*://|urn:)\S+$")  # a URL or URN: a schema id, not a tag
RECORDED = ("VTIMEZONE",)  # components that keep their lines


@dataclass
class Component:
    name: str
    props: dict[str, list[tuple[dict[str, str], str]]] = field(default_factory=dict)  # NAME → [(params, raw value)]
    children: list["Component"] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)  # unfolded lines, own and children's (zones only)

    def first(self, name: str) -> tuple[dict[str, str], str] | None:
        values = self.props.get(name)
        return values[0] if values else None

    def text(self, name: str) -> str:
        found = self.first(name)
        return unescape(found[1]).strip() if found else ""


@dataclass(frozen=True)
class Person:
    who: str  # participant(): 'Ann Example <ann@example.com>'
    status: str = ""  # PARTSTAT lower-cased: accepted, declined, tentative, needs-action
    role: str = ""  # ROLE lower-cased: req-participant, opt-participant, chair, non-participant
    kind: str = ""  # CUTYPE lower-cased: individual, group, room, resource


@dataclass(frozen=True)
class Event:
    """One VEVENT as read: a single event, a recurring series' master, or an override (RECURRENCE-ID)."""

    uid: str
    summary: str
    description: str
    location: str
    start: object  # date (all day), aware datetime (UTC or zoned) or naive datetime (floating)
    end: object  # the same kind, or None (none given: a DATE lasts a day, a DATE-TIME no time)
    tzid: str  # the TZID as written ('' for UTC, floating or all-day)
    status: str = ""  # CONFIRMED, TENTATIVE, CANCELLED
    organizer_prop: tuple | None = None  # (params as pairs, value) of ORGANIZER: made a Person when needed
    attendee_props: tuple = ()  # the same of each ATTENDEE
    categories: tuple[str, ...] = ()
    url: str = ""
    sequence: int = 0
    modified: str = ""  # LAST-MODIFIED as written
    recurrence_id: object = None  # the original start an override replaces (RECURRENCE-ID)
    rrule: str = ""  # RRULE as written ('' when none)
    recurring: bool = False  # has RRULE or RDATE (a master)
    recurrence_lines: tuple[str, ...] = ()  # the master's lines recurrence needs (DTSTART … EXDATE)
    digest: str = ""  # sha1 of the component's lines without DTSTAMP and of its zones: its identity
    warning: str = ""

    @cached_property
    def organizer(self) -> Person | None:
        return _person(self.organizer_prop)

    @cached_property
    def attendees(self) -> tuple[Person, ...]:
        return tuple(p for p in map(_person, self.attendee_props) if p)


@dataclass
class Calendar:
    """One VCALENDAR: its name, zone and method, its events, and the zones its TZIDs refer to."""

    name: str = ""  # X-WR-CALNAME
    tz: str = ""  # X-WR-TIMEZONE (Google: the zone UTC times are shown and repeated in)
    method: str = ""  # iTIP METHOD (REQUEST, CANCEL, REPLY, PUBLISH)
    events: list[Event] = field(default_factory=list)
    zones: dict[str, list[str]] = field(default_factory=dict)  # TZID → the VTIMEZONE's lines
    problems: list[tuple[str, str, str]] = field(default_factory=list)  # (uid, kind, message) of unreadable events
    skipped_lines: int = 0


# -- lines and components -----------------------------------------------------------------------------------


def decode(data: bytes) -> str:
    """The file's text: UTF-16 by its BOM, else UTF-8 (BOM dropped), else Windows-1252."""
    if data[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        data = data.decode("utf-16", errors="replace").encode("utf-8")
    data = FOLD.sub(b"", data.removeprefix(codecs.BOM_UTF8))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")


def content_line(line: str) -> tuple[str, dict[str, str], str] | None:
    """(NAME, {PARAM: value}, raw value) of `NAME;PARAM=v:value`; None when the line is not one.

    ';' and ':' inside a quoted parameter value (CN="Doe, Jane: CEO") do not split.
    """
    m = LINE.match(line)
    if m is None:
        return None
    name, params, value = m.groups()
    if not params:
        return name.upper(), {}, value
    return name.upper(), {k.upper(): v.replace('"', "") for k, v in PARAM.findall(params)}, value


def components(text: str) -> tuple[list[Component], int]:
    """The top-level components of the text (VCALENDARs) and how many lines were skipped as garbage.

    Events and zones keep their unfolded lines (with their alarms' and subcomponents'): change stamps and
    recurrence are made from them; calendars keep none.
    """
    top: list[Component] = []
    stack: list[Component] = []
    recording: Component | None = None  # the VEVENT or VTIMEZONE being read (they do not nest in each other)
    skipped = 0
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        parsed = content_line(line) if line else None
        if parsed is None:
            skipped += bool(line.strip())
            continue
        name, params, value = parsed
        if name == "BEGIN":
            comp = Component(value.strip().upper())
            (stack[-1].children if stack else top).append(comp)
            stack.append(comp)
            if recording is None and comp.name in RECORDED:
                recording = comp
        elif name == "END":
            closing = value.strip().upper()
            if not stack or (stack[-1].name != closing and all(c.name != closing for c in stack)):
                skipped += 1
                continue
            if recording is not None:
                recording.lines.append(line)
            while stack.pop().name != closing:
                pass  # an END that skips unclosed inner components closes them too
            if recording is not None and recording not in stack:
                recording = None
            continue
        elif stack:
            stack[-1].props.setdefault(name, []).append((params, value))
        else:
            skipped += 1
            continue
        if recording is not None:
            recording.lines.append(line)
    if stack:
        raise ParseError("corrupt", f"the file ends inside {stack[-1].name} (cut off while being written? it is "
                                    "read again when it changes)")
    return top, skipped


def unescape(value: str) -> str:
    return ESCAPE.sub(lambda m: UNESCAPES.get(m.group(1), m.group(1)), value) if "\\" in value else value


# -- calendars and events -------------------------------------------------------------------------------------


def read_calendars(data: bytes, known: Mapping[str, Event] | None = None) -> list[Calendar]:
    """Every VCALENDAR of an .ics file (a file may hold several); ParseError when it is no iCalendar at all.

    `known`: events of an earlier read of the file by digest; an event whose digest is known is not parsed again.
    """
    text = decode(data).replace("\r\n", "\n").replace("\r", "\n")
    begins = [m.start() for m in CALENDAR_BEGIN.finditer(text)]
    if not begins:
        raise ParseError("corrupt", "not an iCalendar file (no BEGIN:VCALENDAR)")
    blocks = [(m.start(), m.group(0)) for m in EVENT_BLOCK.finditer(text)]
    tops, skipped = components(EVENT_BLOCK.sub("", text))
    comps = [c for c in tops if c.name == "VCALENDAR"]
    if not comps:
        raise ParseError("corrupt", "no complete VCALENDAR in the file")
    out = [_calendar(comp, skipped) for comp in comps]
    zones = [(Zones(cal.zones), _zones_digest(cal)) for cal in out]
    for pos, block in blocks:
        n = min(bisect_right(begins, pos) - 1, len(out) - 1)
        if n < 0:
            continue  # an event before any VCALENDAR
        cal, (zone, zone_digest) = out[n], zones[n]
        digest = hashlib.sha1((zone_digest + NOT_HASHED.sub("", block)).encode("utf-8", "surrogatepass")).hexdigest()
        if known is not None and digest in known:
            cal.events.append(known[digest])
            continue
        parsed, junk = components(block)
        cal.skipped_lines += junk
        for comp in parsed:
            try:
                cal.events.append(read_event(comp, zone, digest))
            except ParseError as exc:
                cal.problems.append((comp.text("UID"), exc.kind, str(exc)))
    return out


def _calendar(comp: Component, skipped: int) -> Calendar:
    cal = Calendar(name=comp.text("X-WR-CALNAME"), tz=comp.text("X-WR-TIMEZONE"), method=comp.text("METHOD").upper(),
                   skipped_lines=skipped)
    cal.zones = {c.text("TZID"): c.lines for c in comp.children if c.name == "VTIMEZONE" and c.text("TZID")}
    return cal


def _zones_digest(cal: Calendar) -> str:
    return hashlib.sha1(repr(sorted(cal.zones.items())).encode("utf-8", "surrogatepass")).hexdigest()


def read_event(comp: Component, zones: "Zones", digest: str) -> Event:
    """One VEVENT; `digest` identifies its text (see read_calendars)."""
    start_prop = comp.first("DTSTART")
    if start_prop is None:
        raise ParseError("corrupt", f"the event '{comp.text('SUMMARY')[:80]}' has no start (DTSTART)")
    start, tzid, warning = zones.time(*start_prop)
    end = None
    if comp.first("DTEND"):
        end = zones.time(*comp.first("DTEND"))[0]
    elif comp.first("DURATION"):
        length = duration(comp.first("DURATION")[1])
        end = start + length if length is not None else None
    if end is not None and (type(end) is not type(start) or _before(end, start)):
        end = None  # a DATE end of a DATE-TIME start, or an end before the start: as if none were given
    rid = comp.first("RECURRENCE-ID")
    rrule = comp.first("RRULE")
    recurring = bool(rrule or comp.first("RDATE")) and rid is None
    organizer = comp.first("ORGANIZER")
    return Event(
        uid=comp.text("UID") or f"no-uid-{digest[:20]}", summary=" ".join(comp.text("SUMMARY").split()),
        description=_description(comp), location=" ".join(comp.text("LOCATION").split()), start=start, end=end,
        tzid=tzid, status=comp.text("STATUS").upper(), organizer_prop=_raw(organizer) if organizer else None,
        attendee_props=tuple(map(_raw, comp.props.get("ATTENDEE", []))), categories=_categories(comp),
        url=comp.text("URL"), sequence=_int(comp.text("SEQUENCE")), modified=comp.text("LAST-MODIFIED"),
        recurrence_id=zones.time(*rid)[0] if rid else None, rrule=unescape(rrule[1]).strip() if rrule else "",
        recurring=recurring, recurrence_lines=_recurrence_lines(comp) if recurring else (), digest=digest,
        warning=warning)


def _raw(prop: tuple[dict[str, str], str]) -> tuple:
    return tuple(prop[0].items()), prop[1]


def _description(comp: Component) -> str:
    """DESCRIPTION, else Outlook's X-ALT-DESC (HTML); HTML becomes text later (ics_instances), not in scans."""
    text = comp.text("DESCRIPTION")
    if not text.strip():
        alt = comp.first("X-ALT-DESC")
        text = unescape(alt[1]) if alt else ""
    return text.strip()


def _person(prop: tuple | None) -> Person | None:
    if prop is None:
        return None
    params, value = dict(prop[0]), prop[1]
    address = value.strip()
    if address.lower().startswith("mailto:"):
        address = address[7:]
    elif not address.lower().startswith("tel:"):
        address = params.get("EMAIL", "") or ("" if ":" in address else address)  # urn:uuid:… is no identity
    who = participant(unescape(params.get("CN", "")), address)
    if not who:
        return None
    return Person(who, params.get("PARTSTAT", "").lower(), params.get("ROLE", "").lower(),
                  params.get("CUTYPE", "").lower())


def _categories(comp: Component) -> tuple[str, ...]:
    """CATEGORIES values as tags; not URLs or URNs (Google's legacy `http://schemas.google.com/g/2005#event` is on
    every event of a Google export: a kind of entry, not a category anyone chose)."""
    values = (unescape(c).strip() for _, v in comp.props.get("CATEGORIES", []) for c in re.split(r"(?<!\\),", v))
    return tuple(dict.fromkeys(c for c in values if c and not NOT_A_CATEGORY.match(c)))


def _recurrence_lines(comp: Component) -> tuple[str, ...]:
    """The event's own UID, DTSTART, DTEND/DURATION, RRULE, RDATE and EXDATE lines (not its alarms')."""
    out = []
    for name in ("UID", "DTSTART", "DTEND", "DURATION", "RRULE", "RDATE", "EXDATE"):
        for params, value in comp.props.get(name, []):
            quoted = {k: f'"{v}"' if re.search(r"[:;,]", v) else v for k, v in params.items()}
            out.append(name + "".join(f";{k}={v}" for k, v in quoted.items()) + ":" + value)
    return tuple(out)


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0


def _before(a, b) -> bool:
    try:
        return a < b
    except TypeError:  # aware vs naive: no order to judge
        return False


# -- times ------------------------------------------------------------------------------------------------------


def duration(value: str) -> timedelta | None:
    m = DURATION.fullmatch(value.strip().upper())
    if not m or value.strip().upper() in ("P", "PT", "+P", "-P"):
        return None
    sign, w, d, h, mi, s = m.groups()
    length = timedelta(weeks=int(w or 0), days=int(d or 0), hours=int(h or 0), minutes=int(mi or 0),
                       seconds=int(s or 0))
    return -length if sign == "-" else length


class Zones:
    """TZID → tzinfo for one calendar: a known (IANA, Windows or vendor-prefixed) name, else its VTIMEZONE."""

    def __init__(self, definitions: dict[str, list[str]]):
        self.definitions = definitions
        self.cache: dict[str, tzinfo | None] = {}

    def zone(self, tzid: str) -> tzinfo | None:
        if tzid not in self.cache:
            self.cache[tzid] = known_zone(tzid) or self._defined(tzid)
        return self.cache[tzid]

    def _defined(self, tzid: str) -> tzinfo | None:
        lines = self.definitions.get(tzid)
        if not lines:
            return None
        import icalendar

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return icalendar.Timezone.from_ical("\r\n".join(lines)).to_tz(lookup_tzid=False)
        except Exception:  # noqa: BLE001 - a broken VTIMEZONE: its times are read as floating
            return None

    def time(self, params: dict[str, str], value: str) -> tuple[object, str, str]:
        """(Time, TZID as written, warning) of a DTSTART-like property; ParseError when it is no date."""
        raw = value.strip().split(",")[0]
        m = DT.fullmatch(raw)
        if not m:
            raise ParseError("corrupt", f"'{raw[:40]}' is not a date or date-time")
        y, mo, d, h, mi, s, utc = m.groups()
        try:
            if h is None or params.get("VALUE", "").upper() == "DATE":
                return date(int(y), int(mo), int(d)), "", ""
            naive = datetime(int(y), int(mo), int(d), int(h), int(mi), int(s or 0))
        except ValueError as exc:
            raise ParseError("corrupt", f"'{raw[:40]}' is not a valid date ({exc})") from exc
        if utc:
            return naive.replace(tzinfo=timezone.utc), "", ""
        tzid = params.get("TZID", "").strip()
        if not tzid:
            return naive, "", ""
        zone = self.zone(tzid)
        if zone is None:
            return naive, tzid, f"unknown time zone '{tzid[:60]}': read as floating time"
        return _localize(naive, zone), tzid, ""


def _localize(naive: datetime, zone: tzinfo) -> datetime:
    localize = getattr(zone, "localize", None)  # pytz zones (icalendar's VTIMEZONE builds may be)
    return localize(naive) if localize else naive.replace(tzinfo=zone)


@lru_cache(maxsize=512)
def known_zone(tzid: str) -> tzinfo | None:
    """An IANA name, a Windows name (Outlook) or a vendor-prefixed one (/mozilla.org/…/Europe/Berlin)."""
    from zoneinfo import ZoneInfo

    try:
        return ZoneInfo(tzid.strip().strip("/"))
    except (ValueError, KeyError, OSError):
        pass
    try:
        from icalendar.timezone import tzp

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return tzp.timezone(tzid)
    except Exception:  # noqa: BLE001 - any lookup failure: not a known zone
        return None
