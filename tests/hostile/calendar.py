"""Hostile calendars: recurrence rules whose naive expansion walks or lists hundreds of millions of occurrences.

Before ics_recurrence.py, `RRULE:FREQ=SECONDLY` without an end ran 15 minutes into the timeout at 2.1 GB RSS
(recurring_ical_events walks from DTSTART and lists a whole span at once). Each shape is one .ics file with one
such series; the run must index `max_instances` (500 by default) occurrences nearest to today, or — for a rule
too dense to expand near today — its first occurrence with a warning, in seconds.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from . import Shape

CAP = 500  # max_instances by default: what `local-rag index calendar --path F` keeps per series

ALL_SECONDS = ",".join(map(str, range(60)))


def ics(uid: str, dtstart: str, rule_lines: str, summary: str) -> bytes:
    return ("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//local-rag tests//hostile//EN\r\nBEGIN:VEVENT\r\n"
            f"UID:{uid}\r\nDTSTAMP:20260101T000000Z\r\nDTSTART:{dtstart}\r\nSUMMARY:{summary}\r\n{rule_lines}"
            "END:VEVENT\r\nEND:VCALENDAR\r\n").encode()


def _recent() -> str:
    return (datetime.now(timezone.utc) - timedelta(days=3)).strftime("%Y%m%dT%H%M%SZ")


def _writer(name: str, uid: str, dtstart, rule_lines: str, summary: str):
    def build(folder: Path) -> list[str]:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{name}.ics"
        path.write_bytes(ics(uid, dtstart() if callable(dtstart) else dtstart, rule_lines, summary))
        return ["calendar", "--path", str(path)]
    return build


def _rdate_flood(folder: Path) -> list[str]:
    """300,000 RDATE values, one an hour from 2000 to 2034, on 3,000 lines of 100."""
    folder.mkdir(parents=True, exist_ok=True)
    first = datetime(2000, 1, 1, 9)
    values = [(first + timedelta(hours=i)).strftime("%Y%m%dT%H%M%SZ") for i in range(300_000)]
    lines = "".join(f"RDATE:{','.join(values[i:i + 100])}\r\n" for i in range(0, len(values), 100))
    path = folder / "rdate-flood.ics"
    path.write_bytes(ics("rdate-flood@example.com", "20000101T090000Z", lines, "Hourly extra dates"))
    return ["calendar", "--path", str(path)]


SHAPES = [
    Shape("ics-secondly-old", "FREQ=SECONDLY, no end, DTSTART 2010: 5e8 occurrences before today",
          _writer("secondly-old", "secondly-old@example.com", "20100101T000000Z", "RRULE:FREQ=SECONDLY\r\n",
                  "Every second since 2010"), {"indexed": CAP}),
    Shape("ics-secondly-recent", "FREQ=SECONDLY, no end, DTSTART three days ago: 9e7 occurrences in the window",
          _writer("secondly-recent", "secondly-recent@example.com", _recent, "RRULE:FREQ=SECONDLY\r\n",
                  "Every second since Monday"), {"indexed": CAP}),
    Shape("ics-minutely", "FREQ=MINUTELY from 1990, no end",
          _writer("minutely", "minutely@example.com", "19900101T000000Z", "RRULE:FREQ=MINUTELY\r\n",
                  "Every minute"), {"indexed": CAP}),
    Shape("ics-count-huge", "FREQ=SECONDLY;COUNT=1000000000 from 2010 (ends in 2041)",
          _writer("count-huge", "count-huge@example.com", "20100101T000000Z",
                  "RRULE:FREQ=SECONDLY;COUNT=1000000000\r\n", "A billion seconds"), {"indexed": CAP}),
    Shape("ics-until-far", "FREQ=MINUTELY;INTERVAL=7 from 1970 until 9999",
          _writer("until-far", "until-far@example.com", "19700101T000000Z",
                  "RRULE:FREQ=MINUTELY;INTERVAL=7;UNTIL=99991231T235959Z\r\n", "Until the end of time"),
          {"indexed": CAP}),
    Shape("ics-bysecond-list", "FREQ=MINUTELY;BYSECOND=0,...,59 from 2010: every second, spelled as a list",
          _writer("bysecond", "bysecond@example.com", "20100101T000000Z",
                  f"RRULE:FREQ=MINUTELY;BYSECOND={ALL_SECONDS}\r\n", "Sixty a minute"), {"indexed": CAP}),
    Shape("ics-yearly-every-second", "FREQ=YEARLY with BYMONTH, BYHOUR, BYMINUTE and BYSECOND lists from 1900, "
          "COUNT=10^9: not movable, so only its first occurrence (with a warning)",
          _writer("yearly-seconds", "yearly-seconds@example.com", "19000101T000000Z",
                  "RRULE:FREQ=YEARLY;COUNT=1000000000;BYMONTH=1,2,3,4,5,6,7,8,9,10,11,12;"
                  f"BYHOUR={','.join(map(str, range(24)))};BYMINUTE={ALL_SECONDS};BYSECOND={ALL_SECONDS}\r\n",
                  "Every second of every year"), {"indexed": 1}),
    Shape("ics-rdate-flood", "300,000 RDATE values (one an hour, 2000-2034) on one event", _rdate_flood,
          {"indexed": CAP}),
]
