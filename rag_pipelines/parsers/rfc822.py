"""A raw RFC 5322 message → MailRecord: headers decoded, people normalised, date, body chosen, attachments named.

For mail sources that hold whole messages (a Takeout mbox, .eml files). Tolerant by design:

- headers: RFC 2047 encoded words (one that does not decode is kept as written), and raw 8-bit bytes (UTF-8, else
  cp1252); addresses as Mailman's pipermail archives obfuscate them (`goran at example.com`) are read back;
- parts: base64 and quoted-printable; the declared charset when it decodes the bytes, else UTF-8, else cp1252
  (a bad or unknown declared charset, or a part that lies about its charset, still gives text);
- body: the first inline text/plain with text, else text/html (made text later by mail_document), else a
  text/calendar invitation's summary; attachments (a disposition of attachment, or a named non-text part) are
  named, never decoded;
- date: `Date`, else the newest `Received` hop, else a fallback the caller gives (an mbox's From_ line);
  a date without a zone is read as UTC; years outside 1970–2100 are no date.
"""

from __future__ import annotations

import codecs
import email
import re
from datetime import datetime, timezone
from email.message import Message
from email.utils import getaddresses, parsedate_to_datetime

from rag_search.people import participant

from rag_pipelines.parsers.mail import MailRecord, calendar_text, decode_part
from rag_pipelines.parsers.mail_headers import decode_header_value, normalise_message_id

FOLD = re.compile(r"\r?\n(?=[ \t])")
LATIN = ("latin-1", "iso8859-1", "cp1252", "iso8859-15")
ATTACHMENT_TYPES = ("application/", "image/", "audio/", "video/", "model/", "font/")
OBFUSCATED = re.compile(r"(?<![\w.+-])([\w.+-]+) at ((?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,})(?![\w.-])", re.ASCII)


def mail_record(raw: bytes, *, max_text: int, fallback_ts: int | None = None, tags: tuple[str, ...] = (),
                thread: str = "", extra: tuple[tuple[str, object], ...] = ()) -> MailRecord:
    """What a mail document is made from: raw is the message (headers and body), LF or CRLF."""
    msg = email.message_from_bytes(raw)
    h = headers(msg)
    people = {name: addresses(h.get(name, [])) for name in ("from", "to", "cc", "bcc", "sender")}
    ts, date_source = message_time(h)
    if ts is None and fallback_ts is not None:
        ts, date_source = fallback_ts, "envelope"
    body, source, attachments = choose_body(msg)
    more: dict[str, object] = {"body_source": source, "date_source": date_source}
    if len(body) > max_text:
        body = body[:max_text]
        more["parse_warning"] = f"body cut to limits.max_text_mb ({max_text // (1024 * 1024)} MB)"
    sender = (people["from"] or people["sender"] or [""])[0]
    return MailRecord(
        subject=first(h, "subject"), body=body, html=source == "html", ts=ts, sender=sender,
        to=tuple(people["to"]), cc=tuple(people["cc"]), bcc=tuple(people["bcc"]),
        message_id=normalise_message_id(first(h, "message-id")), thread=thread,
        in_reply_to=normalise_message_id(first(h, "in-reply-to")), tags=tags, attachments=attachments,
        extra=tuple(extra) + tuple((k, v) for k, v in more.items() if v not in ("", None)))


# -- headers ----------------------------------------------------------------------------------------------------


def headers(msg: Message) -> dict[str, list[str]]:
    """Lower-cased name → values as text (unfolded, 8-bit bytes decoded; encoded words kept for addresses)."""
    out: dict[str, list[str]] = {}
    for name, value in msg.raw_items():
        out.setdefault(name.lower(), []).append(FOLD.sub("", eight_bit(str(value))).strip())
    return out


def first(h: dict[str, list[str]], name: str) -> str:
    """The first value of a header, encoded words decoded, whitespace collapsed."""
    values = h.get(name)
    return " ".join(decode_header_value(values[0]).split()) if values else ""


def eight_bit(value: str) -> str:
    """A header as the parser gives it (raw bytes as surrogates) → text: UTF-8 when it is, else cp1252."""
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        raw = value.encode("ascii", "surrogateescape")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("cp1252", errors="replace")


def addresses(values: list[str]) -> list[str]:
    """'Name <addr>' participants of address headers (names decoded after the list is split on commas)."""
    out = []
    values = [v if "@" in v else OBFUSCATED.sub(r"\1@\2", v) for v in values]  # pipermail: `goran at example.com`
    for name, addr in getaddresses(values):
        who = participant(" ".join(decode_header_value(name).split()), addr if "@" in addr else "")
        if not who and addr:
            who = participant(None, addr)
        if who:
            out.append(who)
    return list(dict.fromkeys(out))


# -- dates ------------------------------------------------------------------------------------------------------


def message_time(h: dict[str, list[str]]) -> tuple[int | None, str]:
    """(unix seconds, which header gave it): Date, else the newest Received hop; (None, 'none')."""
    for value in h.get("date", [])[:1]:
        ts = parse_date(value)
        if ts is not None:
            return ts, "date"
    for value in h.get("received", [])[:1]:  # the first is the newest hop: when the mailbox got it
        ts = parse_date(value.rpartition(";")[2])
        if ts is not None:
            return ts, "received"
    return None, "none"


def parse_date(value: str) -> int | None:
    """An RFC 5322 date → unix seconds (no zone: UTC); None when it is missing, invalid or implausible."""
    try:
        when = parsedate_to_datetime(" ".join(value.split()))
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return unix(when)


def unix(when: datetime) -> int | None:
    try:
        ts = int(when.timestamp())
    except (OverflowError, OSError, ValueError):
        return None
    return ts if 0 < ts < 4102444800 else None  # 1970 … 2100


# -- parts ------------------------------------------------------------------------------------------------------


def choose_body(msg: Message) -> tuple[str, str, tuple[str, ...]]:
    """(text, plain|html|calendar|none, attachment names)."""
    found: dict[str, str] = {}
    names: list[str] = []
    for part in msg.walk():
        if part.is_multipart():
            continue
        ctype = part.get_content_type()
        name = filename(part)
        if part.get_content_disposition() == "attachment" or (name and ctype.startswith(ATTACHMENT_TYPES)):
            names.append(name or ctype)
            continue
        kind = {"text/plain": "plain", "text/html": "html", "text/calendar": "calendar"}.get(ctype)
        if kind and kind not in found:
            text = part_text(part)
            if text.strip():
                found[kind] = calendar_text(text) if kind == "calendar" else text
    for kind in ("plain", "html", "calendar"):
        if kind in found:
            return found[kind], kind, tuple(dict.fromkeys(names))
    return "", "none", tuple(dict.fromkeys(names))


def filename(part: Message) -> str:
    try:
        name = part.get_filename() or ""
    except (LookupError, UnicodeError, ValueError):
        name = ""
    return " ".join(decode_header_value(eight_bit(name)).split()) if name else ""


def part_text(part: Message) -> str:
    """A text part's text: transfer-decoded, then its declared charset if it fits, else UTF-8, else cp1252."""
    try:
        payload = part.get_payload(decode=True) or b""
    except (ValueError, TypeError):
        payload = b""
    if isinstance(payload, str):
        return payload
    try:
        charset = codecs.lookup(part.get_content_charset() or "ascii").name
    except LookupError:  # unknown-8bit, x-unknown, a typo: guess
        charset = "ascii"
    if charset in LATIN and not payload.isascii():
        try:
            return payload.decode("utf-8")  # UTF-8 labelled Latin-1 (a common lie); real Latin-1 is rarely valid UTF-8
        except UnicodeDecodeError:
            pass
    if charset == "iso8859-1":  # as browsers do (WHATWG): a Latin-1 label means windows-1252 (€, „, –)
        return payload.decode("cp1252", errors="replace")
    if charset != "ascii":
        try:
            return payload.decode(charset)
        except (UnicodeDecodeError, ValueError):
            pass
    return decode_part(payload)  # UTF-8, else cp1252
