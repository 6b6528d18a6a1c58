"""Events of a calendar → event instances in a bounded window, and an instance → Document.

A single event is one instance whatever its date. A recurring series (RRULE/RDATE on its master) is expanded by
recurring_ical_events (RRULE, RDATE, EXDATE, DST, X-WR-TIMEZONE) over the window only, and at most `cap`
instances are kept — the ones nearest to the window's anchor (today) — so an unbounded daily rule stays small.
The work is bounded too, whatever the rule (ics_recurrence.py): a rule too dense to expand near today keeps its
first occurrence, with a warning that says why.
Overrides (RECURRENCE-ID) replace the instance they name; cancelled ones (STATUS:CANCELLED, the whole series when
its master is cancelled, every event of a METHOD:CANCEL calendar) and EXDATEs are not instances. A series with
no instance in the window keeps one, its first, so an old series stays findable. RANGE=THISANDFUTURE overrides
are applied to their own instance only.

Instance ids (the recurrence id) are the original start in basic ISO: `20260310T090000Z` (UTC) for zoned and UTC
times, `20260310T090000` for floating ones, `20260310` for all-day ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone, tzinfo

from rag_search.records import Document, Section

from rag_pipelines.parsers.ics import Calendar, Event
from rag_pipelines.parsers.ics_recurrence import MAX_STEPS, Recurrence, aware, utc

MAX_NAMED = 50  # attendees named in the text; all of them are participants
ROOMS = ("room", "resource")
GOOGLE_BLOCK = re.compile(r"-::~[:~]{10,}::-")  # fences Google's "Join with Google Meet" text in descriptions
CALL_LINK = re.compile(r"https://(?:meet\.google\.com|[\w.-]*zoom\.us|teams\.microsoft\.com)/[^\s<>\"']+")


@dataclass(frozen=True)
class Window:
    """Where recurring series are expanded: [start, end) around anchor (today, UTC), at most cap per series."""

    start: datetime
    end: datetime
    anchor: datetime
    cap: int


@dataclass(frozen=True)
class CalendarInfo:
    """What every instance of one calendar shares: its name and the zone its times are shown in."""

    name: str
    zone: tzinfo | None  # floating times and all-day dates are in it; None = this computer's zone
    zone_name: str


@dataclass(frozen=True)
class Instance:
    event: Event  # the master (or single event) or the override it is made from
    start: object  # Time
    end: object  # Time
    rid: str  # '' for a single event
    recurring: bool
    calendar: CalendarInfo
    warning: str = ""


class Expansions:
    """Series already expanded (by master digest, window and calendar zone): a file read again after an edit, or
    with a new window, reuses them; only what the latest read used is kept."""

    def __init__(self, previous: "Expansions | None" = None):
        self.previous = previous.used if previous is not None else {}
        self.used: dict[tuple, tuple[list[tuple], str]] = {}

    def get(self, key: tuple, compute) -> tuple[list[tuple], str]:
        if key not in self.used:
            self.used[key] = self.previous[key] if key in self.previous else compute()
        return self.used[key]


def instances(cal: Calendar, window: Window, info: CalendarInfo,
              expansions: Expansions | None = None) -> list[Instance]:
    """Every instance of the calendar's events to index (see the module docstring for the rules)."""
    expansions = expansions if expansions is not None else Expansions()
    if cal.method == "CANCEL":
        return []
    masters: dict[str, list[Event]] = {}
    overrides: dict[str, dict[str, Event]] = {}
    for ev in cal.events:
        if ev.recurrence_id is None:
            masters.setdefault(ev.uid, []).append(ev)
        else:
            rid, known = rid_text(ev.recurrence_id), overrides.setdefault(ev.uid, {})
            if rid not in known or _rank(ev) > _rank(known[rid]):
                known[rid] = ev
    out: list[Instance] = []
    for uid, found in masters.items():
        out += _of_uid(found, overrides.pop(uid, {}), cal, window, info, expansions)
    for uid, orphans in overrides.items():  # an invitation to one instance of someone else's series
        out += [Instance(ev, ev.start, end_of(ev), rid, True, info, ev.warning)
                for rid, ev in orphans.items() if ev.status != "CANCELLED"]
    return out


def _of_uid(found: list[Event], overrides: dict[str, Event], cal: Calendar, window: Window,
            info: CalendarInfo, expansions: Expansions) -> list[Instance]:
    if any(ev.recurring for ev in found) or len(found) == 1:
        master = max(found, key=_rank)  # RFC 5545: the highest SEQUENCE is the current one
        if master.status == "CANCELLED":
            return []
        if master.recurring:
            return _series(master, overrides, cal, window, info, expansions)
        ev = overrides.get(rid_text(master.start), master)  # an override of a single event replaces it
        return [] if ev.status == "CANCELLED" else [Instance(ev, ev.start, end_of(ev), "", False, info, ev.warning)]
    by_start: dict[str, Event] = {}  # one UID on several single events (a broken producer): keep each start
    for ev in found:
        rid = rid_text(ev.start)
        if rid not in by_start or _rank(ev) > _rank(by_start[rid]):
            by_start[rid] = ev
    many = len(by_start) > 1
    return [Instance(ev, ev.start, end_of(ev), rid if many else "", False, info, ev.warning)
            for rid, ev in by_start.items() if ev.status != "CANCELLED"]


def _rank(ev: Event) -> tuple:
    return ev.sequence, ev.modified


def _series(master: Event, overrides: dict[str, Event], cal: Calendar, window: Window,
            info: CalendarInfo, expansions: Expansions) -> list[Instance]:
    def expand() -> tuple[list[tuple], str]:
        rec = _expander(master, cal, window)
        chosen = _nearest(rec, window) or _first(rec, master)
        return chosen, rec.note

    try:
        chosen, note = expansions.get((master.digest, window, cal.tz), expand)
    except Exception as exc:  # noqa: BLE001 - a rule recurring_ical_events cannot read: index the first one
        note = f"the recurrence rule could not be expanded ({type(exc).__name__}: {str(exc)[:120]}); only the " \
               "first occurrence is indexed"
        return [Instance(master, master.start, end_of(master), rid_text(master.start), True, info, note)]
    warning = "; ".join(w for w in (master.warning, note) if w)
    out = {}
    for start, end in chosen:
        out[rid_text(start)] = Instance(master, start, end, rid_text(start), True, info, warning)
    room = len(chosen) < window.cap
    for rid, ev in overrides.items():
        if ev.status == "CANCELLED":
            out.pop(rid, None)
        elif rid in out or (room and window.start <= utc(ev.start, info.zone) < window.end):
            out[rid] = Instance(ev, ev.start, end_of(ev), rid, True, info, ev.warning)
    return list(out.values())


def _expander(master: Event, cal: Calendar, window: Window) -> Recurrence:
    """The master's recurrence (its DTSTART, DTEND/DURATION, RRULE, RDATE, EXDATE), listed with bounded work."""
    return Recurrence(master, cal, window.anchor)


def _nearest(rec: Recurrence, window: Window) -> list[tuple]:
    """(start, end) of the series' occurrences in the window, at most cap, the nearest to the anchor.

    The span around the anchor starts as wide as cap occurrences at the rule's densest, and widens 4x while it
    holds fewer; a span whose listing would cost more than MAX_STEPS is not listed (see ics_recurrence)."""
    whole = window.end - window.start
    half = whole if rec.rate <= 0 else min(whole, timedelta(seconds=min(window.cap / rec.rate, 1e10)))
    found: list[tuple] = []
    while True:
        lo, hi = max(window.start, window.anchor - half), min(window.end, window.anchor + half)
        if rec.steps(lo, hi) > MAX_STEPS:
            if not found:
                rec.note = rec.note or _too_dense(rec, lo)
            break
        found = rec.between(lo, hi)
        if len(found) >= window.cap or (lo, hi) == (window.start, window.end):
            break
        half *= 4
    seen: dict[str, tuple] = {}
    for occ in found:
        seen.setdefault(rid_text(occ[0]), occ)
    ordered = sorted(seen.values(), key=lambda o: abs(utc(o[0], None) - window.anchor))
    return ordered[:window.cap]


def _first(rec: Recurrence, master: Event) -> list[tuple]:
    """The series' first occurrence (looked for in a span whose listing stays within MAX_STEPS), else DTSTART."""
    begin = utc(master.start, None) - timedelta(days=2)
    span = timedelta(days=400) if rec.rate <= 0 else min(timedelta(days=400), timedelta(seconds=1000 / rec.rate))
    if rec.steps(begin, begin + span) > MAX_STEPS:
        return [(master.start, end_of(master))]
    occ = sorted(rec.between(begin, begin + span), key=lambda o: utc(o[0], None))
    return [occ[0]] if occ else [(master.start, end_of(master))]


def _too_dense(rec: Recurrence, lo: datetime) -> str:
    return (f"the recurrence rule repeats too often to be expanded near today (about {rec.steps(lo, lo):,.0f} "
            f"occurrences from its start, over the limit of {MAX_STEPS:,}); only its first occurrence is indexed. "
            "Give the series a later start or an end in the calendar app to index the rest")


# -- times ------------------------------------------------------------------------------------------------------


def end_of(ev: Event):
    if ev.end is not None:
        return ev.end
    return ev.start + timedelta(days=1) if not isinstance(ev.start, datetime) else ev.start


def rid_text(t) -> str:
    """A recurrence id in basic ISO: UTC for aware times, as written for floating times and dates."""
    if not isinstance(t, datetime):
        return f"{t.year:04d}{t.month:02d}{t.day:02d}"
    zone = ""
    if t.tzinfo is not None:
        t, zone = t.astimezone(timezone.utc), "Z"
    return f"{t.year:04d}{t.month:02d}{t.day:02d}T{t.hour:02d}{t.minute:02d}{t.second:02d}{zone}"


def unix(t, zone: tzinfo | None) -> int:
    return int(aware(t, zone).timestamp())


def shown(t, inst: Instance) -> datetime:
    """The time as the user reads it: zoned times in their own zone, UTC and floating ones in the calendar's."""
    t = aware(t, inst.calendar.zone)
    if inst.event.tzid and t.utcoffset() is not None and t.tzinfo is not timezone.utc:
        return t
    return t.astimezone(inst.calendar.zone) if inst.calendar.zone is not None else t.astimezone()


def zone_label(inst: Instance) -> str:
    if inst.event.tzid and isinstance(inst.start, datetime) and inst.start.tzinfo is not None:
        key = getattr(inst.start.tzinfo, "key", None) or getattr(inst.start.tzinfo, "zone", None)
        return str(key or inst.event.tzid)
    return inst.calendar.zone_name


# -- the Document ------------------------------------------------------------------------------------------------


def all_day(inst: Instance) -> bool:
    return not isinstance(inst.start, datetime)


def when_text(inst: Instance) -> str:
    if all_day(inst):
        last = inst.end - timedelta(days=1) if isinstance(inst.end, date) and inst.end > inst.start else inst.start
        if last == inst.start:
            return f"{_day(inst.start)} (all day)"
        return f"{_day(inst.start)} – {_day(last)} (all day, {(last - inst.start).days + 1} days)"
    start, end = shown(inst.start, inst), shown(inst.end, inst)
    if end <= start:
        span = f"{_day(start)}, {start:%H:%M}"
    elif end.date() == start.date():
        span = f"{_day(start)}, {start:%H:%M}–{end:%H:%M}"
    else:
        span = f"{_day(start)}, {start:%H:%M} – {_day(end)}, {end:%H:%M}"
    return f"{span} ({zone_label(inst)})"


def _day(d) -> str:
    return f"{d:%A}, {d.day} {d:%B %Y}"


def iso(t, inst: Instance, last_day: bool = False) -> str:
    if not isinstance(t, datetime):
        if last_day and t > inst.start:
            t = t - timedelta(days=1)
        return t.isoformat()
    return shown(t, inst).isoformat()


def people(ev: Event) -> tuple[tuple[str, ...], list[str], list[str]]:
    """(participants, attendee descriptions for the text, rooms)."""
    who = [ev.organizer.who] if ev.organizer else []
    named, rooms = [], []
    for p in ev.attendees:
        if p.kind in ROOMS:
            rooms.append(p.who)
            continue
        who.append(p.who)
        notes = [n for n in (p.status if p.status != "needs-action" else "", "optional" if p.role == "opt-participant"
                             else "", "organizer" if ev.organizer and p.who == ev.organizer.who else "") if n]
        named.append(p.who + (f" ({', '.join(notes)})" if notes else ""))
    return tuple(dict.fromkeys(who)), named, rooms


def description_text(raw: str) -> tuple[str, str]:
    """(the description as text, the first video-call link in it): HTML made text, Google's Meet block dropped."""
    from rag_pipelines.parsers.mail import html_to_text, looks_like_html

    text = html_to_text(raw, strip_quotes=False, strip_signature=False) if looks_like_html(raw) else raw
    link = CALL_LINK.search(text)
    parts = GOOGLE_BLOCK.split(text)
    if len(parts) > 1:
        text = "\n".join(p.strip() for p in parts[::2] if p.strip())  # the text outside the fences
    return text.strip(), link.group(0) if link else ""


def document_inputs(inst: Instance) -> list:
    """Everything the Document is made from (its JSON is the content hash)."""
    ev = inst.event
    return [ev.uid, inst.rid, ev.summary, ev.description, ev.location, ev.status, ev.url, list(ev.categories),
            ev.organizer, list(ev.attendees), ev.rrule, inst.recurring, iso(inst.start, inst),
            iso(inst.end, inst, True), unix(inst.start, inst.calendar.zone), when_text(inst), inst.calendar.name,
            inst.warning]


def event_document(inst: Instance, max_text: int | None = None) -> Document:
    ev = inst.event
    who, named, rooms = people(ev)
    description, meet = description_text(ev.description)
    warnings_ = [w for w in (inst.warning,) if w]
    if max_text is not None and len(description) > max_text:
        description = description[:max_text]
        warnings_.append("description cut to limits.max_text_mb")
    lines = [f"When: {when_text(inst)}"]
    lines += [f"Where: {ev.location}"] if ev.location else []
    lines += [f"Rooms: {', '.join(rooms)}"] if rooms else []
    lines += [f"Organizer: {ev.organizer.who}"] if ev.organizer else []
    if named:
        more = f", and {len(named) - MAX_NAMED} more" if len(named) > MAX_NAMED else ""
        lines.append(f"Attendees: {', '.join(named[:MAX_NAMED])}{more}")
    lines += [f"Status: {ev.status.lower()}"] if ev.status in ("TENTATIVE",) else []
    lines += [f"Repeats: {_repeats(ev.rrule)}"] if inst.recurring else []
    lines += [f"Calendar: {inst.calendar.name}"] if inst.calendar.name else []
    text = "\n".join(lines) + (f"\n\n{description}" if description else "")
    meta = {"start": iso(inst.start, inst), "end": iso(inst.end, inst, True), "all_day": all_day(inst),
            "location": ev.location, "calendar": inst.calendar.name, "status": ev.status.lower(),
            "recurring": inst.recurring, "organizer": ev.organizer.who if ev.organizer else "", "uid": ev.uid,
            "recurrence_id": inst.rid, "timezone": "" if all_day(inst) else zone_label(inst), "url": ev.url,
            "conference_url": meet, "attendees": len(named), "parse_warning": "; ".join(warnings_)}
    return Document(title=ev.summary or "(no title)", sections=(Section(text),),
                    ts=unix(inst.start, inst.calendar.zone),
                    author=ev.organizer.who if ev.organizer else None, participants=who, tags=ev.categories,
                    metadata={k: v for k, v in meta.items() if v not in ("", None)})


def _repeats(rrule: str) -> str:
    parts = dict(p.split("=", 1) for p in rrule.upper().split(";") if "=" in p)
    freq = parts.get("FREQ", "").lower()
    if not freq:
        return "on extra dates"
    every = parts.get("INTERVAL", "1")
    text = freq if every == "1" else f"every {every} {freq.removesuffix('ly').replace('dai', 'day')}s"
    return text + (f" on {parts['BYDAY']}" if "BYDAY" in parts else "")
