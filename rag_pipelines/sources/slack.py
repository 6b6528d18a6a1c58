"""A Slack workspace export (ZIP or folder) as a Source: one item per conversation window (sources.md §6a).

Conversations: each public channel (channels.json), private channel (groups.json), group DM (mpims.json) and DM
(dms.json) is one, read from its folder of `YYYY-MM-DD.json` day files; each thread (a root message with replies,
wherever the replies' day files are) is one more. Windows are cut as for every chat source
(parsers/conversation.py: a 4 h silence or a size bound). The export is read by slack_export.py: a ZIP in place,
member by member, never extracted to disk.

Messages: user ids become display names as Slack shows them (users.json: display name, else real name, else
name), in the text too (`<@U123>` → `@Ann`); mrkdwn links and entities are resolved (parsers/mrkdwn.py), in
attachments (pretext, title, text, fields) and Block Kit blocks too (section, header and context blocks always;
rich_text blocks when `text` is empty, since they repeat it); edits are marked; shared files are named (their
URLs carry access tokens and are never indexed); joins, leaves, renames, pins and deleted-thread tombstones are
not content. A bot shows as its message's `username`, else its `bot_profile` name, else the integration name an
export records when the bot was added (`bot_add`: `<…/services/B…|github>`), else "bot".
Participants are `Name <slack:U…>` — a user whose real name differs from the name shown is there under both
(`doubledeez <slack:U1>`, `Hermione Granger <slack:U1>`), so either finds them; `authors` (metadata) are those of
the window's senders, what `--from` matches.

Keys: `<channel|private|mpim|dm>/<conversation id>/<UTC start>~<first ts>`, threads under
`<…>/<conversation id>/thread~<root ts>/…`: stable while messages are added, and across channel renames.
A day file that is not valid JSON (or over limits.max_text_mb) is a failed item `<…>/<id>/file~<day>`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Iterator, Literal, Mapping, NamedTuple, Sequence

from pydantic import Field, field_validator

from rag_pipelines.parsers.conversation import Line, Stub, key_part, split, window_document, window_key
from rag_pipelines.parsers.limits import MB, Limits
from rag_pipelines.parsers.mrkdwn import to_text
from rag_pipelines.sources.base import BaseSource, Loaded, ScanResult, SourceUnavailable, Stamp
from rag_pipelines.sources.chat import ChatOptions
from rag_pipelines.sources.slack_export import Conv, Export, Msg, export_signature, forms, read_export, sender_name

VERSION = "slack-2"  # part of every stamp and content hash: bump when the Document of the same messages changes
MAX_FILE_NAMES = 20


class SlackOptions(ChatOptions):
    type: Literal["slack"] = Field(description="slack: a Slack workspace export (ZIP or its unpacked folder).")
    path: Path = Field(description="The export: the .zip Slack sends, or the folder it unpacks to.")

    @field_validator("path")
    @classmethod
    def _expand(cls, v: Path) -> Path:
        return Path(v).expanduser().resolve()


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
            digest = hashlib.sha1(json.dumps([VERSION, export.users, export.real, export.bots,
                                              [c[:5] for c in export.convs]]).encode()).hexdigest()
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
        export = self._export or Export({}, {}, {}, "", [], {}, {})
        names = {c.id: c.name.lstrip("#") for c in export.convs}
        lines, people, authors, files = [], set(), set(), []
        for m in w.msgs:
            sender = sender_name(m, export)
            if m.user:
                authors.update(forms(m.user, sender, export))
            text = "\n".join(t for t in (to_text(m.text, export.users, names), m.extra) if t.strip())
            notes = (("edited",) if m.edited else ()) + tuple(f"file: {f}" for f in m.files)
            if m.replies and not w.thread:
                notes += (f"thread: {m.replies} {'reply' if m.replies == 1 else 'replies'}",)
            files += m.files
            lines.append(Line(float(m.ts), sender, text[: int(self.limits.max_text_mb * MB)], notes))
        people.update(authors)
        if w.conv.kind in ("dm", "mpim"):
            people.update(p for u in w.conv.members for p in forms(u, export.users.get(u) or u, export))
        meta = {"channel": w.conv.name, "channel_type": w.conv.kind, "channel_id": w.conv.id,
                "thread_ts": w.thread or None, "files": files[:MAX_FILE_NAMES], **dict(self.options.metadata)}
        zone, participants, wrote = self.options.zone(), tuple(sorted(people)), tuple(sorted(authors))
        payload = json.dumps([VERSION, str(zone), w.title, participants, wrote, meta, lines], ensure_ascii=False)
        return Loaded(key, self._uri(w), "chat", stamp=w.stamp, content_hash=hashlib.sha256(payload.encode()).hexdigest(),
                      parse=lambda: window_document(w.title, lines, zone, participants, meta, authors=wrote))


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
