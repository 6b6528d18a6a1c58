"""Slack mrkdwn → plain text: mentions and channels by name, links with their labels, entities unescaped.

`<@U123>` → `@Ann` (through a users map), `<#C123|general>` → `#general`, `<!here>` → `@here`,
`<!subteam^S1|@team>` → `@team`, `<https://x|label>` → `label (https://x)`, `<mailto:a@b|a@b>` → `a@b`,
then `&amp; &lt; &gt;` (Slack escapes only these three). Also the text of Block Kit blocks (rich_text, and the
mrkdwn or plain text of section, header and context blocks; buttons and other controls are not content) and of
legacy attachments (pretext, title, text, fields; the fallback when they have none), markup resolved the same way.
"""

from __future__ import annotations

import html
import re
from typing import Mapping, NamedTuple

ANGLE = re.compile(r"<([^<>\n]{1,2000})>")


def to_text(text: str, users: Mapping[str, str], channels: Mapping[str, str] | None = None) -> str:
    channels = channels or {}

    def one(m: re.Match) -> str:
        inner = m.group(1)
        target, _, label = inner.partition("|")
        if target.startswith("@"):
            ident = target[1:]
            return "@" + (users.get(ident) or label or ident)
        if target.startswith("#"):
            ident = target[1:]
            return "#" + (label or channels.get(ident) or ident)
        if target.startswith("!"):
            special = target[1:].split("^", 1)[0]
            return label if label else "@" + special
        if target.startswith("mailto:"):
            return label or target[len("mailto:"):]
        if label and label != target:
            return f"{label} ({target})"
        return target

    return html.unescape(ANGLE.sub(one, text or "")) if "&" in (text or "") or "<" in (text or "") else (text or "")


def blocks_text(blocks: object, users: Mapping[str, str], channels: Mapping[str, str] | None = None,
                rich: bool = True) -> str:
    """The words of Block Kit blocks; rich=False leaves out rich_text blocks (they repeat a message's `text`)."""
    out: list[str] = []
    _walk(blocks, out, _Resolve(users, channels or {}, rich), 0)
    return "\n".join(line.rstrip() for line in "".join(out).split("\n") if line.strip()).strip()


def attachments_text(attachments: object, users: Mapping[str, str], channels: Mapping[str, str] | None = None) -> str:
    """Legacy (and unfurl) attachments: pretext, author, title, text, fields, and blocks; the fallback when none."""
    out: list[str] = []
    for a in attachments if isinstance(attachments, list) else ():
        if not isinstance(a, dict):
            continue
        parts = [a.get(k) for k in ("pretext", "author_name", "title", "text")]
        parts += [f"{f.get('title', '')}: {f.get('value', '')}".strip(": ") for f in a.get("fields") or ()
                  if isinstance(f, dict)]
        parts = [to_text(str(p), users, channels) for p in parts if p] + [blocks_text(a.get("blocks"), users, channels)]
        parts = [p for p in parts if p.strip()] or [to_text(str(a.get("fallback") or ""), users, channels)]
        out += [p for p in parts if p.strip() and p not in out]
    return "\n".join(out)


class _Resolve(NamedTuple):
    users: Mapping[str, str]
    channels: Mapping[str, str]
    rich: bool  # rich_text blocks too

    def user(self, uid: str) -> str:
        return "@" + (self.users.get(uid) or uid)

    def channel(self, cid: str) -> str:
        return "#" + (self.channels.get(cid) or cid)


LINE_BLOCKS = ("rich_text_section", "rich_text_preformatted", "rich_text_quote", "rich_text_list", "section",
               "header", "context")


def _walk(node: object, out: list[str], ctx: _Resolve, depth: int) -> None:
    if depth > 20:
        return
    if isinstance(node, list):
        for item in node:
            _walk(item, out, ctx, depth + 1)
        return
    if not isinstance(node, dict) or node.get("type") == "actions" or (node.get("type") == "rich_text" and not ctx.rich):
        return
    out.append(_leaf(node, ctx))
    for child in ("text", "fields", "elements", "blocks"):
        if isinstance(node.get(child), (list, dict)):
            _walk(node[child], out, ctx, depth + 1)
    if node.get("type") in LINE_BLOCKS:
        out.append("\n")


def _leaf(node: dict, ctx: _Resolve) -> str:
    """The words of one element itself (not of its children)."""
    kind, text = node.get("type"), node.get("text")
    if kind == "text" and isinstance(text, str):  # a run of rich text
        return text
    if kind == "plain_text" and isinstance(text, str):  # a text object: a line of its own
        return text + "\n"
    if kind == "mrkdwn" and isinstance(text, str):
        return to_text(text, ctx.users, ctx.channels) + "\n"
    if kind == "link":
        return str(node.get("text") or node.get("url") or "")
    if kind == "user":
        return ctx.user(str(node.get("user_id", "")))
    if kind == "channel":
        return ctx.channel(str(node.get("channel_id", "")))
    if kind == "emoji":
        return f":{node.get('name', '')}:"
    return ""
