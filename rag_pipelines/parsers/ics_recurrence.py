"""A recurring series' occurrences in a span, with bounded work whatever its rule.

recurring_ical_events (on dateutil) walks a rule from its DTSTART and lists every occurrence of the span asked for
at once: `RRULE:FREQ=SECONDLY` from 2010 steps through 5e8 times before today, and a 3-year window holds 9e7 of
them (15 minutes and 2 GB before this module). So a series is expanded under three rules:

- every span asked for is sized by the rule's density (`Rule.rate`: an upper bound of occurrences per second from
  FREQ, INTERVAL and the BY lists that multiply it), and no listing may cost more than MAX_STEPS steps;
- a simple rule (one RRULE, FREQ from SECONDLY to WEEKLY) far from its DTSTART is moved: DTSTART and DTEND advance
  by a whole number of INTERVAL periods to just before the span, on the rule's own grid, so the walk starts
  there and yields the same occurrences (a COUNT becomes the UNTIL it reaches: without BY lists the n-th occurrence
  is DTSTART + (n-1) periods);
- any other rule whose walk to the span would cost more than MAX_STEPS is not expanded there: the caller keeps its
  first occurrence, and `Recurrence.note` says why.

RDATE and EXDATE lists longer than MAX_DATES keep the values nearest to today (`note` says how many were left out).
"""

from __future__ import annotations

import heapq
import math
import re
import warnings
from dataclasses import dataclass
from functools import lru_cache
from datetime import date, datetime, time, timedelta, timezone, tzinfo

from rag_pipelines.parsers.ics import DT, Calendar, Event, _localize, known_zone, unescape

MAX_STEPS = 200_000  # times the rule library may step through to list one span of one series (~1 s)
MAX_DATES = 5_000  # RDATE (and EXDATE) values kept per series: the ones nearest to today
MOVE_ABOVE = 5_000  # a movable rule is moved when listing a span from its own DTSTART would cost more steps
PERIOD = {"SECONDLY": 1, "MINUTELY": 60, "HOURLY": 3600, "DAILY": 86400, "WEEKLY": 7 * 86400,
          "MONTHLY": 31 * 86400, "YEARLY": 366 * 86400}  # seconds, months and years at their longest
MOVABLE = ("SECONDLY", "MINUTELY", "HOURLY", "DAILY", "WEEKLY")  # periods of a fixed length in wall-clock time
TIME_PARTS = (("BYSECOND", 60), ("BYMINUTE", 3600), ("BYHOUR", 86400))  # expand a FREQ whose period is at least
DAY_PARTS = ("BYDAY", "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO", "BYMONTH")
DAYS_IN = {"WEEKLY": 7, "MONTHLY": 31, "YEARLY": 366}


@dataclass(frozen=True)
class Rule:
    """What the cost of walking one RRULE depends on."""

    freq: str
    step: timedelta  # INTERVAL periods
    per_step: int  # occurrences in one step at most
    count: int | None
    until: datetime | None  # UTC (floating and date values read as UTC: hours do not matter here)
    simple: bool  # no BY lists: every step is one occurrence

    @property
    def rate(self) -> float:
        return self.per_step / self.step.total_seconds()


def parse_rule(text: str) -> Rule | None:
    """The rule's FREQ, INTERVAL, COUNT, UNTIL and BY lists; None when it has no known FREQ."""
    parts = dict(p.split("=", 1) for p in text.upper().split(";") if "=" in p)
    freq = parts.get("FREQ", "").strip()
    if freq not in PERIOD:
        return None
    per_step = 1
    for name, period in TIME_PARTS:
        if name in parts and PERIOD[freq] >= period:
            per_step *= max(1, parts[name].count(",") + 1)
    if freq in DAYS_IN and any(p in parts for p in DAY_PARTS):
        per_step *= DAYS_IN[freq]
    return Rule(freq, timedelta(seconds=PERIOD[freq] * max(1, _int(parts.get("INTERVAL"), 1))), per_step,
                _int(parts.get("COUNT"), None), _until(parts.get("UNTIL", "")),
                not any(p.startswith("BY") for p in parts))


class Recurrence:
    """One master's recurrence lines (RDATE/EXDATE lists trimmed), listed over spans with bounded work."""

    def __init__(self, master: Event, cal: Calendar, anchor: datetime):
        self.master, self.cal = master, cal
        self.lines, self.note = trim_dates(master.recurrence_lines, anchor)
        rules = [parse_rule(unescape(ln.rpartition(":")[2])) for ln in self.lines if ln.upper().startswith("RRULE")]
        self.rules = [r for r in rules if r is not None]
        self.rate = sum(r.rate for r in self.rules)
        self.dates = sum(ln.count(",") + 1 for ln in self.lines if ln.upper().startswith("RDATE"))
        self.start = utc(master.start, None)
        self._series = None

    def steps(self, lo: datetime, hi: datetime) -> float:
        """About how many times the rule library steps through to list [lo, hi) (an upper bound)."""
        moved = self._moved(lo)
        begin = utc(self.master.start + moved[0], None) if moved else self.start
        total = float(self.dates)
        for r in self.rules:
            end = min(hi, r.until) if r.until else hi
            n = max(0.0, (end - begin).total_seconds()) * r.rate + r.per_step
            total += min(n, r.count) if r.count and r.simple and not moved else n
        return total

    def between(self, lo: datetime, hi: datetime) -> list[tuple]:
        """(start, end) of the occurrences in [lo, hi), through a series moved close to lo when that is cheaper."""
        moved = self._moved(lo)
        if moved is None:
            self._series = self._series or build_series(self.lines, self.cal)
            return [(o.start, o.end) for o in self._series.between(lo, hi)]
        series = build_series(moved_lines(self.lines, self.master, self.rules[0], *moved), self.cal)
        return [(o.start, o.end) for o in series.between(lo, hi) if utc(o.start, None) >= lo]

    def _moved(self, lo: datetime) -> tuple[timedelta, int | None] | None:
        """(how far DTSTART moves, the COUNT that becomes an UNTIL) when the rule is moved to list from lo."""
        if len(self.rules) != 1 or self.rules[0].freq not in MOVABLE or self.steps_unmoved(lo) <= MOVE_ABOVE:
            return None
        rule, start = self.rules[0], self.master.start
        if (rule.count and not rule.simple) or (not isinstance(start, datetime) and rule.step.seconds):
            return None
        periods = math.floor((_wall(lo, start) - _wall_start(start)) / rule.step) - 1
        return (periods * rule.step, rule.count) if periods > 0 else None

    def steps_unmoved(self, lo: datetime) -> float:
        rule = self.rules[0]
        n = max(0.0, (lo - self.start).total_seconds()) * rule.rate
        return min(n, rule.count) if rule.count and rule.simple else n


def trim_dates(lines: tuple[str, ...], anchor: datetime) -> tuple[tuple[str, ...], str]:
    """The lines with each of RDATE and EXDATE cut to the MAX_DATES values nearest to anchor, and a note."""
    out, notes, today = list(lines), [], anchor.date().toordinal()
    for name in ("RDATE", "EXDATE"):
        values = [(i, v) for i, ln in enumerate(lines) if ln.upper().startswith(name)
                  for v in ln.rpartition(":")[2].split(",")]  # the value holds no ':'; a quoted TZID may
        if len(values) <= MAX_DATES:
            continue
        kept: dict[int, list[str]] = {i: [] for i, _ in values}
        for i, v in sorted(heapq.nsmallest(MAX_DATES, values, key=lambda iv: abs(_day(iv[1].strip()[:8]) - today))):
            kept[i].append(v)
        for i, mine in kept.items():
            out[i] = f"{lines[i].rpartition(':')[0]}:{','.join(mine)}" if mine else ""
        notes.append(f"{len(values) - MAX_DATES} of its {len(values)} {name} dates, the ones furthest from today, "
                     "were left out")
    return tuple(ln for ln in out if ln), "; ".join(notes)


def moved_lines(lines: tuple[str, ...], master: Event, rule: Rule, delta: timedelta, count: int | None) -> tuple:
    """The lines with DTSTART and DTEND advanced by delta (wall-clock time), and COUNT made the UNTIL it reaches."""
    out = []
    for ln in lines:
        name = ln.split(";", 1)[0].split(":", 1)[0].upper()
        head, _, value = ln.rpartition(":")
        if name in ("DTSTART", "DTEND"):
            ln = f"{head}:{_shift(value, delta)}"
        elif name == "RRULE" and count:
            kept = [p for p in value.split(";") if not p.upper().startswith("COUNT=")]
            ln = f"{head}:{';'.join(kept + ['UNTIL=' + _last(master.start, rule.step * (count - 1))])}"
        out.append(ln)
    return tuple(out)


def build_series(lines: tuple[str, ...], cal: Calendar):
    """recurring_ical_events' Series of these recurrence lines (DTSTART, DTEND/DURATION, RRULE, RDATE, EXDATE)."""
    import icalendar
    import recurring_ical_events

    text = "\n".join(lines)
    zones = [ln for tzid, zlines in cal.zones.items() if tzid in text and known_zone(tzid) is None for ln in zlines]
    head = [f"X-WR-TIMEZONE:{cal.tz}"] if cal.tz and known_zone(cal.tz) else []
    body = ["BEGIN:VCALENDAR", "VERSION:2.0", *head, *zones, "BEGIN:VEVENT", *lines, "END:VEVENT", "END:VCALENDAR"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        query = recurring_ical_events.of(icalendar.Calendar.from_ical("\r\n".join(body) + "\r\n"))
    return query.series[0]


# -- times ------------------------------------------------------------------------------------------------------


def aware(t, zone: tzinfo | None) -> datetime:
    """A Time as an aware datetime: floating times and dates in `zone` (None: this computer's zone)."""
    if not isinstance(t, datetime):
        t = datetime.combine(t, time())
    if t.tzinfo is not None:
        return t
    return t.replace(tzinfo=zone) if zone is not None else t.astimezone()


def utc(t, zone: tzinfo | None) -> datetime:
    return aware(t, zone).astimezone(timezone.utc)


def _wall(t: datetime, start) -> datetime:
    """t as wall-clock time in the zone of start (floating and date starts: a day earlier, to be safe)."""
    if isinstance(start, datetime) and start.tzinfo is not None:
        return t.astimezone(start.tzinfo).replace(tzinfo=None)
    return t.replace(tzinfo=None) - timedelta(days=1)


def _wall_start(start) -> datetime:
    return start.replace(tzinfo=None) if isinstance(start, datetime) else datetime.combine(start, time())


def _shift(value: str, delta: timedelta) -> str:
    """A DATE or DATE-TIME value moved by delta, written as it was (basic form, Z kept)."""
    m = DT.fullmatch(value.strip())
    if not m:
        return value
    y, mo, d, h, mi, s, z = m.groups()
    if h is None:
        return (date(int(y), int(mo), int(d)) + delta).strftime("%Y%m%d")
    moved = datetime(int(y), int(mo), int(d), int(h), int(mi), int(s or 0)) + delta
    return moved.strftime("%Y%m%dT%H%M%S") + (z or "")


def _last(start, delta: timedelta) -> str:
    """The UNTIL of the occurrence delta after start: UTC for zoned and UTC starts, as written for the others."""
    if not isinstance(start, datetime):
        return (start + delta).strftime("%Y%m%d")
    last = start.replace(tzinfo=None) + delta
    if start.tzinfo is None:
        return last.strftime("%Y%m%dT%H%M%S")
    return _localize(last, start.tzinfo).astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def _until(value: str) -> datetime | None:
    m = DT.match(value.strip())
    if not m:
        return None
    y, mo, d, h, mi, s, _ = m.groups()
    try:
        return datetime(int(y), int(mo), int(d), int(h or 23), int(mi or 59), int(s or 59), tzinfo=timezone.utc)
    except ValueError:
        return None


@lru_cache(maxsize=4096)
def _day(value: str) -> int:
    """The day (ordinal) a DATE, DATE-TIME or PERIOD value starts on; far away when it is none."""
    m = re.match(r"\s*(\d{4})(\d\d)(\d\d)", value)
    try:
        return date(int(m.group(1)), int(m.group(2)), int(m.group(3))).toordinal() if m else -10**9
    except ValueError:
        return -10**9


def _int(text: str | None, default):
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default
