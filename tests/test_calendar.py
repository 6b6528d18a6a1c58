"""Calendars (.ics) as a Source: reading rules, times, recurrence, people, keys, stamps and the fast path, faults,
and end to end through Dagster."""

from __future__ import annotations

import os
import time
from datetime import date, datetime, timedelta, timezone

import dagster as dg
import pytest
from click.testing import CliRunner

import calendar_fixture as fx
from fakes import HashEmbedder
from pipeline_env import make_home
from rag_pipelines.indexing import runs
from rag_pipelines.parsers import ics
from rag_pipelines.parsers.errors import ParseError
from rag_pipelines.parsers.limits import Limits
from rag_pipelines.sources import calendar as source_module
from rag_pipelines.sources.base import SourceUnavailable
from rag_pipelines.sources.calendar import CalendarOptions, CalendarSource
from rag_pipelines.wiring import resources
from rag_search.cli.main import cli
from rag_search.retrieval import Filters, SearchEngine, SearchRequest
from rag_search.store import reads

BERLIN = "Europe/Berlin"


def utc(*args) -> int:
    return int(datetime(*args, tzinfo=timezone.utc).timestamp())


@pytest.fixture(autouse=True)
def clock(monkeypatch):
    monkeypatch.setattr(source_module, "now", lambda: fx.NOW)


@pytest.fixture
def cal(tmp_path):
    return fx.build(tmp_path / "Calendars")


def source(*paths, limits=None, **options) -> CalendarSource:
    return CalendarSource(CalendarOptions(type="calendar", paths=list(paths), **options), limits=limits)


def documents(src: CalendarSource, keys=None) -> dict:
    out = {}
    for loaded in src.load(sorted(keys or src.scan().items)):
        assert loaded.error is None and not loaded.gone, (loaded.key, loaded.error)
        out[loaded.key] = loaded.parse()
    return out


def events(data: bytes) -> dict:
    return {ev.uid + (f"#{ev.recurrence_id}" if ev.recurrence_id else ""): ev
            for c in ics.read_calendars(data) for ev in c.events}


def inline(body: str, head: str = "") -> bytes:
    return f"BEGIN:VCALENDAR\r\nVERSION:2.0\r\n{head}{body.strip()}\r\nEND:VCALENDAR\r\n".encode()


# -- reading ------------------------------------------------------------------------------------------------


def test_reading_rules_bom_folds_escapes_line_ends_and_quoted_parameters():
    raw = fx.work_ics()
    assert raw.startswith(b"\xef\xbb\xbf") and b"\r\n " in raw
    offsite = events(raw)[fx.OFFSITE]  # folded inside a UTF-8 character: joined before decoding
    assert "Café Périgord" in offsite.description and "\ufffd" not in offsite.description
    assert offsite.description.startswith("Three days in Lisbon: strategy, roadmap; and team building.")
    assert "\nDay 1 starts" in offsite.description and offsite.categories == ("Travel", "Team")
    assert events(ics.decode(raw).encode("utf-16")).keys() == events(raw).keys()  # UTF-16 export
    google = fx.google_ics()
    assert b"\r" not in google and len(events(google)) == 2  # bare LF
    outlook = events(fx.outlook_ics())[fx.LONG_UID]
    assert outlook.organizer.who == "Stone, Bob <bob@example.com>"
    assert outlook.attendees[0].who == "White, Carol: Finance <carol@example.com>"  # ':' and ',' inside quotes
    assert ics.content_line('ATTENDEE;CN="a:b;c";PARTSTAT=ACCEPTED:mailto:x@y.z') == \
        ("ATTENDEE", {"CN": "a:b;c", "PARTSTAT": "ACCEPTED"}, "mailto:x@y.z")
    assert ics.content_line("no colon here") is None and ics.content_line("BAD NAME:x") is None


def test_times_utc_zoned_windows_custom_floating_all_day_and_duration():
    work, outlook = events(fx.work_ics()), events(fx.outlook_ics())
    handover = work[fx.HANDOVER]  # UTC with DURATION
    assert handover.start == datetime(2026, 3, 12, 15, 0, tzinfo=timezone.utc)
    assert handover.end - handover.start == timedelta(minutes=45)
    team = work[fx.TEAM]
    assert team.start.utcoffset() == timedelta(hours=1) and team.tzid == BERLIN and team.recurring
    offsite = work[fx.OFFSITE]
    assert (offsite.start, offsite.end) == (date(2026, 4, 20), date(2026, 4, 23))  # DTEND exclusive
    dentist = work[fx.DENTIST]
    assert dentist.start == datetime(2026, 3, 16, 8, 30) and dentist.start.tzinfo is None  # floating
    procurement = outlook[fx.LONG_UID]  # a Windows zone name
    assert str(procurement.start.tzinfo) == BERLIN and procurement.start.utcoffset() == timedelta(hours=1)
    custom = outlook[fx.CUSTOM_TZ]  # Outlook's "Customized Time Zone": its VTIMEZONE is the definition
    assert custom.start.utcoffset() == timedelta(hours=5, minutes=30)
    odd = events(inline("BEGIN:VEVENT\r\nUID:u\r\nDTSTART;TZID=Mars/Olympus:20260310T100000\r\nEND:VEVENT"))["u"]
    assert odd.start.tzinfo is None and "unknown time zone" in odd.warning
    assert ics.duration("P1W2DT3H") == timedelta(days=9, hours=3) and ics.duration("-PT15M") == -timedelta(minutes=15)
    assert ics.duration("P") is None and ics.duration("soon") is None


def test_broken_input_is_reported_and_good_events_are_kept():
    with pytest.raises(ParseError, match="not an iCalendar"):
        ics.read_calendars(b"\x89PNG\r\n\x1a\n\x00binary")
    with pytest.raises(ParseError, match="ends inside VEVENT"):
        ics.read_calendars(inline("BEGIN:VEVENT\r\nUID:a\r\nDTSTART:20260101T100000Z")[:-30])
    data = inline("BEGIN:VEVENT\r\nUID:bad\r\nDTSTART:2026-13-45\r\nEND:VEVENT\r\n"
                  "this line is garbage\r\n"
                  "BEGIN:VEVENT\r\nUID:nostart\r\nSUMMARY:x\r\nEND:VEVENT\r\n"
                  "BEGIN:VEVENT\r\nUID:good\r\nDTSTART:20260101T100000Z\r\nSUMMARY:fine\r\nEND:VEVENT")
    [c] = ics.read_calendars(data)
    assert [e.uid for e in c.events] == ["good"] and c.skipped_lines == 1
    assert [(u, k) for u, k, _ in c.problems] == [("bad", "corrupt"), ("nostart", "corrupt")]


# -- instances ----------------------------------------------------------------------------------------------


def test_weekly_series_with_exdate_override_and_cancelled_instance(cal):
    src = source(cal.work, timezone=BERLIN)
    docs = documents(src, [f"{fx.TEAM}/{r}" for r in fx.TEAM_RIDS])
    assert {k for k in src.scan().items if k.startswith(fx.TEAM)} == {f"{fx.TEAM}/{r}" for r in fx.TEAM_RIDS}
    first, second, moved, after_dst = (docs[f"{fx.TEAM}/{r}"] for r in fx.TEAM_RIDS)
    assert first.ts == utc(2026, 3, 3, 9) and second.ts == utc(2026, 3, 10, 9)
    assert after_dst.ts == utc(2026, 4, 7, 8)  # 10:00 Berlin in summer time
    assert after_dst.metadata["start"] == "2026-04-07T10:00:00+02:00"
    assert moved.title == "Team sync (moved: offsite prep)" and moved.ts == utc(2026, 3, 25, 10)
    assert "Moved to Wednesday" in moved.sections[0].text and moved.metadata["recurrence_id"] == "20260324T090000Z"
    assert moved.participants == ("Ann Example <ann@example.com>", "Bob Stone <bob@example.com>")
    assert all(d.metadata["recurring"] is True for d in docs.values())


def test_google_calendar_repeats_in_its_x_wr_timezone(cal):
    docs = documents(source(cal.google), [f"{fx.DESIGN}/{r}" for r in fx.DESIGN_RIDS])
    before, after = docs[f"{fx.DESIGN}/20260302T140000Z"], docs[f"{fx.DESIGN}/20260309T130000Z"]
    assert before.ts == utc(2026, 3, 2, 14) and after.ts == utc(2026, 3, 9, 13)  # 09:00 New York on both sides of DST
    assert before.sections[0].text.startswith("When: Monday, 2 March 2026, 09:00–10:00 (America/New_York)")
    assert after.metadata["start"] == "2026-03-09T09:00:00-04:00"
    text = after.sections[0].text
    assert "Review the onboarding flow mockups" in text and "<b>" not in text  # Google's HTML description
    assert "Join with Google Meet" not in text and "-::~" not in text  # the Meet block is not content
    assert after.metadata["conference_url"] == "https://meet.google.com/abc-defg-hij"


def test_window_cap_and_series_outside_the_window(cal):
    keys = set(source(cal.work).scan().items)
    assert {k for k in keys if k.startswith(fx.MONTHLY)} == {f"{fx.MONTHLY}/{r}" for r in fx.monthly_rids()}
    spanish = {k for k in keys if k.startswith(fx.SPANISH)}
    assert spanish == {f"{fx.SPANISH}/20190107T170000Z"}  # a series that ended in 2019: its first instance
    capped = {k.split("/")[1] for k in source(cal.work, max_instances=5).scan().items if k.startswith(fx.MONTHLY)}
    assert capped == set(fx.MONTHLY_NEAREST[:5])  # the ones nearest to today
    narrow = source(cal.work, past_months=0, future_months=0).scan().items
    assert {k for k in narrow if k.startswith(fx.MONTHLY)} == {f"{fx.MONTHLY}/20190125T090000Z"}
    assert fx.OFFSITE in narrow and fx.DENTIST in narrow  # single events do not depend on the window


def test_a_dense_unbounded_rule_is_capped_around_today(tmp_path):
    path = tmp_path / "hourly.ics"
    path.write_bytes(inline("BEGIN:VEVENT\r\nUID:hourly\r\nSUMMARY:Ping\r\nDTSTART:20200101T000000Z\r\n"
                            "RRULE:FREQ=HOURLY\r\nEND:VEVENT"))
    t0 = time.perf_counter()
    keys = list(source(path, max_instances=200).scan().items)
    assert time.perf_counter() - t0 < 10 and len(keys) == 200
    starts = sorted(datetime.strptime(k.split("/")[1], "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc) for k in keys)
    today = datetime(2026, 3, 15, tzinfo=timezone.utc)
    assert starts[0] >= today - timedelta(hours=101) and starts[-1] <= today + timedelta(hours=101)


HOSTILE_SCAN = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from hostile.calendar import SHAPES
from rag_pipelines.sources.calendar import CalendarOptions, CalendarSource
out = {}
for shape in SHAPES:
    args = shape.build(Path(sys.argv[1]) / shape.name)
    src = CalendarSource(CalendarOptions(type="calendar", paths=[args[args.index("--path") + 1]]))
    keys = sorted(src.scan().items)
    warnings = {ld.parse().metadata.get("parse_warning", "") for ld in src.load(keys[:1] + keys[-1:])}
    out[shape.name] = [keys, sorted(warnings)]
print(json.dumps(out))
"""


def test_hostile_recurrence_rules_expand_with_bounded_work(tmp_path):
    """Every shape of tests/hostile/calendar.py (SECONDLY from 2010 or from three days ago, MINUTELY, COUNT=10^9, an
    UNTIL in 9999, a BYSECOND list, an every-second YEARLY rule, 300,000 RDATEs) scanned in a child process held
    to 1.5 GB and 120 s: before ics_recurrence.py the first alone ran 15 minutes to 2.1 GB. The dense ones keep
    max_instances occurrences around today; the one that cannot be moved keeps its first, and says why."""
    import json
    import resource
    import subprocess
    import sys
    from pathlib import Path

    from hostile.calendar import CAP, SHAPES

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (1536 * 2**20, 1536 * 2**20))

    done = subprocess.run([sys.executable, "-c", HOSTILE_SCAN, str(tmp_path), str(Path(__file__).parent)],
                          capture_output=True, text=True, timeout=120, preexec_fn=limit)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout)
    assert {name: len(keys) for name, (keys, _) in found.items()} == {s.name: s.expect["indexed"] for s in SHAPES}
    today = datetime.now(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    for name in ("ics-secondly-old", "ics-secondly-recent", "ics-count-huge", "ics-bysecond-list"):
        starts = [datetime.strptime(k.split("/")[1], "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)
                  for k in found[name][0]]
        assert max(abs(s - today) for s in starts) <= timedelta(seconds=CAP // 2), name  # every second around today
        assert found[name][1] == [""], name
    keys, warnings = found["ics-yearly-every-second"]
    assert keys == ["yearly-seconds@example.com/19000101T000000Z"]
    assert "repeats too often to be expanded near today" in warnings[0] and "Give the series" in warnings[0]
    assert "RDATE dates, the ones furthest from today, were left out" in found["ics-rdate-flood"][1][0]


@pytest.mark.parametrize("dtstart, rule", [
    ("DTSTART:20200101T003000Z", "FREQ=HOURLY;INTERVAL=5"),
    ("DTSTART;TZID=Europe/Berlin:19900105T093000", "FREQ=DAILY;BYDAY=MO,WE,FR"),
    ("DTSTART;TZID=America/New_York:19700106T170000", "FREQ=WEEKLY;INTERVAL=3;BYDAY=TU,TH,SU;WKST=SU"),
    ("DTSTART;TZID=Europe/Berlin:19900105T093000", "FREQ=DAILY;COUNT=13500"),
    ("DTSTART:20240901T071500", "FREQ=MINUTELY;INTERVAL=97;BYHOUR=7,8,9"),
    ("DTSTART;VALUE=DATE:19800229", "FREQ=DAILY;INTERVAL=3"),
])
def test_a_moved_rule_gives_what_the_library_gives_walking_from_dtstart(dtstart, rule):
    """A rule far from its DTSTART is walked from a DTSTART moved close to the span: same occurrences, as the
    library itself lists them from the original DTSTART (across DST, WKST, floating times, dates, a COUNT)."""
    from rag_pipelines.parsers import ics_recurrence as rec

    cal = ics.read_calendars(inline(f"BEGIN:VEVENT\r\nUID:m\r\n{dtstart}\r\nDURATION:PT45M\r\nRRULE:{rule}\r\n"
                                    "EXDATE:20260302T093000Z\r\nEND:VEVENT"))[0]
    master = cal.events[0]
    lo, hi = datetime(2026, 2, 20, tzinfo=timezone.utc), datetime(2026, 4, 10, tzinfo=timezone.utc)
    recurrence = rec.Recurrence(master, cal, fx.NOW)
    assert recurrence._moved(lo) is not None  # far enough to be moved
    truth = [(o.start, o.end) for o in rec.build_series(master.recurrence_lines, cal).between(lo, hi)]
    assert truth and sorted(recurrence.between(lo, hi)) == sorted(truth)


def test_google_legacy_categories_are_not_tags(tmp_path):
    """Google exports put `CATEGORIES:http://schemas.google.com/g/2005#event` on every event (as in
    niccokunzmann/python-recurring-ical-events benchmark/issue42.ics, a real Google Calendar export): not a tag."""
    data = inline("BEGIN:VEVENT\r\nUID:g1@google.com\r\nDTSTART:20260310T090000Z\r\nSUMMARY:Standup\r\n"
                  "CATEGORIES:http://schemas.google.com/g/2005#event\r\nEND:VEVENT\r\n"
                  "BEGIN:VEVENT\r\nUID:g2@google.com\r\nDTSTART:20260311T090000Z\r\nSUMMARY:Review\r\n"
                  "CATEGORIES:Work,http://schemas.google.com/g/2005#event,urn:x-cal:legacy,Ops: on call\r\n"
                  "END:VEVENT", "PRODID:-//Google Inc//Google Calendar 70.9054//EN\r\n")
    found = events(data)
    assert found["g1@google.com"].categories == () and found["g2@google.com"].categories == ("Work", "Ops: on call")
    path = tmp_path / "google.ics"
    path.write_bytes(data)
    assert documents(source(path), ["g1@google.com"])["g1@google.com"].tags == ()


def test_rdate_adds_instances_and_an_override_of_a_single_event_replaces_it(tmp_path):
    path = tmp_path / "rdate.ics"
    path.write_bytes(inline(
        "BEGIN:VEVENT\r\nUID:r\r\nSUMMARY:Board meeting\r\nDTSTART;VALUE=DATE:20260302\r\n"
        "RRULE:FREQ=MONTHLY;COUNT=2\r\nRDATE;VALUE=DATE:20260315,20260320\r\nEND:VEVENT\r\n"
        "BEGIN:VEVENT\r\nUID:only-rdate\r\nSUMMARY:Check-ins\r\nDTSTART:20260310T100000\r\n"
        "RDATE:20260311T100000\r\nEND:VEVENT\r\n"
        "BEGIN:VEVENT\r\nUID:single\r\nSUMMARY:Lunch\r\nDTSTART:20260312T110000Z\r\nEND:VEVENT\r\n"
        "BEGIN:VEVENT\r\nUID:single\r\nRECURRENCE-ID:20260312T110000Z\r\nSUMMARY:Lunch (moved)\r\n"
        "DTSTART:20260312T120000Z\r\nEND:VEVENT"))
    src = source(path, timezone=BERLIN)
    assert set(src.scan().items) == {"r/20260302", "r/20260315", "r/20260320", "r/20260402",
                                     "only-rdate/20260310T100000", "only-rdate/20260311T100000", "single"}
    assert documents(src, ["single"])["single"].title == "Lunch (moved)"


def test_cancellations_are_not_indexed(cal, tmp_path):
    assert fx.VENDOR not in source(cal.work).scan().items  # STATUS:CANCELLED
    path = tmp_path / "cancel.ics"
    path.write_bytes(inline("BEGIN:VEVENT\r\nUID:x\r\nDTSTART:20260310T100000Z\r\nEND:VEVENT", "METHOD:CANCEL\r\n"))
    assert source(path).scan().items == {}  # an iTIP cancellation
    path.write_bytes(inline("BEGIN:VEVENT\r\nUID:s\r\nSTATUS:CANCELLED\r\nDTSTART:20260310T100000Z\r\n"
                            "RRULE:FREQ=DAILY;COUNT=3\r\nEND:VEVENT"))
    assert source(path).scan().items == {}  # a cancelled series


def test_people_are_participants_in_their_normal_form(cal):
    docs = documents(source(cal.root, timezone=BERLIN))
    team = docs[f"{fx.TEAM}/20260303T090000Z"]
    assert team.author == "Ann Example <ann@example.com>"
    assert team.participants == ("Ann Example <ann@example.com>", "Bob Stone <bob@example.com>",
                                 "Carol White <carol@example.com>", "Dave Black <dave@example.com>")
    assert "Carol White <carol@example.com> (declined), Dave Black <dave@example.com> (tentative)" in \
        team.sections[0].text
    hands = docs[fx.ALLHANDS]
    assert len(hands.participants) == 61 and not [p for p in hands.participants if "resource.calendar" in p]
    assert "Rooms: Auditorium (200)" in hands.sections[0].text and ", and 10 more" in hands.sections[0].text
    assert hands.metadata["attendees"] == 60
    assert docs[f"{fx.DESIGN}/20260302T140000Z"].author == "Ann Example <ann.example@example.com>"  # lower-cased
    assert docs[fx.REQUEST].participants == ("Frank Blue <frank@example.com>",)  # urn:uuid with EMAIL=
    assert docs[fx.PLANNING].participants == ("Frank Blue <frank@example.com>", "Ann Example <ann@personal.example>")


def test_document_text_and_metadata(cal):
    docs = documents(source(cal.root, timezone=BERLIN))
    team = docs[f"{fx.TEAM}/20260303T090000Z"]
    assert team.title == "Team sync" and team.sections[0].text.split("\n")[:2] == [
        "When: Tuesday, 3 March 2026, 10:00–11:00 (Europe/Berlin)", "Where: Room Spree, 3rd floor"]
    assert "Repeats: weekly\nCalendar: Work\n\nWeekly sync of the platform team" in team.sections[0].text
    assert team.metadata == {
        "start": "2026-03-03T10:00:00+01:00", "end": "2026-03-03T11:00:00+01:00", "all_day": False,
        "location": "Room Spree, 3rd floor", "calendar": "Work", "recurring": True,
        "organizer": "Ann Example <ann@example.com>", "uid": fx.TEAM, "recurrence_id": "20260303T090000Z",
        "timezone": BERLIN, "attendees": 3}
    offsite = docs[fx.OFFSITE]
    assert offsite.sections[0].text.startswith(
        "When: Monday, 20 April 2026 – Wednesday, 22 April 2026 (all day, 3 days)")
    assert offsite.ts == utc(2026, 4, 19, 22) and offsite.tags == ("Travel", "Team")  # midnight in Berlin
    assert {k: offsite.metadata[k] for k in ("start", "end", "all_day", "recurring")} == {
        "start": "2026-04-20", "end": "2026-04-22", "all_day": True, "recurring": False}
    assert docs[fx.DENTIST].ts == utc(2026, 3, 16, 7, 30)  # floating: in the configured zone
    assert docs[fx.HANDOVER].title == "Übergabe an das Team in München ☕ 東京"
    assert docs[fx.HANDOVER].metadata["end"] == "2026-03-12T16:45:00+01:00"  # DURATION
    assert "Bring the quarterly numbers for the cloud spend." in docs[fx.HTMLONLY].sections[0].text  # X-ALT-DESC
    assert "Sign the procurement contract" in docs[fx.long_key()].sections[0].text
    assert docs[fx.long_key()].metadata["uid"] == fx.LONG_UID and docs[fx.long_key()].metadata["calendar"] == "Outlook"
    assert "(Customized Time Zone)" in docs[fx.CUSTOM_TZ].sections[0].text
    assert (docs[fx.FAMILY].metadata["calendar"], docs[fx.MATCH].metadata["calendar"]) == ("Family", "Sports")
    assert docs[fx.PLANNING].metadata["calendar"] == "caldav"  # one event per file: the folder names the calendar


def test_a_macos_calendar_folder_is_named_by_its_info_plist(tmp_path):
    import plistlib

    events_dir = tmp_path / "Calendars" / "3F1B.calendar" / "Events"
    events_dir.mkdir(parents=True)
    (events_dir / "a.ics").write_bytes(fx.caldav_event("a@example.com", "SUMMARY:Piano\nDTSTART:20260310T160000Z"))
    (events_dir.parent / "Info.plist").write_bytes(plistlib.dumps({"Title": "Kids", "Type": "Local"}))
    [doc] = documents(source(tmp_path / "Calendars")).values()
    assert doc.metadata["calendar"] == "Kids"


# -- the source: keys, stamps, fast path ----------------------------------------------------------------------


def test_scan_lists_every_instance_and_the_unreadable_files(cal):
    result = source(cal.root).scan()
    assert set(result.items) == fx.EXPECTED
    assert {k: v[0] for k, v in result.problems.items()} == {k: "corrupt" for k in fx.PROBLEMS}
    assert "truncated.ics" in result.problems["file:caldav/truncated.ics"][1]
    assert all(k.isprintable() and len(k) <= 200 for k in result.items)
    assert fx.long_key() in result.items and len(fx.LONG_UID) > 300  # a long UID is hashed
    assert result.items[fx.FAMILY].uri == str(cal.two)
    assert source(cal.root).scan().items == result.items  # stable stamps
    assert not [k for k in result.items if "hidden" in k]


def test_no_op_rescans_read_nothing_and_edits_change_only_their_instances(cal):
    src = source(cal.root)
    before = src.scan().items
    assert src.reads == 8  # 4 calendars, 2 CalDAV events, 2 broken files
    assert src.scan().items == before and src.reads == 8
    os.utime(cal.work, ns=(time.time_ns(), time.time_ns() + 10**9))  # touched, not changed
    assert src.scan().items == before and src.reads == 9
    text = fx.text_of(cal.work)  # a re-export: every DTSTAMP is the export time
    cal.work.write_bytes(text.replace("DTSTAMP:20260301T080000Z", "DTSTAMP:20260315T110000Z").encode())
    assert src.scan().items == before
    fx.replace_in(cal.work, "Weekly sync of the platform team", "Weekly sync of the data team")
    edited = src.scan().items
    master = {f"{fx.TEAM}/{r}" for r in fx.TEAM_RIDS if r != "20260324T090000Z"}  # the override has its own lines
    assert {k for k in before if edited.get(k) != before[k]} == master
    fx.replace_in(cal.work, "Moved to Wednesday", "Moved to Thursday")
    again = src.scan().items
    assert {k for k in edited if again.get(k) != edited[k]} == {f"{fx.TEAM}/20260324T090000Z"}


def test_a_changed_file_parses_and_expands_only_its_changed_events(cal, monkeypatch):
    from rag_pipelines.parsers import ics_instances

    src = source(cal.root)
    src.scan()
    parsed, expanded = [], []
    real_read, real_expand = ics.read_event, ics_instances._expander
    monkeypatch.setattr(ics, "read_event", lambda comp, *a: parsed.append(comp.text("UID")) or real_read(comp, *a))
    monkeypatch.setattr(ics_instances, "_expander", lambda master, *a: expanded.append(master.uid) or
                        real_expand(master, *a))
    fx.replace_in(cal.work, "Check-up and cleaning.", "Check-up, cleaning and an x-ray.")
    src.scan()
    assert (parsed, expanded) == ([fx.DENTIST], [])  # the 9 other events and 3 series of work.ics reused
    fx.replace_in(cal.work, "Metrics\\, incidents", "Metrics\\, alerts")
    src.scan()
    assert (parsed[1:], expanded) == ([fx.MONTHLY], [fx.MONTHLY])


def test_a_new_day_re_expands_only_files_with_series(cal, monkeypatch):
    src = source(cal.root)
    src.scan()
    monkeypatch.setattr(source_module, "now", lambda: fx.NOW + timedelta(days=1))
    src.scan()
    assert src.reads == 8 + 2  # work.ics and google.ics hold series; the others were not read again


def test_one_uid_in_two_files_is_one_item_the_newest_copy(cal):
    other = cal.root / "shared"
    other.mkdir()
    copy = (cal.caldav / f"{fx.PLANNING}.ics").read_text().replace("SUMMARY:Quarterly planning with Ann",
                                                                      "SEQUENCE:3\r\nSUMMARY:Quarterly planning (v3)")
    (other / "planning-copy.ics").write_text(copy)
    src = source(cal.root)
    assert src.scan().items[fx.PLANNING].uri == str(other / "planning-copy.ics")
    assert documents(src, [fx.PLANNING])[fx.PLANNING].title == "Quarterly planning (v3)"


def test_load_gone_problems_and_content_hashes(cal):
    src = source(cal.root)
    src.scan()
    keys = [fx.FAMILY, fx.OFFSITE, "file:caldav/broken.ics"]
    family, offsite, broken = src.load(keys)
    assert family.source_type == "event" and family.content_hash and family.stamp == src.scan().items[fx.FAMILY].value
    assert broken.error[0] == "corrupt" and broken.stamp == "problem:corrupt"
    assert src.same_content(fx.OFFSITE, offsite.content_hash) and not src.same_content(fx.OFFSITE, "x" * 64)
    assert [ld.content_hash for ld in source(cal.root).load(keys[:2])] == [family.content_hash, offsite.content_hash]
    fx.replace_in(cal.work, "SUMMARY:Lisbon offsite", "SUMMARY:Lisbon offsite (confirmed)")
    cal.two.unlink()
    family2, offsite2 = src.load(keys[:2])
    assert family2.gone and offsite2.content_hash != offsite.content_hash


def test_missing_paths_are_unavailable_and_a_broken_file_is_a_problem(cal, tmp_path):
    with pytest.raises(SourceUnavailable, match="does not exist"):
        source(cal.root, tmp_path / "nowhere").scan()
    src = source(cal.caldav / "broken.ics", cal.two)
    result = src.scan()
    assert set(result.items) == {fx.FAMILY, fx.MATCH} and set(result.problems) == {"file:broken.ics"}
    [gone] = [ld for ld in src.load(["file:broken.ics"])]
    assert gone.error[0] == "corrupt"
    [unavailable] = source(tmp_path / "nowhere").load([fx.FAMILY])
    assert unavailable.error[0] == "unavailable"


def test_a_file_broken_mid_write_keeps_what_this_process_read(cal):
    src = source(cal.root)
    before = src.scan().items
    cal.work.write_bytes(cal.work.read_bytes()[:500])  # being rewritten by the app
    result = src.scan()
    assert result.items == before and "file:work.ics" in result.problems
    assert {k for k in source(cal.root).scan().items if k.startswith(fx.TEAM)} == set()  # a fresh process cannot


def test_limits_are_respected(cal):
    result = source(cal.root, limits=Limits(max_file_mb=0.001)).scan()
    assert result.problems["file:work.ics"][0] == "too_large" and fx.FAMILY in result.items
    doc = documents(source(cal.work, limits=Limits(max_text_mb=0.00002)), [fx.OFFSITE])[fx.OFFSITE]
    assert "max_text_mb" in doc.metadata["parse_warning"] and "Périgord" not in doc.sections[0].text


# -- end to end ---------------------------------------------------------------------------------------------


@pytest.fixture
def home(tmp_path, monkeypatch, cal):
    config = {"calendar": {"kind": "system", "sources": [{"type": "calendar", "paths": [str(cal.root)],
                                                            "timezone": BERLIN, "max_instances": CAP}]}}
    paths, _ = make_home(tmp_path, monkeypatch, extra_collections=config)
    yield paths
    resources.close_all()


CAP = 6  # instances per series in the end-to-end tests: 6 monthly reviews instead of 36 (faster, and the cap is used)


def search(query: str, **filters) -> list:
    engine = SearchEngine(resources.RagResource().store(), resources.RagResource().embedder())
    return engine.search(SearchRequest(query, top_k=20, filters=Filters(collections=("calendar",), **filters))).hits


def test_index_search_edit_and_delete_through_dagster(home, cal):
    before = fx.hash_tree(cal.root)
    [summary] = runs.index_collections(home, ["calendar"])
    assert fx.hash_tree(cal.root) == before  # nothing is written to the calendars
    expected = fx.expected(CAP)
    assert summary.outcomes == {"indexed": len(expected), "failed": 2} and not summary.unavailable
    store = resources.RagResource().store()
    assert set(reads.item_states(store, "calendar")) == expected | fx.PROBLEMS
    assert set(dg.DagsterInstance.get().get_dynamic_partitions("calendar_items")) == expected | fx.PROBLEMS

    hit = search("Einweisung für die neue Kaffeemaschine")[0]
    assert hit.key == fx.HANDOVER and hit.uri == str(cal.work) and hit.source_type == "event"
    assert search("review the onboarding flow mockups")[0].key.startswith(fx.DESIGN + "/")
    assert not [h for h in search("zeppelin tracker vendor demo") if "zeppelin" in h.text.lower()]  # cancelled
    with_dave = {h.key for h in search("weekly team sync roadmap incidents", participants=("dave@example.com",))}
    assert with_dave == {f"{fx.TEAM}/{r}" for r in fx.TEAM_RIDS if r != "20260324T090000Z"}  # not on the override
    week = search("meeting", date_from=utc(2026, 3, 9), date_to=utc(2026, 3, 12, 23, 59, 59), include_undated=False)
    assert {h.key for h in week} == {f"{fx.TEAM}/20260310T090000Z", f"{fx.DESIGN}/20260309T130000Z", fx.HANDOVER,
                                     fx.PLANNING}

    for name in ("broken.ics", "truncated.ics"):
        (cal.caldav / name).unlink()
    text = fx.text_of(cal.work)  # a re-export with an edit of the series' master
    text = text.replace("DTSTAMP:20260301T080000Z", "DTSTAMP:20260315T110000Z")
    cal.work.write_bytes(text.replace("roadmap\\, incidents and hiring", "the kraken migration").encode())
    [edited] = runs.index_collections(home, ["calendar"])
    assert edited.outcomes == {"indexed": 3, "deleted": 2}  # the 3 instances of the master; the override kept
    assert {h.key for h in search("kraken migration") if "kraken" in h.text} == \
        {f"{fx.TEAM}/{r}" for r in fx.TEAM_RIDS if r != "20260324T090000Z"}

    fx.remove_event(cal.work, fx.HANDOVER)
    [deleted] = runs.index_collections(home, ["calendar"])
    assert deleted.outcomes == {"deleted": 1}
    assert fx.HANDOVER not in reads.item_states(store, "calendar")
    assert not [h for h in search("Kaffeemaschine Übergabe") if h.key == fx.HANDOVER]
    [again] = runs.index_collections(home, ["calendar"])
    assert again.outcomes == {} and again.run_ids == []


def test_cli_registers_and_indexes_files_and_folders(home, cal, monkeypatch):
    embedder = HashEmbedder()  # no semantics needed here
    monkeypatch.setattr(resources, "load_embedder", lambda settings, paths=None: embedder)
    r = CliRunner().invoke(cli, ["index", "calendar", "--path", str(cal.caldav), "--path", str(cal.two),
                                 "--name", "mine", "--json"], catch_exceptions=False)
    assert r.exit_code == 6, r.output  # indexed, with two files failed (exit status 6)
    assert set(reads.item_states(resources.RagResource().store(), "mine")) == {
        fx.PLANNING, fx.REQUEST, fx.FAMILY, fx.MATCH, "file:caldav/broken.ics", "file:caldav/truncated.ics"}
    help_ = CliRunner().invoke(cli, ["index", "calendar", "--help"])
    assert help_.exit_code == 0 and "--path" in help_.output
