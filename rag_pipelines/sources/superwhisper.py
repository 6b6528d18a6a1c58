"""SuperWhisper recordings as a Source: one item per recording folder with a meta.json (audio files never read).

Reference: ../shared/reference/sources.md §5. `path` is the recordings folder (`<superwhisper folder>/recordings`)
or the superwhisper folder above it; without it, the known defaults are probed (~/Documents/superwhisper,
~/superwhisper, ~/Library/Application Support/com.superduper.superwhisper).

Keys are the folder names (the recording's start as unix seconds, e.g. `1770978710`). Scan stats meta.json only:
stamp = size:mtime, plus `:fresh` while the file changed less than SETTLE_SECONDS ago, so every record is read once
more after it settles (a rewrite finished within the same mtime tick is not missed). Load classifies:

    complete    result (derived text) and/or rawResult (transcript) or segments → a Document with a section each
                (derived first; one section when they are the same text);
    incomplete  meta.json being written (invalid JSON while fresh), a placeholder without any text fields (the
                recording is running: meetings rewrite it when they end), or a transcript whose result is still
                missing while fresh (processing) → a failed item of kind `incomplete`, never marked done; its stamp
                changes when meta.json is rewritten or settles, so the next sync (sensor or CLI) reads it again
                and the failure goes away once it is complete;
    no_text     finished without speech (duration 0, empty text, a known silence artefact like "Thank you.");
    corrupt     meta.json that is still not valid JSON after it settled.

Time: the folder name (seconds; milliseconds tolerated), else `datetime` (ISO without offset, read as UTC), else none.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator, Literal, Mapping, NamedTuple, Sequence

from pydantic import Field, field_validator

from rag_search.records import Document, Section

from rag_pipelines.parsers.errors import ParseError
from rag_pipelines.parsers.limits import MB, Limits
from rag_pipelines.sources.base import BaseSource, Loaded, ScanResult, SourceUnavailable, Stamp
from rag_search.keys import path_key
from rag_pipelines.sources.options import SourceOptions

VERSION = "superwhisper-1"  # part of every content hash: bump when the Document built from the same meta.json changes
SETTLE_SECONDS = 3600  # a meta.json changed more recently than this may still be rewritten (processing, a meeting)
DEFAULT_ROOTS = ("~/Documents/superwhisper", "~/superwhisper", "~/Library/Application Support/com.superduper.superwhisper")
AUDIO = (".wav", ".m4a", ".mp3", ".caf", ".aac", ".flac", ".ogg", ".opus")
TEXT_FIELDS = ("result", "rawResult", "llmResult", "segments")
SILENCE = {"thank you", "thanks for watching", "thank you for watching", "thank you so much for watching", "you",
           "bye", "subtitles by the amara org community", "vielen dank", "untertitel im auftrag des zdf 2017",
           "sous titrage st 501", "merci"}
META = (("modeName", "mode"), ("modelName", "model"), ("languageModelName", "language_model"),
        ("languageSelected", "language"), ("systemAudioEnabled", "system_audio"), ("appVersion", "app_version"),
        ("recordingDevice", "device"), ("processingTime", "processing_ms"))


class SuperWhisperOptions(SourceOptions):
    type: Literal["superwhisper"] = Field(description="superwhisper: SuperWhisper's recordings (meta.json per recording).")
    path: Path | None = Field(None, description="The recordings folder (<superwhisper folder>/recordings) or the "
                              "superwhisper folder; empty: ~/Documents/superwhisper, ~/superwhisper or "
                              "~/Library/Application Support/com.superduper.superwhisper, the first that exists.")

    @field_validator("path")
    @classmethod
    def _expand(cls, v: Path | None) -> Path | None:
        return Path(v).expanduser().resolve() if v is not None else None


class _Entry(NamedTuple):
    folder: Path
    stamp: str


class SuperWhisperSource(BaseSource):
    """The recordings of one SuperWhisper folder."""

    type = "superwhisper"

    def __init__(self, options: SuperWhisperOptions, label: str | None = None, limits: Limits | None = None):
        super().__init__(label)
        self.options, self.limits = options, limits or Limits()
        self._entries: dict[str, _Entry] | None = None

    def scan(self) -> ScanResult:
        root, result, entries, now = recordings_root(self.options.path), ScanResult(), {}, time.time()
        try:
            folders = [e for e in os.scandir(root) if not e.name.startswith(".") and e.is_dir()]
        except OSError as exc:
            raise SourceUnavailable(f"{root} cannot be read ({exc.strerror or exc}); macOS: give the terminal access "
                                    "to the folder (Documents needs consent). Nothing indexed from it was removed.") from exc
        if not folders:
            raise SourceUnavailable(f"{root} holds no recording folders; check `path` (SuperWhisper's folder is a "
                                    "setting of the app). Nothing indexed from it was removed.")
        for entry in folders:
            key = self.key(path_key(entry.name))
            try:
                st = os.stat(os.path.join(entry.path, "meta.json"))
            except FileNotFoundError:
                continue  # cancelled, or not started yet: no item until meta.json appears
            except OSError as exc:
                result.problems[key] = ("unreadable", f"meta.json cannot be read ({exc.strerror or exc})")
                continue
            entries[key] = _Entry(Path(entry.path), stamp(st, now))
            result.items[key] = Stamp(entries[key].stamp, entry.path)
        self._entries = entries
        return result

    def watch_paths(self) -> list:
        try:
            return [recordings_root(self.options.path)]
        except SourceUnavailable:
            return []

    def load(self, keys: Sequence[str], known_uris: Mapping[str, str] | None = None) -> Iterator[Loaded]:
        keys, known = list(dict.fromkeys(keys)), known_uris or {}
        if self._entries is None or any(k not in self._entries for k in keys):
            try:
                self.scan()
            except SourceUnavailable as exc:
                for k in keys:
                    yield Loaded(k, known.get(k, k), "recording", stamp="unavailable", error=("unavailable", str(exc)))
                return
        for key in keys:
            entry = (self._entries or {}).get(key)
            yield self._load(key, entry.folder) if entry else Loaded(key, known.get(key, key), "recording", gone=True)

    def _load(self, key: str, folder: Path) -> Loaded:
        meta, uri = folder / "meta.json", str(folder)
        try:
            st = os.stat(meta)  # before reading: a rewrite after this changes the next scan's stamp
            if st.st_size > self.limits.max_text_mb * MB:
                return Loaded(key, uri, "recording", stamp=stamp(st), error=("too_large", (
                    f"meta.json is over limits.max_text_mb ({self.limits.max_text_mb} MB); raise it in config.yaml")))
            data = meta.read_bytes()
        except FileNotFoundError:
            return Loaded(key, uri, "recording", gone=True)
        except OSError as exc:
            return Loaded(key, uri, "recording", stamp="unavailable",
                          error=("unreadable", f"meta.json cannot be read ({exc.strerror or exc}); tried again next run"))
        fresh, now_stamp = time.time() - st.st_mtime < SETTLE_SECONDS, stamp(st)
        record = classify(data, fresh)
        if isinstance(record, tuple):
            return Loaded(key, uri, "recording", stamp=now_stamp, error=record, size=st.st_size, mtime_ns=st.st_mtime_ns)
        audio = sorted(n for n in os.listdir(folder) if n.lower().endswith(AUDIO))  # names only, never opened
        payload = json.dumps([VERSION, folder.name, record, audio], ensure_ascii=False, sort_keys=True, default=str)
        return Loaded(key, uri, "recording", stamp=now_stamp, size=st.st_size, mtime_ns=st.st_mtime_ns,
                      content_hash=hashlib.sha256(payload.encode()).hexdigest(),
                      parse=lambda: recording_document(folder.name, record, audio, dict(self.options.metadata)))


def stamp(st: os.stat_result, now: float | None = None) -> str:
    fresh = (now if now is not None else time.time()) - st.st_mtime < SETTLE_SECONDS
    return f"{st.st_size}:{st.st_mtime_ns}" + (":fresh" if fresh else "")


def recordings_root(path: Path | None) -> Path:
    """The folder of recording folders: path/recordings when there is one, else path; defaults probed when None."""
    candidates = [path] if path is not None else [Path(p).expanduser() for p in DEFAULT_ROOTS]
    for base in candidates:
        for folder in (base / "recordings", base):
            if folder.is_dir() and (folder is not base or path is not None):
                return folder
    if path is None:
        raise SourceUnavailable("no SuperWhisper folder found (" + ", ".join(DEFAULT_ROOTS) + "); set `path` to the "
                                "folder chosen in SuperWhisper's settings. Nothing indexed was removed.")
    raise SourceUnavailable(f"{path} does not exist or is no folder; check `path` (SuperWhisper's folder is a setting "
                            "of the app). Nothing indexed from it was removed.")


def classify(data: bytes, fresh: bool) -> dict | tuple[str, str]:
    """meta.json → its fields when the recording is complete, else (kind, message) of why not (yet)."""
    try:
        meta = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        if fresh:
            return "incomplete", "meta.json is being written (not valid JSON yet); it is read again when it changes"
        return "corrupt", "meta.json is not valid JSON; it is read again when SuperWhisper rewrites it"
    if not isinstance(meta, dict):
        return "corrupt", "meta.json holds no JSON object; it is read again when it changes"
    if all(meta.get(f) is None for f in TEXT_FIELDS):
        return "incomplete", ("the recording is still running or being processed (no transcript yet)" if fresh else
                              "the recording never finished (no transcript in meta.json; cancelled?)")
    if fresh and meta.get("result") is None and meta.get("llmResult") is None:
        return "incomplete", "the transcript is being processed (result not written yet); it is read again later"
    return meta


def recording_document(name: str, meta: dict, audio: list[str], extra: dict) -> Document:
    """Derived text (result, llmResult) and the transcript (rawResult, else segments) as sections."""
    raw = _text(meta.get("rawResult")) or _segments(meta.get("segments"))
    derived = [t for t in dict.fromkeys((_text(meta.get("result")), _text(meta.get("llmResult")))) if t]
    sections = [Section(t, ("Result" if i == 0 else "LLM result",)) for i, t in enumerate(derived) if _differs(t, raw)]
    if raw:
        sections.append(Section(raw, ("Transcript",)))
    words = " ".join(s.text for s in sections)
    if not sections or re.sub(r"[^\w ]+", "", words.lower()).strip() in SILENCE:
        raise ParseError("no_text", "the recording has no speech (empty transcript, or only a silence artefact)")
    ts, source = recording_time(name, meta.get("datetime"))
    duration = meta.get("duration")
    metadata = {**extra, "recording": name, "time_source": source, "audio": audio,
                "duration_s": round(duration / 1000, 1) if isinstance(duration, (int, float)) else None,
                **{label: meta.get(k) for k, label in META if isinstance(meta.get(k), (str, int, float, bool))}}
    return Document(title=_title(sections[0].text) or f"Recording {name}", sections=tuple(sections), ts=ts,
                    metadata={k: v for k, v in metadata.items() if v not in ("", [], None)})


def recording_time(name: str, iso: object) -> tuple[int | None, str]:
    """(unix seconds, folder|datetime|none): the folder's epoch (s or ms), else `datetime` read as UTC."""
    if name.isdigit() and 9 <= len(name) <= 13:
        ts = int(name) // (1000 if len(name) > 10 else 1)
        if 946684800 <= ts < 4102444800:  # 2000 … 2100
            return ts, "folder"
    if isinstance(iso, str) and iso.strip():
        try:
            when = datetime.fromisoformat(iso.strip().replace("Z", "+00:00"))
        except ValueError:
            return None, "none"
        return int((when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()), "datetime"
    return None, "none"


def _text(value: object) -> str:
    return " ".join(value.split()) if isinstance(value, str) else ""


def _segments(value: object) -> str:
    if not isinstance(value, list):
        return ""
    return " ".join(t for t in (_text(s.get("text")) for s in value if isinstance(s, dict)) if t)


def _differs(a: str, b: str) -> bool:
    norm = lambda s: re.sub(r"\W+", " ", s.lower()).strip()  # noqa: E731
    return norm(a) != norm(b)


def _title(text: str, limit: int = 80) -> str:
    text = text.lstrip("-*•·– ")
    first = re.split(r"(?<=[.!?。！？])\s", text, maxsplit=1)[0]
    return first if len(first) <= limit else first[: limit - 1].rsplit(" ", 1)[0] + "…"


def _cli_params() -> tuple:
    import click

    return (click.Option(["--path"], type=click.Path(exists=True, file_okay=False, path_type=Path),
                         help="SuperWhisper's recordings folder (or the superwhisper folder above it; registers the "
                              "collection); without it the configured superwhisper sources are indexed."),)


def _cli_source(path: Path | None = None, **_) -> dict | None:
    return None if path is None else {"path": str(path)}


def _source_type():
    from rag_pipelines.sources.registry import SourceType

    return SourceType(type="superwhisper", options=SuperWhisperOptions, build=SuperWhisperSource, collection="voice",
                      kind="system", summary="SuperWhisper recordings: transcript and derived text per recording "
                      "(time, duration, mode, model).", cli_params=_cli_params(), cli_source=_cli_source)


SOURCE = _source_type()
