"""A Slack workspace export's JSON (ZIP read in place, or its folder) → users, bots, conversations and messages.

Files (sources.md §6a): users.json (org_users.json on Enterprise Grid), channels.json, groups.json, mpims.json,
dms.json, and one folder per conversation of `YYYY-MM-DD.json` day files. A day file that is not valid JSON or is
over limits.max_text_mb is a problem `<kind>/<id>/file~<day>`; a missing or foreign export is SourceUnavailable.

Names (see slack.py for how they are shown): users as Slack shows them (display name, else real name, else name)
and their real names where they differ; bots by the message's `username`, else its `bot_profile` name, else the
integration name a `bot_add`/`bot_remove` message gives (`<https://x.slack.com/services/B0JL6RASU|github>`),
else "bot". Message text stays mrkdwn (resolved when a window is built); attachments and blocks are made text
here (parsers/mrkdwn.py).
"""

from __future__ import annotations

import hashlib
import json
import re
import zipfile
from pathlib import Path
from typing import Mapping, NamedTuple

from rag_pipelines.parsers.conversation import key_part
from rag_pipelines.parsers.limits import MB, Limits, human_size
from rag_pipelines.parsers.mrkdwn import attachments_text, blocks_text, to_text
from rag_pipelines.sources.base import SourceUnavailable
from rag_search.people import participant

LISTS = (("channels.json", "channel"), ("groups.json", "private"), ("mpims.json", "mpim"), ("dms.json", "dm"))
NOT_CONTENT = frozenset({"channel_join", "channel_leave", "group_join", "group_leave", "channel_archive",
                         "channel_unarchive", "group_archive", "group_unarchive", "channel_name", "group_name",
                         "pinned_item", "unpinned_item", "bot_add", "bot_remove", "tombstone",
                         "channel_convert_to_private", "channel_convert_to_public", "reminder_add"})
KNOWN = {"USLACKBOT": "Slackbot"}  # users no users.json lists
BOT_ADDED = re.compile(r"/services/(B[A-Z0-9]+)\|([^<>|]{1,80})>")  # bot_add / bot_remove: the integration's name


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
    name: str  # the message's `username`, else its bot_profile's name (bots)
    text: str
    subtype: str
    edited: bool
    files: tuple[str, ...]
    thread_ts: str
    replies: int
    extra: str  # attachments' and Block Kit blocks' text (rich_text blocks only when `text` is empty)


class Export(NamedTuple):
    users: dict[str, str]  # id → name as shown (display name, else real name, else name)
    real: dict[str, str]  # id → real name, where it differs from the name shown
    bots: dict[str, str]  # bot id → its name (bot_profile, or the integration's name from a bot_add message)
    team: str
    convs: list[Conv]
    messages: dict[str, list[Msg]]  # conversation key → its messages (every day file)
    problems: dict[str, tuple[str, str]]  # local key → (kind, message)


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
    users, real, team = _users(files)
    convs = _conversations(files, users)
    names = {c.id: c.name.lstrip("#") for c in convs}
    messages, problems, bots = {}, {}, {}
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
            data = data if isinstance(data, list) else []
            _learn_bots(data, bots)
            msgs.extend(m for m in (_message(d, users, names) for d in data) if m)
    return Export(users, real, bots, team, convs, messages, problems)


def _users(files: _Files) -> tuple[dict[str, str], dict[str, str], str]:
    """(id → name as shown, id → real name where it differs, team id) from users.json / org_users.json."""
    users, real, team = {}, {}, ""
    for u in _json(files, "users.json") + _json(files, "org_users.json"):
        if isinstance(u, dict) and u.get("id"):
            profile = u.get("profile") if isinstance(u.get("profile"), dict) else {}
            full = " ".join(str(profile.get("real_name") or u.get("real_name") or "").split())
            shown = " ".join(str(profile.get("display_name") or full or u.get("name") or u["id"]).split())
            users[u["id"]] = shown
            if full and full.lower() != shown.lower():
                real[u["id"]] = full
            team = team or str(u.get("team_id") or "")
    return users, real, team


def _conversations(files: _Files, users: Mapping[str, str]) -> list[Conv]:
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
    return convs


def _learn_bots(data: list, bots: dict[str, str]) -> None:
    """Bot names the day's messages tell: a bot message's bot_profile, an integration's name in bot_add/remove."""
    for d in data:
        if not isinstance(d, dict):
            continue
        profile = d.get("bot_profile") if isinstance(d.get("bot_profile"), dict) else {}
        if d.get("bot_id") and profile.get("name"):
            bots.setdefault(str(d["bot_id"]), " ".join(str(profile["name"]).split()))
        if d.get("subtype") in ("bot_add", "bot_remove"):
            for bot_id, name in BOT_ADDED.findall(str(d.get("text") or "")):
                bots.setdefault(bot_id, " ".join(name.split()))


def _message(d: object, users: Mapping[str, str], channels: Mapping[str, str]) -> Msg | None:
    if not isinstance(d, dict) or d.get("type", "message") != "message" or not d.get("ts"):
        return None
    subtype = str(d.get("subtype") or "")
    if subtype in NOT_CONTENT:
        return None
    files = tuple(str(f.get("name") or f.get("title") or "file") for f in d.get("files") or ()
                  if isinstance(f, dict) and f.get("mode") != "tombstone")
    text = str(d.get("text") or "")
    blocks = blocks_text(d.get("blocks"), users, channels, rich=not text.strip()) if d.get("blocks") else ""
    if blocks and " ".join(blocks.split()) in " ".join(to_text(text, users, channels).split()):
        blocks = ""  # a section that only repeats the text
    extra = "\n".join(e for e in (blocks, attachments_text(d.get("attachments"), users, channels)) if e.strip())
    if not text.strip() and not files and not extra:
        return None
    bot = d.get("bot_profile") if isinstance(d.get("bot_profile"), dict) else {}
    return Msg(str(d["ts"]), str(d.get("user") or d.get("bot_id") or ""),
               " ".join(str(d.get("username") or bot.get("name") or "").split()), text, subtype,
               bool(d.get("edited")), files, str(d.get("thread_ts") or ""), int(d.get("reply_count") or 0), extra)


def sender_name(m: Msg, export: Export) -> str:
    """The name Slack shows for the message's sender: the user's, else the bot's (see the module doc)."""
    bot = m.user.startswith("B")
    return (export.users.get(m.user) or m.name or export.bots.get(m.user) or KNOWN.get(m.user)
            or ("bot" if bot else m.user) or "unknown")


def forms(uid: str, shown: str, export: Export) -> tuple[str, ...]:
    """The participant forms of one sender or member: the name shown, and the real name where it differs."""
    real = export.real.get(uid)
    return (participant(shown, f"slack:{uid}"),) + ((participant(real, f"slack:{uid}"),) if real else ())
