"""Slack mrkdwn → plain text: mentions and channels by name, links with their labels, entities unescaped.

`<@U123>` → `@Ann` (through a users map), `<#C123|general>` → `#general`, `<!here>` → `@here`,
`<!subteam^S1|@team>` → `@team`, `<https://x|label>` → `label (https://x)`, `<mailto:a@b|a@b>` → `a@b`,
then `&amp; &lt; &gt;` (Slack escapes only these three). Also the text of Block Kit rich_text blocks,
for messages whose `text` is empty.
"""

from __future__ import annotations

import html
import re
from typing import Callable, Mapping

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


def blocks_text(blocks: object, users: Mapping[str, str]) -> str:
    """The words of rich_text blocks (text, links, user and channel mentions, emoji names)."""
    out: list[str] = []
    _walk(blocks, out, lambda uid: "@" + (users.get(uid) or uid), 0)
    return "".join(out).strip()


def _walk(node: object, out: list[str], user: Callable[[str], str], depth: int) -> None:
    if depth > 20:
        return
    if isinstance(node, list):
        for item in node:
            _walk(item, out, user, depth + 1)
        return
    if not isinstance(node, dict):
        return
    kind = node.get("type")
    if kind == "text" and isinstance(node.get("text"), str):
        out.append(node["text"])
    elif kind == "link":
        out.append(str(node.get("text") or node.get("url") or ""))
    elif kind == "user":
        out.append(user(str(node.get("user_id", ""))))
    elif kind == "channel":
        out.append("#" + str(node.get("channel_id", "")))
    elif kind == "emoji":
        out.append(f":{node.get('name', '')}:")
    for child in ("elements", "blocks"):
        if child in node:
            _walk(node[child], out, user, depth + 1)
    if kind in ("rich_text_section", "rich_text_preformatted", "rich_text_quote", "rich_text_list"):
        out.append("\n")
