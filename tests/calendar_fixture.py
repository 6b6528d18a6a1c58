"""Calendar fixture: .ics files as Apple Calendar, Google, Outlook and a CalDAV cache write them (sources.md §7).

Nasty cases: a BOM and CRLF (work.ics), bare LF (google.ics); a folded DESCRIPTION with a fold inside a UTF-8
character; escaped `\\,` `\\;` `\\n`; an all-day event over three days (exclusive DTEND); UTC, TZID with VTIMEZONE
(Europe/Berlin), a Windows TZID, a custom Outlook VTIMEZONE and a floating event; DURATION instead of DTEND; a weekly
RRULE with COUNT across the European DST change with one EXDATE, one RECURRENCE-ID override (moved a day) and one
cancelled instance; an unbounded monthly RRULE (last Friday); a series that ended years before the window; a
cancelled event; three ATTENDEEs with different PARTSTATs; X-ALT-DESC HTML; a Google X-WR-TIMEZONE calendar (UTC
times, a weekly series across the US DST change, HTML description with the Meet block); an event with 60 attendees and
a room; an address in mixed case; a 300-character UID; two VCALENDARs in one file; a UTF-8 summary; a CalDAV folder
with one event per file, a hidden file, a non-.ics file, a garbage file and a file cut off mid-event.

The tests fix the clock at NOW (2026-03-15 12:00 UTC): recurring series are expanded 24 months back and 12 ahead.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

NOW = datetime(2026, 3, 15, 12, 0, tzinfo=timezone.utc)

BERLIN_TZ = """BEGIN:VTIMEZONE
TZID:Europe/Berlin
BEGIN:DAYLIGHT
TZOFFSETFROM:+0100
TZOFFSETTO:+0200
TZNAME:CEST
DTSTART:19700329T020000
RRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU
END:DAYLIGHT
BEGIN:STANDARD
TZOFFSETFROM:+0200
TZOFFSETTO:+0100
TZNAME:CET
DTSTART:19701025T030000
RRULE:FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU
END:STANDARD
END:VTIMEZONE"""

# -- UIDs and the keys the source gives their instances ------------------------------------------------------

TEAM = "team-sync-2026@example.com"
OFFSITE = "lisbon-offsite@example.com"
VENDOR = "vendor-demo@example.com"
HANDOVER = "handover-muenchen@example.com"
HTMLONLY = "html-only@example.com"
MONTHLY = "monthly-review@example.com"
SPANISH = "spanish-class-2019@example.com"
DENTIST = "dentist@example.com"
DESIGN = "7kukuqrfedlm2f9t44ujpgf3ij@google.com"
ALLHANDS = "all-hands-q1@google.com"
LONG_UID = "040000008200E00074C5B7101A82E008" + "00000000D0E8B5C3B5E1D601000000000000000010000000E2E5F5F9C3A2F54B" * 4 + \
    "outlook-long-uid-ü"
CUSTOM_TZ = "bangalore-sync@example.com"
FAMILY = "family-dinner@example.com"
MATCH = "football-match@example.com"
PLANNING = "9F3C2A71-5B0E-4E8B-9C1D-2F6A8B3E4D01"
REQUEST = "A0B1C2D3-invite-request"

TEAM_RIDS = ("20260303T090000Z", "20260310T090000Z", "20260324T090000Z", "20260407T080000Z")  # 17th EXDATE, 31st cancelled
# the last Fridays nearest to NOW's day (2026-03-15): Mar 27 (12 days), Feb 27 (16), Apr 24 (40), Jan 30 (44), May 29 (75),
# Dec 26 (79): what a cap of n instances per series keeps of the monthly review
MONTHLY_NEAREST = ("20260327T090000Z", "20260227T090000Z", "20260424T080000Z", "20260130T090000Z", "20260529T080000Z",
                   "20251226T090000Z")
DESIGN_RIDS = ("20260302T140000Z", "20260309T130000Z", "20260316T130000Z", "20260323T130000Z", "20260330T130000Z")


def long_key() -> str:
    return "~" + hashlib.sha1(LONG_UID.encode()).hexdigest()


def monthly_rids() -> list[str]:
    """Last Fridays 10:00 Berlin from March 2024 to February 2027 (the window around NOW)."""
    import calendar as cal
    from zoneinfo import ZoneInfo

    out = []
    for y, m in [(2024 + (i + 2) // 12, (i + 2) % 12 + 1) for i in range(36)]:
        last = max(d for d in range(1, cal.monthrange(y, m)[1] + 1) if cal.weekday(y, m, d) == 4)
        t = datetime(y, m, last, 10, 0, tzinfo=ZoneInfo("Europe/Berlin")).astimezone(timezone.utc)
        out.append(t.strftime("%Y%m%dT%H%M%SZ"))
    return out


EXPECTED = {
    *(f"{TEAM}/{r}" for r in TEAM_RIDS), OFFSITE, HANDOVER, HTMLONLY, *(f"{MONTHLY}/{r}" for r in monthly_rids()),
    f"{SPANISH}/20190107T170000Z", DENTIST, *(f"{DESIGN}/{r}" for r in DESIGN_RIDS), ALLHANDS, long_key(), CUSTOM_TZ,
    FAMILY, MATCH, PLANNING, REQUEST,
}


def expected(cap: int | None = None) -> set[str]:
    """The keys of the fixture's instances; with a cap below 36, only the nearest monthly reviews."""
    if cap is None or cap >= 36:
        return set(EXPECTED)
    monthly = {f"{MONTHLY}/{r}" for r in monthly_rids()}
    return (EXPECTED - monthly) | {f"{MONTHLY}/{r}" for r in MONTHLY_NEAREST[:cap]}


PROBLEMS = {"file:caldav/broken.ics", "file:caldav/truncated.ics"}


# -- writing ---------------------------------------------------------------------------------------------------


def fold(line: str) -> bytes:
    """RFC 5545 folding at 75 octets, on bytes: a fold may fall inside a multi-byte character (Outlook does it)."""
    raw, out = line.encode("utf-8"), []
    while len(raw) > 75:
        out.append(raw[:75])
        raw = raw[75:]
    out.append(raw)
    return b"\r\n ".join(out)


def ics(lines: str, *, crlf: bool = True, bom: bool = False) -> bytes:
    folded = [fold(ln) for ln in lines.strip("\n").split("\n")]
    data = (b"\r\n" if crlf else b"\n").join(folded) + (b"\r\n" if crlf else b"\n")
    if not crlf:
        data = data.replace(b"\r\n ", b"\n ")
    return (b"\xef\xbb\xbf" if bom else b"") + data


def _offsite_description() -> str:
    """Padded so that a 75-octet fold falls inside the 'é' of Café or Périgord."""
    head = "Three days in Lisbon: strategy\\, roadmap\\; and team building."
    tail = "\\nDay 1 starts at the Café Périgord near the river\\, then a walk to the office."
    for pad in range(160):
        raw = f"DESCRIPTION:{head}{' ' * pad}{tail}".encode()
        if any(raw[c] & 0xC0 == 0x80 for c in range(75, len(raw), 75)):
            return head + " " * pad + tail
    raise AssertionError("no padding puts a fold inside a character")


OFFSITE_DESCRIPTION = _offsite_description()


def attendee(cn: str, email: str, partstat: str = "ACCEPTED", extra: str = "") -> str:
    return f"ATTENDEE;CN={cn};ROLE=REQ-PARTICIPANT;PARTSTAT={partstat}{extra}:mailto:{email}"


def work_ics() -> bytes:
    return ics(f"""
BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//Apple Inc.//macOS 15.3//EN
CALSCALE:GREGORIAN
X-WR-CALNAME:Work
{BERLIN_TZ}
BEGIN:VEVENT
UID:{TEAM}
DTSTAMP:20260301T080000Z
SEQUENCE:0
SUMMARY:Team sync
DESCRIPTION:Weekly sync of the platform team: roadmap\\, incidents and hiring.
LOCATION:Room Spree\\, 3rd floor
DTSTART;TZID=Europe/Berlin:20260303T100000
DTEND;TZID=Europe/Berlin:20260303T110000
RRULE:FREQ=WEEKLY;COUNT=6
EXDATE;TZID=Europe/Berlin:20260317T100000
ORGANIZER;CN=Ann Example:mailto:ann@example.com
{attendee("Bob Stone", "bob@example.com")}
{attendee("Carol White", "carol@example.com", "DECLINED")}
{attendee("Dave Black", "dave@example.com", "TENTATIVE")}
BEGIN:VALARM
ACTION:DISPLAY
TRIGGER:-PT10M
END:VALARM
END:VEVENT
BEGIN:VEVENT
UID:{TEAM}
DTSTAMP:20260301T080000Z
SEQUENCE:1
RECURRENCE-ID;TZID=Europe/Berlin:20260324T100000
SUMMARY:Team sync (moved: offsite prep)
DESCRIPTION:Moved to Wednesday to plan the Lisbon offsite budget.
DTSTART;TZID=Europe/Berlin:20260325T110000
DTEND;TZID=Europe/Berlin:20260325T120000
ORGANIZER;CN=Ann Example:mailto:ann@example.com
{attendee("Bob Stone", "bob@example.com")}
END:VEVENT
BEGIN:VEVENT
UID:{TEAM}
DTSTAMP:20260301T080000Z
SEQUENCE:1
RECURRENCE-ID;TZID=Europe/Berlin:20260331T100000
STATUS:CANCELLED
SUMMARY:Team sync
DTSTART;TZID=Europe/Berlin:20260331T100000
DTEND;TZID=Europe/Berlin:20260331T110000
END:VEVENT
BEGIN:VEVENT
UID:{OFFSITE}
DTSTAMP:20260301T080000Z
SUMMARY:Lisbon offsite
DTSTART;VALUE=DATE:20260420
DTEND;VALUE=DATE:20260423
DESCRIPTION:{OFFSITE_DESCRIPTION}
CATEGORIES:Travel,Team
END:VEVENT
BEGIN:VEVENT
UID:{VENDOR}
DTSTAMP:20260301T080000Z
STATUS:CANCELLED
SUMMARY:Vendor demo of the zeppelin tracker
DTSTART:20260311T130000Z
DTEND:20260311T140000Z
END:VEVENT
BEGIN:VEVENT
UID:{HANDOVER}
DTSTAMP:20260301T080000Z
SUMMARY:Übergabe an das Team in München ☕ 東京
DESCRIPTION:Schlüsselübergabe und Einweisung für die neue Kaffeemaschine.
DTSTART:20260312T150000Z
DURATION:PT45M
END:VEVENT
BEGIN:VEVENT
UID:{HTMLONLY}
DTSTAMP:20260301T080000Z
SUMMARY:Budget review
DTSTART;TZID=Europe/Berlin:20260318T140000
DTEND;TZID=Europe/Berlin:20260318T150000
X-ALT-DESC;FMTTYPE=text/html:<html><body><p>Bring the <b>quarterly numbers</b> for the cloud spend.</p></body></html>
END:VEVENT
BEGIN:VEVENT
UID:{MONTHLY}
DTSTAMP:20260301T080000Z
SUMMARY:Monthly review
DESCRIPTION:Metrics\\, incidents and the error budget.
DTSTART;TZID=Europe/Berlin:20190125T100000
DTEND;TZID=Europe/Berlin:20190125T110000
RRULE:FREQ=MONTHLY;BYDAY=-1FR
END:VEVENT
BEGIN:VEVENT
UID:{SPANISH}
DTSTAMP:20190101T080000Z
SUMMARY:Spanish class
DESCRIPTION:Beginner course: irregular verbs and ordering tapas.
DTSTART;TZID=Europe/Berlin:20190107T180000
DTEND;TZID=Europe/Berlin:20190107T193000
RRULE:FREQ=WEEKLY;COUNT=10
END:VEVENT
BEGIN:VEVENT
UID:{DENTIST}
DTSTAMP:20260301T080000Z
SUMMARY:Dentist appointment
DESCRIPTION:Check-up and cleaning.
DTSTART:20260316T083000
DTEND:20260316T090000
END:VEVENT
END:VCALENDAR
""", bom=True)


def google_ics() -> bytes:
    many = "\n".join(attendee(f"Person {i:02d}", f"person{i:02d}@example.com", "NEEDS-ACTION") for i in range(1, 61))
    meet = ("-::~:~::~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:~:"
            "~::~:~::-")
    return ics(f"""
BEGIN:VCALENDAR
PRODID:-//Google Inc//Google Calendar 70.9054//EN
VERSION:2.0
CALSCALE:GREGORIAN
METHOD:PUBLISH
X-WR-CALNAME:ann@example.com
X-WR-TIMEZONE:America/New_York
BEGIN:VEVENT
DTSTART:20260302T140000Z
DTEND:20260302T150000Z
RRULE:FREQ=WEEKLY;UNTIL=20260330T130000Z;BYDAY=MO
DTSTAMP:20260314T101010Z
ORGANIZER;CN=Ann Example:mailto:Ann.Example@Example.COM
UID:{DESIGN}
{attendee("Erin Green", "erin@example.com")}
CREATED:20260201T120000Z
DESCRIPTION:<b>Agenda</b><br>Review the onboarding flow mockups and the signup funnel.<br><br>{meet}\\nJoin with Google Meet: https://meet.google.com/abc-defg-hij\\n\\nLearn more about Meet at: https://support.google.com/a/users/answer/9282720\\n\\nPlease do not edit this section.\\n{meet}
LAST-MODIFIED:20260210T120000Z
LOCATION:
SEQUENCE:0
STATUS:CONFIRMED
SUMMARY:Design review
TRANSP:OPAQUE
END:VEVENT
BEGIN:VEVENT
DTSTART:20260305T170000Z
DTEND:20260305T180000Z
DTSTAMP:20260314T101010Z
ORGANIZER;CN=Ann Example:mailto:ann@example.com
UID:{ALLHANDS}
{many}
ATTENDEE;CUTYPE=RESOURCE;ROLE=REQ-PARTICIPANT;PARTSTAT=ACCEPTED;CN=Auditorium (200):mailto:c_188abc@resource.calendar.google.com
DESCRIPTION:Quarterly all hands: results\\, the hiring plan and questions from everyone.
SEQUENCE:2
STATUS:CONFIRMED
SUMMARY:All hands Q1
END:VEVENT
END:VCALENDAR
""", crlf=False)


def outlook_ics() -> bytes:
    return ics(f"""
BEGIN:VCALENDAR
PRODID:-//Microsoft Corporation//Outlook 16.0 MIMEDIR//EN
VERSION:2.0
METHOD:PUBLISH
X-WR-CALNAME:Outlook
BEGIN:VTIMEZONE
TZID:W. Europe Standard Time
BEGIN:STANDARD
DTSTART:16011028T030000
RRULE:FREQ=YEARLY;BYDAY=-1SU;BYMONTH=10
TZOFFSETFROM:+0200
TZOFFSETTO:+0100
END:STANDARD
BEGIN:DAYLIGHT
DTSTART:16010325T020000
RRULE:FREQ=YEARLY;BYDAY=-1SU;BYMONTH=3
TZOFFSETFROM:+0100
TZOFFSETTO:+0200
END:DAYLIGHT
END:VTIMEZONE
BEGIN:VTIMEZONE
TZID:Customized Time Zone
BEGIN:STANDARD
DTSTART:16010101T000000
TZOFFSETFROM:+0530
TZOFFSETTO:+0530
END:STANDARD
END:VTIMEZONE
BEGIN:VEVENT
CLASS:PUBLIC
DESCRIPTION:
DTEND;TZID="W. Europe Standard Time":20260313T120000
DTSTART;TZID="W. Europe Standard Time":20260313T113000
DTSTAMP:20260301T090000Z
ORGANIZER;CN="Stone, Bob":mailto:bob@example.com
ATTENDEE;CN="White, Carol: Finance";RSVP=TRUE:mailto:carol@example.com
LOCATION:Microsoft Teams Meeting
SUMMARY:Procurement sign-off
UID:{LONG_UID}
X-ALT-DESC;FMTTYPE=text/html:<html><body><div>Sign the <i>procurement</i> contract for the new laptops.</div></body></html>
X-MICROSOFT-CDO-BUSYSTATUS:BUSY
END:VEVENT
BEGIN:VEVENT
DTSTART;TZID=Customized Time Zone:20260319T100000
DTEND;TZID=Customized Time Zone:20260319T110000
DTSTAMP:20260301T090000Z
SUMMARY:Bangalore sync
DESCRIPTION:Sync with the Bangalore office about the release train.
UID:{CUSTOM_TZ}
END:VEVENT
END:VCALENDAR
""")


def two_calendars_ics() -> bytes:
    return ics(f"""
BEGIN:VCALENDAR
VERSION:2.0
X-WR-CALNAME:Family
BEGIN:VEVENT
UID:{FAMILY}
DTSTAMP:20260301T080000Z
SUMMARY:Dinner at grandma's
DTSTART;TZID=Europe/Berlin:20260314T190000
DTEND;TZID=Europe/Berlin:20260314T220000
END:VEVENT
END:VCALENDAR
BEGIN:VCALENDAR
VERSION:2.0
X-WR-CALNAME:Sports
BEGIN:VEVENT
UID:{MATCH}
DTSTAMP:20260301T080000Z
SUMMARY:Football match: Hertha vs Union
DTSTART;TZID=Europe/Berlin:20260321T153000
DTEND;TZID=Europe/Berlin:20260321T173000
END:VEVENT
END:VCALENDAR
""")


def caldav_event(uid: str, body: str, method: str = "") -> bytes:
    head = f"METHOD:{method}\n" if method else ""
    return ics(f"BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:-//CALDAV//EN\n{head}BEGIN:VEVENT\nUID:{uid}\n"
               f"DTSTAMP:20260301T080000Z\n{body.strip()}\nEND:VEVENT\nEND:VCALENDAR")


PLANNING_BODY = f"""
SUMMARY:Quarterly planning with Ann
DESCRIPTION:Capacity planning for Q2 and the offsite agenda.
DTSTART;TZID=Europe/Berlin:20260310T140000
DTEND;TZID=Europe/Berlin:20260310T160000
ORGANIZER;CN=Frank Blue:mailto:frank@example.com
{attendee("Ann Example", "ann@personal.example")}
"""

REQUEST_BODY = """
SUMMARY:Coffee with Frank
DTSTART:20260317T080000Z
DTEND:20260317T083000Z
ATTENDEE;CN=Frank Blue;EMAIL=frank@example.com:urn:uuid:5f1c0b9e-frank
"""


@dataclass
class Fixture:
    root: Path  # the folder given as the source's path
    work: Path
    google: Path
    outlook: Path
    two: Path
    caldav: Path


def build(root: Path) -> Fixture:
    root.mkdir(parents=True, exist_ok=True)
    files = {"work.ics": work_ics(), "google.ics": google_ics(), "outlook.ics": outlook_ics(),
             "two-calendars.ics": two_calendars_ics(), "notes.txt": b"not a calendar"}
    caldav = root / "caldav"
    caldav.mkdir(exist_ok=True)
    files |= {f"caldav/{PLANNING}.ics": caldav_event(PLANNING, PLANNING_BODY),
              f"caldav/{REQUEST}.ics": caldav_event(REQUEST, REQUEST_BODY, "REQUEST"),
              "caldav/.hidden.ics": caldav_event("hidden@example.com", "SUMMARY:hidden\nDTSTART:20260301T100000Z"),
              "caldav/broken.ics": b"\x89PNG\r\n\x1a\n\x00\x00 this is no calendar \xff\xfe",
              "caldav/truncated.ics": caldav_event("cut@example.com", "SUMMARY:Cut off\nDTSTART:20260301T100000Z")[:-60]}
    for rel, data in files.items():
        (root / rel).write_bytes(data)
    return Fixture(root, root / "work.ics", root / "google.ics", root / "outlook.ics", root / "two-calendars.ics", caldav)


def text_of(path: Path) -> str:
    """The file's text, unfolded on bytes first (a fold may split a UTF-8 character)."""
    import re

    return re.sub(rb"\r?\n[ \t]", b"", path.read_bytes()).decode("utf-8-sig")


def replace_in(path: Path, old: str, new: str) -> None:
    """Edit an .ics file as an app would (the result is written unfolded, which readers accept)."""
    text = text_of(path)
    assert old in text, old
    path.write_bytes(text.replace(old, new).encode("utf-8"))


def remove_event(path: Path, uid: str) -> None:
    """Delete every VEVENT of a UID (the master and its overrides) from a file."""
    import re

    text = text_of(path)
    events = re.compile(r"BEGIN:VEVENT\r?\n.*?END:VEVENT\r?\n", re.S)
    kept = events.sub(lambda m: "" if re.search(rf"^UID:{re.escape(uid)}\r?$", m.group(0), re.M) else m.group(0), text)
    assert kept != text, uid
    path.write_bytes(kept.encode("utf-8"))


def hash_tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*"))
            if p.is_file()}
