"""Calendars as a Source: one item per event instance of .ics files, or of folders of them.

A path is an .ics file (an export: File → Export in Apple Calendar, Google Takeout, Outlook) or a folder searched
for *.ics (one calendar per file, or one event per file as CalDAV caches keep them; hidden files skipped).
Reference: ../shared/reference/sources.md §7 and §10; reading and instances: parsers/ics.py, ics_instances.py.

Keys: `<UID>` for a single event, `<UID>/<recurrence id>` for an instance of a recurring series
(`…@google.com/20260310T090000Z`); a UID that is not short printable ASCII (no space, '%', '/') is `~<sha1>`.
The same UID in several files (one invitation in two calendars) is one item: the copy with the highest
SEQUENCE / LAST-MODIFIED, else the first file by path. A file that cannot be read is the problem item
`file:<path>` (recorded failed); its events are kept from the previous scan of this process if there was one.
Stamps hash the event's own lines (DTSTAMP left out: exports rewrite it), the instance's times, the calendar's
name and zone and the file: editing one event changes the stamps of its instances only.
Fast path: a file whose size and mtime are unchanged is not read again (a file with recurring series is also
read again when the day, and so the expansion window, changes); when no file changed, a scan is a stat per file.
A changed file is read again, but its unchanged events are not parsed again nor its unchanged series expanded
again (both are known by digest from the file's previous read in this process).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone, tzinfo
from functools import lru_cache
from pathlib import Path
from typing import Iterator, Literal, Mapping, Sequence

from pydantic import Field, field_validator

from rag_pipelines.parsers import ics
from rag_pipelines.parsers.errors import ParseError
from rag_pipelines.parsers.ics_instances import (CalendarInfo, Expansions, Instance, Window, document_inputs,
                                                 event_document, instances, rid_text)
from rag_pipelines.parsers.limits import MB, Limits, bound_document, check_size
from rag_pipelines.sources.base import BaseSource, Loaded, ScanResult, SourceUnavailable, Stamp
from rag_pipelines.sources.files import root_labels
from rag_search.keys import path_key
from rag_pipelines.sources.options import SourceOptions, expand_paths

VERSION = "calendar-2"  # part of every content hash and stamp: bump when the Document of the same event changes
KEY_SAFE = re.compile(r"[\x21-\x24\x26-\x2e\x30-\x7e]{1,160}")  # printable ASCII without space, '%' or '/'


def now() -> datetime:
    """The clock the expansion window hangs on (tests replace it)."""
    return datetime.now(timezone.utc)


class CalendarOptions(SourceOptions):
    type: Literal["calendar"] = Field(description="calendar: events of .ics files or folders of them.")
    paths: tuple[Path, ...] = Field(min_length=1, description=".ics files, or folders searched for *.ics "
                                    "(exports, CalDAV caches with one event per file).")
    past_months: int = Field(24, ge=0, le=1200, description="Recurring series are expanded from this many months "
                             "before today ...")
    future_months: int = Field(12, ge=0, le=1200, description="... to this many months after today.")
    max_instances: int = Field(500, ge=1, le=100_000, description="Instances kept per recurring series: the ones "
                               "nearest to today (an unbounded daily rule stays small).")
    timezone: str | None = Field(None, description="IANA zone of floating times and all-day dates, and the one times "
                                 "are shown in (default: the calendar's X-WR-TIMEZONE, else this computer's).")

    @field_validator("paths")
    @classmethod
    def _expand(cls, v: tuple[Path, ...]) -> tuple[Path, ...]:
        return expand_paths(v)

    @field_validator("timezone")
    @classmethod
    def _zone(cls, v: str | None) -> str | None:
        if v and ics.known_zone(v) is None:
            raise ValueError(f"unknown time zone '{v}'; use an IANA name such as Europe/Berlin")
        return v


@dataclass
class FileScan:
    """What one file held at (size, mtime): its instances by local key, their stamps, and its problems."""

    size: int
    mtime_ns: int
    window: Window | None  # the window its series were expanded in; None: it has no series
    instances: dict[str, Instance] = field(default_factory=dict)
    stamps: dict[str, str] = field(default_factory=dict)
    problems: dict[str, tuple[str, str]] = field(default_factory=dict)
    events: dict[str, ics.Event] = field(default_factory=dict)  # by digest: reused when the file is read again
    expansions: Expansions | None = None  # its series' occurrences: reused likewise


@dataclass(frozen=True)
class Root:
    path: Path
    label: str | None


class CalendarSource(BaseSource):
    """The events of the .ics files under the configured paths, one item per instance."""

    type = "calendar"

    def __init__(self, options: CalendarOptions, label: str | None = None, limits: Limits | None = None):
        super().__init__(label)
        self.options, self.limits = options, limits or Limits()
        self.roots = [Root(p, lb) for p, lb in root_labels(list(options.paths))]
        self._files: dict[str, FileScan] = {}  # by path
        self._items: dict[str, tuple[Instance, str, str]] | None = None  # key → (instance, uri, stamp)
        self._stamps: dict[str, Stamp] = {}
        self._problems: dict[str, tuple[str, str]] = {}
        self._listing: dict[str, tuple[str, str]] = {}  # folders that could not be listed
        self._keys: dict[tuple[str, str | None], str] = {}  # (relative path, root label) → its key part
        self.reads = 0  # files read and parsed (the fast path skips the others)

    # -- scan ------------------------------------------------------------------------------------------------

    def scan(self) -> ScanResult:
        window = self.window()
        found, listing = self._list()
        files = {path: self._file(path, rel, st, window) for path, rel, st in found}
        unchanged = files.keys() == self._files.keys() and all(f is self._files[p] for p, f in files.items())
        if not (unchanged and self._items is not None and listing == self._listing):
            self._merge(files, listing)
        self._files = files
        return ScanResult(dict(self._stamps), dict(self._problems))

    def _merge(self, files: dict[str, FileScan], listing: dict[str, tuple[str, str]]) -> None:
        """Every file's instances and problems under the source's keys; a UID in several files: the newest copy."""
        items: dict[str, tuple[Instance, str, str]] = {}
        problems = dict(listing)
        for path in sorted(files):
            scanned = files[path]
            problems.update({self.key(k): v for k, v in scanned.problems.items()})
            for local, inst in scanned.instances.items():
                key = self.key(local)
                if key not in items or _rank(inst) > _rank(items[key][0]):
                    items[key] = (inst, path, scanned.stamps[local])
        for key in items:
            problems.pop(key, None)  # another copy of the event was readable
        self._items, self._problems, self._listing = items, problems, listing
        self._stamps = {k: Stamp(stamp_, uri) for k, (_, uri, stamp_) in items.items()}

    def window(self) -> Window:
        from dateutil.relativedelta import relativedelta

        day = now().astimezone(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
        return Window(day - relativedelta(months=self.options.past_months),
                      day + relativedelta(months=self.options.future_months) + timedelta(days=1), day,
                      self.options.max_instances)

    def _list(self) -> tuple[list[tuple[str, str, os.stat_result | None]], dict[str, tuple[str, str]]]:
        """(path, key part, stat) of every .ics file under the roots, and the folders that could not be listed."""
        missing = [str(r.path) for r in self.roots if not r.path.exists()]
        if missing:
            raise SourceUnavailable(f"{', '.join(missing)} does not exist (a drive not mounted? moved?). Nothing "
                                    "indexed from it was removed. Fix the path in the config, or remove the "
                                    "collection.")
        found: list[tuple[str, str, os.stat_result | None]] = []
        problems: dict[str, tuple[str, str]] = {}
        for root in self.roots:
            if root.path.is_dir():
                self._walk(root, str(root.path), "", found, problems, set())
            else:
                found.append((str(root.path), self._key_part(root.label or root.path.name, None), None))
        return found, problems

    def _walk(self, root: Root, folder: str, rel: str, found: list, problems: dict, seen: set) -> None:
        """The .ics files under a folder (hidden files and folders skipped; a linked folder once), with their stat."""
        try:
            st = os.stat(folder)
            if (st.st_dev, st.st_ino) in seen:
                return
            seen.add((st.st_dev, st.st_ino))
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            why = f"cannot list the folder {folder} ({exc.strerror or exc}); check its permissions"
            if not rel:
                raise SourceUnavailable(f"{why} (macOS: give the terminal Full Disk Access). Nothing indexed from it "
                                        "was removed.") from exc
            problems[self.key(f"file:{self._key_part(rel, root.label)}")] = ("unreadable", why)
            return
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:
                if entry.is_dir():
                    self._walk(root, entry.path, f"{rel}{entry.name}/", found, problems, seen)
                elif entry.name.lower().endswith(".ics") and entry.is_file():
                    found.append((entry.path, self._key_part(rel + entry.name, root.label), entry.stat()))
            except OSError:
                found.append((entry.path, self._key_part(rel + entry.name, root.label), None))

    def _key_part(self, rel: str, label: str | None) -> str:
        if (rel, label) not in self._keys:
            self._keys[(rel, label)] = path_key(rel, label)
        return self._keys[(rel, label)]

    def _file(self, path: str, rel: str, st: os.stat_result | None, window: Window) -> FileScan:
        """The file's instances: the previous scan's when size and mtime (and, with series, the window) agree."""
        old = self._files.get(path)
        try:
            st = st or os.stat(path)
        except FileNotFoundError:
            return FileScan(0, 0, None)  # deleted since it was listed
        except OSError as exc:
            return FileScan(0, 0, None, problems={f"file:{rel}": ("unreadable", f"cannot read {path} "
                                                                  f"({exc.strerror or exc})")})
        if old and (old.size, old.mtime_ns) == (st.st_size, st.st_mtime_ns) and old.window in (None, window):
            return old
        self.reads += 1
        try:
            check_size(st.st_size, os.path.basename(path), self.limits)
            with open(path, "rb") as fh:
                data = fh.read()
            calendars = ics.read_calendars(data, old.events if old else None)
        except (ParseError, OSError) as exc:
            kind, msg = (exc.kind, str(exc)) if isinstance(exc, ParseError) else \
                ("unreadable", f"cannot read it ({exc.strerror or exc}); check its permissions")
            kept = old.instances if old else {}  # keep what this process last read of it (a file being rewritten)
            return FileScan(st.st_size, st.st_mtime_ns, None, kept, old.stamps if old else {},
                            {f"file:{rel}": (kind, f"{path}: {msg}")}, old.events if old else {},
                            old.expansions if old else None)
        return self._instances(Path(path), rel, calendars, st, window, old)

    def _instances(self, path: Path, rel: str, calendars: list[ics.Calendar], st, window: Window,
                   old: FileScan | None) -> FileScan:
        series = any(ev.recurring for cal in calendars for ev in cal.events)
        out = FileScan(st.st_size, st.st_mtime_ns, window if series else None,
                       events={ev.digest: ev for cal in calendars for ev in cal.events},
                       expansions=Expansions(old.expansions if old else None))
        for n, cal in enumerate(calendars):
            info = self._info(cal, path)
            for i, (uid, kind, message) in enumerate(cal.problems):
                where = _safe(uid) if uid else f"file:{rel}#{n}.{i}"
                out.problems[where] = (kind, f"{path}: {message}")
            for inst in instances(cal, window, info, out.expansions):
                local = _safe(inst.event.uid) + (f"/{inst.rid}" if inst.rid else "")
                if local in out.instances and _rank(inst) <= _rank(out.instances[local]):
                    continue  # the same event in two VCALENDARs of one file
                out.instances[local] = inst
                out.stamps[local] = stamp(inst, str(path))
        return out

    def _info(self, cal: ics.Calendar, path: Path) -> CalendarInfo:
        name = self.options.timezone or (cal.tz if cal.tz and ics.known_zone(cal.tz) else "")
        zone = ics.known_zone(name) if name else None
        if zone is None:
            zone, name = local_zone()
        return CalendarInfo(calendar_name(cal, path), zone, name)

    # -- load ------------------------------------------------------------------------------------------------

    def load(self, keys: Sequence[str], known_uris: Mapping[str, str] | None = None) -> Iterator[Loaded]:
        known = known_uris or {}
        try:
            self.scan()  # cheap: files unchanged since the plan's scan are not read again
        except SourceUnavailable as exc:
            for key in keys:  # a stamp no scan gives: the next sync retries; indexed chunks stay
                yield Loaded(key, known.get(key, key), "event", stamp="unavailable", error=("unavailable", str(exc)))
            return
        items = self._items or {}
        for key in dict.fromkeys(keys):
            if key in items:
                inst, uri, stamp_ = items[key]
                yield Loaded(key, uri, "event", stamp=stamp_, content_hash=self.content_hash(inst),
                             parse=lambda inst=inst: self.document(inst))
            elif key in self._problems:
                kind, message = self._problems[key]
                yield Loaded(key, known.get(key, key), "calendar", stamp=f"problem:{kind}", error=(kind, message))
            else:
                yield Loaded(key, known.get(key, key), "event", gone=True)

    def document(self, inst: Instance):
        return bound_document(event_document(inst, int(self.limits.max_text_mb * MB)), self.limits)

    def content_hash(self, inst: Instance) -> str:
        payload = json.dumps([VERSION, document_inputs(inst), self.limits.max_text_mb], ensure_ascii=False, default=str)
        return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()

    def same_content(self, key: str, sha256: str | None) -> bool:
        found = (self._items or {}).get(key)
        return found is not None and sha256 is not None and self.content_hash(found[0]) == sha256

    def watch_paths(self) -> list:
        return [r.path for r in self.roots]


def calendar_name(cal: ics.Calendar, path: Path) -> str:
    """X-WR-CALNAME; else, for a file of one event (a CalDAV cache), its calendar's Title (macOS
    `<id>.calendar/Info.plist`) or folder's name; else the file's name."""
    if cal.name:
        return cal.name
    if len({ev.uid for ev in cal.events}) > 1:
        return path.stem
    folder = path.parent.parent if path.parent.name == "Events" else path.parent
    return folder_title(folder, _mtime(folder / "Info.plist")) or path.stem


@lru_cache(maxsize=1024)
def folder_title(folder: Path, plist_mtime: int | None) -> str:
    """A calendar folder's Title from its Info.plist (read again when that changes), else the folder's name."""
    if plist_mtime is not None:
        try:
            import plistlib

            title = plistlib.loads((folder / "Info.plist").read_bytes()).get("Title")
            if isinstance(title, str) and title.strip():
                return title.strip()
        except Exception:  # noqa: BLE001 - a damaged Info.plist: the folder's name
            pass
    return folder.name.removesuffix(".calendar").removesuffix(".caldav")


def _mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


def stamp(inst: Instance, uri: str) -> str:
    """The instance's change stamp: its event's own lines (DTSTAMP aside), its times, its calendar and file."""
    parts = (VERSION, inst.event.digest, inst.rid, inst.rid or rid_text(inst.start), rid_text(inst.end),
             inst.calendar.name, inst.calendar.zone_name, uri)
    return hashlib.sha1("|".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:20]


def _rank(inst: Instance) -> tuple:
    return inst.event.sequence, inst.event.modified


def _safe(uid: str) -> str:
    """A UID as a key part: itself when short printable ASCII without space, '%' or '/', else `~` + its sha1."""
    if KEY_SAFE.fullmatch(uid) and "..." not in uid and not uid.startswith(("~", "file:")):
        return uid
    return "~" + hashlib.sha1(uid.encode("utf-8", "surrogatepass")).hexdigest()


def local_zone() -> tuple[tzinfo | None, str]:
    """This computer's zone and its name: $TZ, else /etc/localtime's link; (None, 'local time') when unknown."""
    candidates = [os.environ.get("TZ", "").lstrip(":")]
    try:
        target = os.path.realpath("/etc/localtime")
        candidates.append(target.split("zoneinfo/", 1)[1] if "zoneinfo/" in target else "")
    except OSError:
        pass
    for name in filter(None, candidates):
        zone = ics.known_zone(name)
        if zone is not None:
            return zone, name
    return None, "local time"


def _cli_params() -> tuple:
    import click

    return (click.Option(["--path", "paths"], multiple=True, type=click.Path(exists=True, path_type=Path),
                         help="An .ics file or a folder of them (repeat for several); registers the collection. "
                              "Without it the configured calendar sources are indexed."),)


def _cli_source(paths: tuple[Path, ...] = (), **_) -> dict | None:
    return {"paths": [str(p) for p in paths]} if paths else None


def _source_type():
    from rag_pipelines.sources.registry import SourceType

    return SourceType(type="calendar", options=CalendarOptions, build=CalendarSource, collection="calendar",
                      kind="system", cli_params=_cli_params(), cli_source=_cli_source,
                      summary="Calendars: the events of .ics files or folders (title, time, place, people, text).")


SOURCE = _source_type()
