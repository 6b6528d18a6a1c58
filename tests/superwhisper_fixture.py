"""A SuperWhisper folder generated from the documented meta.json format (../shared/reference/sources.md §5).

    <root>/superwhisper/recordings/<epoch>/meta.json (+ output.wav in some), settings/settings.json, .DS_Store

Recordings (RECORDINGS): a complete dictation (result = rawResult but for its leading space), a meeting with
segments, llmResult and systemAudioEnabled (result ≠ rawResult, no audio file), a placeholder with only datetime and
appVersion (being recorded), truncated JSON (being rewritten), a transcript whose result is still missing
(processing), a folder without meta.json (cancelled), `duration: 0` with no text, CJK and emoji text, a summarise
mode (result entirely unlike rawResult), a silence artefact ("Thank you."), a non-numeric folder with a meta.json
(time from `datetime`) and one without, a millisecond folder name, and a .DS_Store file. Finished recordings are
two days old (settled); the ones in progress were just written (fresh).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

OLD = 2 * 86400  # seconds: the age of finished recordings' meta.json


def unix(iso: str) -> int:
    return int(datetime.fromisoformat(iso).replace(tzinfo=timezone.utc).timestamp())


@dataclass(frozen=True)
class Rec:
    name: str  # folder name (= key)
    meta: dict | str | None  # dict → JSON; str → written as is (truncated); None → no meta.json
    audio: bool = False
    fresh: bool = False  # just written (in progress) rather than settled


DICTATION = Rec("1772533910", {
    "datetime": "2026-03-03T10:31:50", "duration": 8200, "processingTime": 912,
    "rawResult": " Remind me to order the lakeside lodge catering for the March offsite and to confirm the train tickets.",
    "result": "Remind me to order the lakeside lodge catering for the March offsite and to confirm the train tickets.",
    "modeName": "Default", "modelName": "Ultra (Cloud)", "languageSelected": "en", "appVersion": "2.9.0",
    "recordingDevice": "MacBook Pro Microphone", "systemAudioEnabled": False}, audio=True)
MEETING = Rec("1772620310", {
    "datetime": "2026-03-04T10:31:50", "duration": 1834000, "modeName": "Meeting", "modelName": "Ultra (Cloud)",
    "languageModelName": "GPT-5 mini", "languageSelected": "en", "systemAudioEnabled": True, "appVersion": "2.9.0",
    "rawResult": " okay so uh the budget for the offsite is forty thousand euros and Ann will book the venue by Friday "
                 "and Bob handles the trains",
    "result": "Decisions: offsite budget 40,000 EUR. Ann books the venue by Friday. Bob organises the trains.",
    "llmResult": "Decisions: offsite budget 40,000 EUR. Ann books the venue by Friday. Bob organises the trains.",
    "segments": [{"text": " okay so uh the budget for the offsite", "start": 0.0, "end": 3.2},
                 {"text": " is forty thousand euros", "start": 3.2, "end": 5.0}]})
PLACEHOLDER = Rec("1772706710", {"datetime": "2026-03-05T10:31:50", "appVersion": "2.9.0"}, audio=True, fresh=True)
TRUNCATED = Rec("1772706999", '{"datetime": "2026-03-05T10:36:39", "duration": 64000, "rawResult": " the quarterly '
                'numbers look', fresh=True)
PROCESSING = Rec("1772707100", {"datetime": "2026-03-05T10:38:20", "duration": 12000, "modeName": "Email",
                                "rawResult": " tell the landlord the heating in the office is broken again"},
                 audio=True, fresh=True)
CANCELLED = Rec("1772707300", None, audio=True)
EMPTY = Rec("1772793110", {"datetime": "2026-03-06T10:31:50", "duration": 0, "result": "", "rawResult": "",
                           "modeName": "Default"})
CJK = Rec("1772879510", {"datetime": "2026-03-07T10:31:50", "duration": 5100, "languageSelected": "ja",
                         "rawResult": "明日の会議は十時から始まります。資料を準備してください 🎉",
                         "result": "明日の会議は十時から始まります。資料を準備してください 🎉", "modeName": "Default"})
SUMMARY = Rec("1772965910", {"datetime": "2026-03-08T10:31:50", "duration": 95000, "modeName": "Summarize",
                             "rawResult": " so I was thinking about the garden and the tomatoes need more sun and maybe "
                                          "we move the raised bed to the south wall next spring",
                             "result": "- Move the raised bed to the south wall next spring for more sun."})
SILENT = Rec("1773052310", {"datetime": "2026-03-09T10:31:50", "duration": 1200, "rawResult": " Thank you.",
                            "result": "Thank you.", "modeName": "Default"})
IMPORTED = Rec("imported-7f3a", {"datetime": "2026-03-10T08:00:00", "duration": 4000, "modeName": "Default",
                                 "rawResult": "Pick up the sourdough starter from Dana on Thursday."})
MILLIS = Rec("1773225110000", {"duration": 3000, "modeName": "Default",
                               "result": "Water the rooftop garden every Friday evening."})
NOTES = Rec("notes-backup", None)

RECORDINGS = (DICTATION, MEETING, PLACEHOLDER, TRUNCATED, PROCESSING, CANCELLED, EMPTY, CJK, SUMMARY, SILENT,
              IMPORTED, MILLIS, NOTES)
ITEMS = tuple(r for r in RECORDINGS if r.meta is not None)  # every folder with a meta.json is an item
INDEXED = (DICTATION, MEETING, CJK, SUMMARY, IMPORTED, MILLIS)
INCOMPLETE = (PLACEHOLDER, TRUNCATED, PROCESSING)
NO_TEXT = (EMPTY, SILENT)


@dataclass
class Folder:
    base: Path  # the superwhisper folder
    recordings: Path


def write(recordings: Path, rec: Rec, age: float | None = None) -> Path:
    folder = recordings / rec.name
    folder.mkdir(parents=True, exist_ok=True)
    if rec.audio:
        (folder / "output.wav").write_bytes(b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(28))
    if rec.meta is not None:
        meta = folder / "meta.json"
        meta.write_text(rec.meta if isinstance(rec.meta, str) else json.dumps(rec.meta, ensure_ascii=False, indent=2),
                        encoding="utf-8")
        age = age if age is not None else (0 if rec.fresh else OLD)
        when = time.time() - age
        os.utime(meta, (when, when))
    return folder


def build(root: Path) -> Folder:
    base = root / "superwhisper"
    recordings = base / "recordings"
    recordings.mkdir(parents=True)
    (base / "settings").mkdir()
    (base / "settings" / "settings.json").write_text('{"vocabulary": ["Bavaria"]}')
    (recordings / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1" + bytes(64))
    for rec in RECORDINGS:
        write(recordings, rec)
    return Folder(base, recordings)


def finish(recordings: Path, rec: Rec, **fields) -> None:
    """What SuperWhisper does when a recording ends: rewrite meta.json in place, complete."""
    meta = {"datetime": "2026-03-05T10:31:50", "duration": 45000, "modeName": "Default", "appVersion": "2.9.0",
            "rawResult": " the quarterly numbers look fine and the auditors arrive on Monday",
            "result": "The quarterly numbers look fine and the auditors arrive on Monday.", **fields}
    path = recordings / rec.name / "meta.json"
    path.write_text(json.dumps(meta), encoding="utf-8")
    when = time.time() + 1  # a later mtime even on coarse clocks
    os.utime(path, (when, when))


def age(recordings: Path, rec: Rec, seconds: float) -> None:
    """Make a recording's meta.json `seconds` old (it settles) without changing its bytes."""
    path = recordings / rec.name / "meta.json"
    when = time.time() - seconds
    os.utime(path, (when, when))
