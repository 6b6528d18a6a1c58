"""A Slack workspace export (ZIP or folder) as a Source: one item per conversation window (sources.md §6a).

Conversations: each public channel (channels.json), private channel (groups.json), group DM (mpims.json) and DM
(dms.json) is one, read from its folder of `YYYY-MM-DD.json` day files; each thread (a root message with replies,
wherever the replies' day files are) is one more. Windows are cut as for every chat source
(parsers/conversation.py: a 4 h silence or a size bound). A ZIP is read in place, member by member, never
extracted to disk.

Messages: user ids become display names (users.json: display name, else real name, else name), in the text too
(`<@U123>` → `@Ann`); mrkdwn links and entities are resolved (parsers/mrkdwn.py); an empty `text` falls back to
the Block Kit blocks and unfurl attachments; edits are marked; shared files are named (their URLs carry access
tokens and are never indexed); joins, leaves, renames, pins and deleted-thread tombstones are not content.
Participants are `Name <slack:U…>`.

Keys: `<channel|private|mpim|dm>/<conversation id>/<UTC start>~<first ts>`, threads under
`<…>/<conversation id>/thread~<root ts>/…`: stable while messages are added, and across channel renames.
A day file that is not valid JSON (or over limits.max_text_mb) is a failed item `<…>/<id>/file~<day>`.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path
from typing import Iterator, Literal, Mapping, NamedTuple, Sequence

from pydantic import Field, field_validator

from rag_pipelines.parsers.conversation import Line, Stub, key_part, split, window_document, window_key
from rag_pipelines.parsers.limits import MB, Limits, human_size
from rag_pipelines.parsers.mrkdwn import blocks_text, to_text
from rag_pipelines.sources.base import BaseSource, Loaded, ScanResult, SourceUnavailable, Stamp
from rag_pipelines.sources.chat import ChatOptions
from rag_search.people import participant

VERSION = "slack-1"
LISTS = (("channels.json", "channel"), ("groups.json", "private"), ("mpims.json", "mpim"), ("dms.json", "dm"))
NOT_CONTENT = frozenset({"channel_join", "channel_leave", "group_join", "group_leave", "channel_archive",
                         "channel_unarchive", "group_archive", "group_unarchive", "channel_name", "group_name",
                         "pinned_item", "unpinned_item", "bot_add", "bot_remove", "tombstone",
                         "channel_convert_to_private", "channel_convert_to_public", "reminder_add"})
MAX_FILE_NAMES = 20


class SlackOptions(ChatOptions):
    type: Literal["slack"] = Field(description="slack: a Slack workspace export (ZIP or its unpacked folder).")
    path: Path = Field(description="The export: the .zip Slack sends, or the folder it unpacks to.")

    @field_validator("path")
    @classmethod
    def _expand(cls, v: Path) -> Path:
        return Path(v).expanduser().resolve()


class Conv(NamedTuple):
    key: str  # <kind>/<id>, key-safe
    kind: str  # channel, private, mpim, dm
    id: str
    name: str  # as shown: #general, DM: Ann, Bob
    folder: str
    members: tuple[str, ...]


class Msg(NamedTuple):
    ts: str  # kept as the string: it is the message's id in its channel
    user: str  # U… (or B… for a bot without a user)
    name: str  # a bot's username when it has no user
    text: str
    subtype: str
    edited: bool
    files: tuple[str, ...]
    thread_ts: str
    replies: int
    extra: str  # unfurls' titles and texts; Block Kit text when `text` is empty


class Export(NamedTuple):
    users: dict[str, str]  # id → display name
    team: str
    convs: list[Conv]
    messages: dict[str, list[Msg]]  # conversation key → its messages (every day file)
    problems: dict[str, tuple[str, str]]  # local key → (kind, message)


class _Window(NamedTuple):
    conv: Conv
    title: str
    thread: str  # root ts of a thread window, else ''
    msgs: tuple[Msg, ...]
    stamp: str


class SlackSource(BaseSource):
    """The conversations of one Slack export, as windows."""

    type = "slack"

    def __init__(self, options: SlackOptions, label: str | None = None, limits: Limits | None = None):
        super().__init__(label)
        self.options, self.limits = options, limits or Limits()
        self._signature: str | None = None
        self._export: Export | None = None
        self._windows: dict[str, _Window] | None = None
        self._problems: dict[str, tuple[str, str]] = {}

    def scan(self) -> ScanResult:
        signature = export_signature(self.options.path)
        if signature != self._signature or self._windows is None:
            export = read_export(self.options.path, self.limits)
            digest = hashlib.sha1(json.dumps([export.users, [c[:5] for c in export.convs]]).encode()).hexdigest()
            windows: dict[str, _Window] = {}
            for conv in export.convs:
                for key, title, thread, msgs in conversation_windows(conv, export.messages.get(conv.key, []),
                                                                     export.users, self.options):
                    stamp = hashlib.sha1(repr((digest, title, msgs)).encode()).hexdigest()[:20]
                    windows[self.key(key)] = _Window(conv, title, thread, msgs, stamp)
            self._export, self._windows, self._signature = export, windows, signature
            self._problems = {self.key(k): v for k, v in export.problems.items()}
        return ScanResult({k: Stamp(w.stamp, self._uri(w)) for k, w in self._windows.items()}, dict(self._problems))

    def watch_paths(self) -> list:
        path = self.options.path
        return [path] if path.is_dir() else [path.parent] if path.parent.is_dir() else []

    def load(self, keys: Sequence[str], known_uris: Mapping[str, str] | None = None) -> Iterator[Loaded]:
        keys, known = list(dict.fromkeys(keys)), known_uris or {}
        try:
            self.scan()  # cheap when the export is unchanged (its signature), and keeps load consistent with it
        except SourceUnavailable as exc:
            yield from (Loaded(k, known.get(k, k), "chat", stamp="unavailable", error=("unavailable", str(exc)))
                        for k in keys)
            return
        for key in keys:
            if key in (self._windows or {}):
                yield self._loaded(key, self._windows[key])
            elif key in self._problems:
                yield Loaded(key, known.get(key, key), "chat", stamp=f"problem:{self._problems[key][0]}",
                             error=self._problems[key])
            else:
                yield Loaded(key, known.get(key, key), "chat", gone=True)

    def _uri(self, w: _Window) -> str:
        team = self._export.team if self._export else ""
        base = f"slack://channel?team={team}&id={w.conv.id}" if team else f"{self.options.path}#{w.conv.folder}"
        return base + (f"&message={w.thread}" if team and w.thread else "")

    def _loaded(self, key: str, w: _Window) -> Loaded:
        users = self._export.users if self._export else {}
        names = {c.id: c.name.lstrip("#") for c in (self._export.convs if self._export else [])}
        lines, people, files = [], set(), []
        for m in w.msgs:
            sender = users.get(m.user) or m.name or m.user or "unknown"
            if m.user:
                people.add(participant(sender, f"slack:{m.user}"))
            text = "\n".join(t for t in (to_text(m.text, users, names), m.extra) if t.strip())
            notes = (("edited",) if m.edited else ()) + tuple(f"file: {f}" for f in m.files)
            if m.replies and not w.thread:
                notes += (f"thread: {m.replies} {'reply' if m.replies == 1 else 'replies'}",)
            files += m.files
            lines.append(Line(float(m.ts), sender, text[: int(self.limits.max_text_mb * MB)], notes))
        if w.conv.kind in ("dm", "mpim"):
            people.update(participant(users.get(u) or u, f"slack:{u}") for u in w.conv.members)
        meta = {"channel": w.conv.name, "channel_type": w.conv.kind, "channel_id": w.conv.id,
                "thread_ts": w.thread or None, "files": files[:MAX_FILE_NAMES], **dict(self.options.metadata)}
        zone, participants = self.options.zone(), tuple(sorted(people))
        payload = json.dumps([VERSION, str(zone), w.title, participants, meta, lines], ensure_ascii=False)
        return Loaded(key, self._uri(w), "chat", stamp=w.stamp, content_hash=hashlib.sha256(payload.encode()).hexdigest(),
                      parse=lambda: window_document(w.title, lines, zone, participants, meta))


def conversation_windows(conv: Conv, msgs: list[Msg], users: Mapping[str, str], options: ChatOptions):
    """(local key, title, thread root ts or '', messages) of the channel's windows, then of its threads' windows."""
    spec, by_ts = options.window_spec(), {}
    timeline, threads = [], {}
    for m in sorted(msgs, key=lambda m: (float(m.ts), m.ts)):
        by_ts.setdefault(m.ts, m)
        reply = m.thread_ts and m.thread_ts != m.ts
        if not reply or m.subtype == "thread_broadcast":
            timeline.append(m)
        if m.thread_ts:
            threads.setdefault(m.thread_ts, []).append(m)
    groups = [(conv.key, conv.name, "", timeline)]
    for root_ts, members in threads.items():
        if len(members) > 1 or (members and members[0].ts != root_ts):
            root = by_ts.get(root_ts)
            about = " ".join(to_text(root.text, users).split())[:60] if root else ""
            title = f"{conv.name} › thread" + (f": {about}" if about else "")
            groups.append((f"{conv.key}/thread~{key_part(root_ts)}", title, root_ts, members))
    for ckey, title, thread, members in groups:
        unique = {m.ts: m for m in members}
        stubs = [Stub(ts, float(ts), len(m.text) + len(m.extra) + 24 * len(m.files)) for ts, m in unique.items()]
        for part in split(stubs, spec):
            yield window_key(ckey, part[0]), title, thread, tuple(unique[s.id] for s in part)


# -- the export ------------------------------------------------------------------------------------------------


def export_signature(path: Path) -> str:
    """What changes when the export does: the zip's size and mtime, or every file's under the folder."""
    try:
        if path.is_file():
            st = path.stat()
            return f"zip:{st.st_size}:{st.st_mtime_ns}"
        if path.is_dir():
            parts = sorted((str(p.relative_to(path)), p.stat().st_size, p.stat().st_mtime_ns)
                           for p in path.rglob("*.json"))
            return "dir:" + hashlib.sha1(repr(parts).encode()).hexdigest()
    except OSError as exc:
        raise SourceUnavailable(f"{path} cannot be read ({exc.strerror or exc}); check its permissions. "
                                "Nothing indexed from it was removed.") from exc
    raise SourceUnavailable(f"{path} does not exist; check the path in the config. Nothing indexed from it was "
                            "removed.")


class _Files:
    """The export's JSON files by their path inside it, from a zip (read in place) or a folder."""

    def __init__(self, path: Path):
        self.path, self.zip = path, None
        try:
            if path.is_file():
                self.zip = zipfile.ZipFile(path)
                names = {i.filename: i.file_size for i in self.zip.infolist() if not i.is_dir()}
            else:
                names = {str(p.relative_to(path)).replace("\\", "/"): p.stat().st_size for p in path.rglob("*.json")}
        except (OSError, zipfile.BadZipFile) as exc:
            raise SourceUnavailable(f"{path} is not a readable Slack export ({exc}); export the workspace again "
                                    "(Settings → Import/Export). Nothing indexed from it was removed.") from exc
        root = min((n[: -len("users.json")] for n in names if n.endswith("users.json")
                    and n.count("/") <= 1), key=len, default=None)
        if root is None or not any(f"{root}{n}" in names for n, _ in LISTS):
            raise SourceUnavailable(f"{path} has no users.json and channels.json: not a Slack workspace export (a "
                                    "single user's TXT export is not supported). Nothing indexed from it was removed.")
        self.root = root
        self.sizes = {n[len(root):]: s for n, s in names.items() if n.startswith(root)}

    def read(self, name: str) -> bytes:
        if self.zip is not None:
            return self.zip.read(self.root + name)
        return (self.path / (self.root + name)).read_bytes()

    def close(self) -> None:
        if self.zip is not None:
            self.zip.close()


def read_export(path: Path, limits: Limits) -> Export:
    files = _Files(path)
    try:
        return _read(files, limits)
    except (OSError, zipfile.BadZipFile, KeyError) as exc:
        raise SourceUnavailable(f"{path} could not be read ({exc}); it is tried again on the next run. Nothing "
                                "indexed from it was removed.") from exc
    finally:
        files.close()


def _json(files: _Files, name: str) -> list:
    try:
        data = json.loads(files.read(name)) if name in files.sizes else []
    except ValueError as exc:
        raise SourceUnavailable(f"{files.path}: {name} is not valid JSON ({exc}); export the workspace again. "
                                "Nothing indexed from it was removed.") from exc
    return data if isinstance(data, list) else []


def _read(files: _Files, limits: Limits) -> Export:
    users, team = {}, ""
    for u in _json(files, "users.json") + _json(files, "org_users.json"):
        if isinstance(u, dict) and u.get("id"):
            profile = u.get("profile") if isinstance(u.get("profile"), dict) else {}
            users[u["id"]] = " ".join(str(profile.get("display_name") or profile.get("real_name")
                                          or u.get("real_name") or u.get("name") or u["id"]).split())
            team = team or str(u.get("team_id") or "")
    convs = []
    for list_name, kind in LISTS:
        for c in _json(files, list_name):
            if not isinstance(c, dict) or not c.get("id"):
                continue
            members = tuple(str(m) for m in c.get("members") or () if m)
            folder = str(c["id"] if kind == "dm" else c.get("name") or c["id"])
            names = ", ".join(users.get(m, m) for m in members)
            name = {"channel": f"#{folder}", "private": f"#{folder}", "mpim": f"Group DM: {names}",
                    "dm": f"DM: {names}"}[kind]
            convs.append(Conv(f"{kind}/{key_part(str(c['id']))}", kind, str(c["id"]), name, folder, members))
    messages, problems = {}, {}
    for conv in convs:
        msgs = messages.setdefault(conv.key, [])
        for name in sorted(n for n in files.sizes if n.startswith(conv.folder + "/") and n.endswith(".json")):
            day = name[len(conv.folder) + 1 : -len(".json")]
            if "/" in day:
                continue
            problem_key = f"{conv.key}/file~{key_part(day)}"
            if files.sizes[name] > limits.max_text_mb * MB:
                problems[problem_key] = ("too_large", f"{name} is {human_size(files.sizes[name])}, over "
                                         f"limits.max_text_mb ({limits.max_text_mb} MB); raise it in config.yaml")
                continue
            try:
                data = json.loads(files.read(name))
            except ValueError as exc:
                problems[problem_key] = ("corrupt", f"{name} is not valid JSON ({exc}); its messages are left out")
                continue
            msgs.extend(m for m in map(lambda d: _message(d, users), data if isinstance(data, list) else []) if m)
    return Export(users, team, convs, messages, problems)


def _message(d: object, users: Mapping[str, str]) -> Msg | None:
    if not isinstance(d, dict) or d.get("type", "message") != "message" or not d.get("ts"):
        return None
    subtype = str(d.get("subtype") or "")
    if subtype in NOT_CONTENT:
        return None
    files = tuple(str(f.get("name") or f.get("title") or "file") for f in d.get("files") or ()
                  if isinstance(f, dict) and f.get("mode") != "tombstone")
    extra = []
    for a in d.get("attachments") or ():
        if isinstance(a, dict):
            extra += [str(a[k]) for k in ("title", "text") if a.get(k)] or ([str(a["fallback"])] if a.get("fallback")
                                                                          else [])
    text = str(d.get("text") or "")
    if not text.strip() and d.get("blocks"):
        extra.insert(0, blocks_text(d["blocks"], users))
    if not text.strip() and not files and not any(e.strip() for e in extra):
        return None
    bot = d.get("bot_profile") if isinstance(d.get("bot_profile"), dict) else {}
    return Msg(str(d["ts"]), str(d.get("user") or d.get("bot_id") or ""),
               str(d.get("username") or bot.get("name") or ""), text, subtype, bool(d.get("edited")), files,
               str(d.get("thread_ts") or ""), int(d.get("reply_count") or 0), "\n".join(e for e in extra if e.strip()))


def _cli_params() -> tuple:
    import click

    return (click.Option(["--path"], type=click.Path(exists=True, path_type=Path),
                         help="The Slack export: its .zip or unpacked folder (registers the collection); without "
                              "it the configured slack sources are indexed."),)


def _cli_source(path: Path | None = None, **_) -> dict | None:
    return None if path is None else {"path": str(path)}


def _source_type():
    from rag_pipelines.sources.registry import SourceType

    return SourceType(type="slack", options=SlackOptions, build=SlackSource, collection="slack", kind="system",
                      summary="Slack export (ZIP or folder): channels, DMs and threads as conversation windows.",
                      cli_params=_cli_params(), cli_source=_cli_source)


SOURCE = _source_type()
