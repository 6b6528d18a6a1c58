"""A Slack workspace export generated from the documented format (../shared/reference/sources.md §6a).

users.json (a display name, a real name only, a deleted user, a bot user), channels.json (two channels, one with
a non-ASCII name), groups.json (a private channel), mpims.json (a group DM), dms.json (a DM), and one folder per
conversation of `YYYY-MM-DD.json` day files. Nasty cases in #general: a channel_join; text with a user mention,
a channel mention, a labelled link and `&amp; &lt;` escapes; an edited message; a bot_message whose text is only
in an unfurl attachment; a file_share whose url_private_download carries a `?t=` token; a thread whose last
reply, a thread_broadcast, lies in the next day's file; a 4 h silence. The group DM's message has an empty
`text` and its words only in rich_text blocks. `build_zip` writes the ZIP Slack sends (optionally under a top
folder); `build_folder` the unpacked folder.
"""

from __future__ import annotations

import json
import zipfile
from datetime import datetime, timezone
from pathlib import Path

TEAM = "T024TEAM1"
ANN, BOB, CAROL, SAM, BOT = "U024ANN", "U024BOB", "U024CAROL", "U024SAM", "B024DEPLOY"
TOKEN = "xoxe-SECRET-TOKEN-4711"

USERS = [
    {"id": ANN, "team_id": TEAM, "name": "ann", "real_name": "Ann Example", "deleted": False,
     "profile": {"real_name": "Ann Example", "display_name": "", "email": "ann@example.com"}, "tz": "Europe/Berlin"},
    {"id": BOB, "team_id": TEAM, "name": "bob", "real_name": "Bob Baker", "deleted": False,
     "profile": {"real_name": "Bob Baker", "display_name": "bobby"}},
    {"id": CAROL, "team_id": TEAM, "name": "carol", "deleted": True, "profile": {"real_name": "Carol Gone"}},
    {"id": SAM, "team_id": TEAM, "name": "sam", "real_name": "Sam Me", "profile": {"display_name": "Sam"}},
    {"id": "U024DEPLOYBOT", "team_id": TEAM, "name": "deploybot", "is_bot": True, "profile": {"real_name": "deploybot"}},
]
GENERAL, ROOF, PRIV, MPIM, DM = "C01GENERAL", "C02ROOF", "G03LEAD", "G05MPIM", "D04ANNSAM"
ROOF_NAME = "dachgärten-🌱"
CHANNELS = [
    {"id": GENERAL, "name": "general", "created": 1700000000, "creator": ANN, "is_archived": False, "is_general": True,
     "members": [ANN, BOB, SAM], "topic": {"value": "Company-wide", "creator": ANN, "last_set": 1700000000},
     "purpose": {"value": "", "creator": "", "last_set": 0}},
    {"id": ROOF, "name": ROOF_NAME, "created": 1700000000, "creator": CAROL, "is_archived": False,
     "is_general": False, "members": [ANN, CAROL]},
]
GROUPS = [{"id": PRIV, "name": "leadership", "created": 1700000000, "creator": SAM, "members": [ANN, SAM]}]
MPIMS = [{"id": MPIM, "name": "mpdm-ann--bobby--sam-1", "created": 1700000000, "creator": SAM,
          "members": [ANN, BOB, SAM]}]
DMS = [{"id": DM, "created": 1700000000, "members": [ANN, SAM]}]


def ts(iso: str, micro: int = 100) -> str:
    """A Slack ts: seconds.microseconds as a string."""
    return f"{int(datetime.fromisoformat(iso).replace(tzinfo=timezone.utc).timestamp())}.{micro:06d}"


def unix(iso: str) -> int:
    return int(datetime.fromisoformat(iso).replace(tzinfo=timezone.utc).timestamp())


def msg(when: str, user: str | None, text: str, **extra) -> dict:
    m = {"type": "message", "text": text, "ts": ts(when)}
    if user:
        m |= {"user": user, "client_msg_id": f"c-{ts(when)}", "team": TEAM}
    return m | extra


ROOT = ts("2026-03-02T23:00:00")
KICKOFF = msg("2026-03-02T09:05:00", ANN, f"Kickoff for the <#{ROOF}|{ROOF_NAME}> project: <@{BOB}> owns the budget, "
              "see <https://wiki.example.com/offsite|the offsite wiki> &amp; ping me if 2 &lt; 3")
EDITED = msg("2026-03-02T11:00:00", BOB, "Budget is 12k EUR for the offsite",
             edited={"user": BOB, "ts": ts("2026-03-02T11:02:00")})
DEPLOY = msg("2026-03-02T11:30:00", None, "", subtype="bot_message", bot_id=BOT, username="deploybot",
             attachments=[{"fallback": "Deploy succeeded", "title": "Deploy succeeded",
                           "text": "api v2.3.1 is live on the capybara cluster"}])
FILE = msg("2026-03-02T12:00:00", ANN, "Here is the plan for the offsite", subtype="file_share",
           files=[{"id": "F0PLAN", "name": "offsite-plan.pdf", "title": "offsite-plan.pdf", "mimetype": "application/pdf",
                   "size": 48213, "url_private": "https://files.slack.com/files-pri/T024-F0PLAN/offsite-plan.pdf",
                   "url_private_download": f"https://files.slack.com/files-pri/T024-F0PLAN/download/offsite-plan.pdf"
                                           f"?t={TOKEN}", "permalink": "https://example.slack.com/files/U024ANN/F0PLAN"}])
THREAD_ROOT = msg("2026-03-02T23:00:00", ANN, "Where should the offsite be?", thread_ts=ROOT, reply_count=2,
                  reply_users=[BOB, SAM], replies=[{"user": BOB, "ts": ts("2026-03-02T23:30:00")},
                                                   {"user": SAM, "ts": ts("2026-03-03T00:05:00")}],
                  latest_reply=ts("2026-03-03T00:05:00"))
REPLY = msg("2026-03-02T23:30:00", BOB, "The lake hotel, it has the best sauna", thread_ts=ROOT, parent_user_id=ANN)
BROADCAST = msg("2026-03-03T00:05:00", SAM, "Agreed, booking the lake hotel tomorrow", thread_ts=ROOT,
                parent_user_id=ANN, subtype="thread_broadcast")
HEADCOUNT = msg("2026-03-04T10:00:00", ANN, "Final headcount for the offsite is 14 people")

DAYS = {
    "general": {
        "2026-03-02": [msg("2026-03-02T09:00:00", BOB, f"<@{BOB}> has joined the channel", subtype="channel_join"),
                       KICKOFF, EDITED, DEPLOY, FILE, THREAD_ROOT, REPLY],
        "2026-03-03": [BROADCAST],
        "2026-03-04": [HEADCOUNT],
    },
    ROOF_NAME: {"2026-03-05": [msg("2026-03-05T08:00:00", CAROL, "Tomaten brauchen viel Sonne auf dem Dach")]},
    "leadership": {"2026-03-06": [msg("2026-03-06T15:00:00", SAM, "Salary bands for 2027 stay confidential")]},
    "mpdm-ann--bobby--sam-1": {"2026-03-07": [msg("2026-03-07T12:00:00", SAM, "", blocks=[{
        "type": "rich_text", "block_id": "b1", "elements": [{"type": "rich_text_section", "elements": [
            {"type": "text", "text": "Lunch at the ramen place, "}, {"type": "user", "user_id": BOB},
            {"type": "text", "text": "? "}, {"type": "emoji", "name": "ramen"}]}]}])]},
    DM: {"2026-03-02": [msg("2026-03-02T16:00:00", ANN, "can you call me about the offsite?"),
                        msg("2026-03-02T16:01:00", SAM, "sure, at 5")]},
}


def key(kind: str, conv: str, first: dict, thread: str | None = None) -> str:
    when = datetime.fromtimestamp(float(first["ts"]), timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    base = f"{kind}/{conv}" + (f"/thread~{thread}" if thread else "")
    return f"{base}/{when}~{first['ts']}"


EXPECTED = {  # window key → the ts of its messages
    key("channel", GENERAL, KICKOFF): [KICKOFF, EDITED, DEPLOY, FILE],
    key("channel", GENERAL, THREAD_ROOT): [THREAD_ROOT, BROADCAST],
    key("channel", GENERAL, HEADCOUNT): [HEADCOUNT],
    key("channel", GENERAL, THREAD_ROOT, ROOT): [THREAD_ROOT, REPLY, BROADCAST],
    key("channel", ROOF, DAYS[ROOF_NAME]["2026-03-05"][0]): DAYS[ROOF_NAME]["2026-03-05"],
    key("private", PRIV, DAYS["leadership"]["2026-03-06"][0]): DAYS["leadership"]["2026-03-06"],
    key("mpim", MPIM, DAYS["mpdm-ann--bobby--sam-1"]["2026-03-07"][0]): DAYS["mpdm-ann--bobby--sam-1"]["2026-03-07"],
    key("dm", DM, DAYS[DM]["2026-03-02"][0]): DAYS[DM]["2026-03-02"],
}


def files(days: dict | None = None) -> dict[str, bytes]:
    out = {"users.json": USERS, "channels.json": CHANNELS, "groups.json": GROUPS, "mpims.json": MPIMS, "dms.json": DMS,
           "integration_logs.json": [], "canvases.json": []}
    data = {name: json.dumps(value, indent=1, ensure_ascii=False).encode() for name, value in out.items()}
    for folder, by_day in (DAYS if days is None else days).items():
        for day, messages in by_day.items():
            data[f"{folder}/{day}.json"] = json.dumps(messages, indent=4, ensure_ascii=False).encode()
    return data


def build_zip(path: Path, prefix: str = "", days: dict | None = None, extra: dict[str, bytes] | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in {**files(days), **(extra or {})}.items():
            zf.writestr(prefix + name, data)
    return path


def build_folder(path: Path, days: dict | None = None) -> Path:
    for name, data in files(days).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_bytes(data)
    return path
