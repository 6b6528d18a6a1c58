"""Mail text: HTML → text, quoted replies and signatures stripped, SafeLinks decoded, MIME parts decoded.

Plain functions shared by the mail sources (eM Client, Gmail/mbox; headers: mail_headers). `clean_body` is the usual
entry:

    HTML → text (quote and signature containers dropped) → SafeLinks decoded → quoted replies cut
    ("On … wrote:", "Am … schrieb …:", "Le … a écrit :", Outlook's "From: … Sent: …" block,
    "-----Original Message-----" and its translations, '>' lines) → signature cut ("-- ", "Sent from my
    iPhone", a closing sign-off with a short name block).

Stripping never empties a message: when everything would go, the text is kept as it was. Forwards keep
their forwarded content (pass forwarded=True, e.g. from `is_forward(subject)`).
"""

from __future__ import annotations

import base64
import binascii
import codecs
import quopri
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from rag_search.records import Document, Section

from rag_pipelines.parsers.mail_headers import (decode_header_value, format_address, is_forward,  # noqa: F401
                                                normalise_message_id)  # headers: importable from here as before

# -- MIME parts --------------------------------------------------------------------------------------

CHARSET = re.compile(r"""charset\s*=\s*["']?([\w.:+-]+)""", re.IGNORECASE)
BASE64_BODY = re.compile(rb"^[A-Za-z0-9+/=\r\n]{16,}$")
QP_ESCAPE = re.compile(rb"=(?:[0-9A-F]{2}|\r?\n)")
TRANSFER = {4: "base64", 5: "quoted-printable"}  # eM Client's integer enum (assumed MimeKit order; unverified)


def charset_of(content_type: str | None) -> str | None:
    m = CHARSET.search(content_type or "")
    try:
        return codecs.lookup(m.group(1)).name if m else None
    except LookupError:
        return None


def decode_part(body: bytes | str | None, content_type: str | None = None,
                transfer_encoding: int | str | None = None) -> str:
    """Text of one MIME part body: transfer-decoded when it still is encoded, then decoded by its charset."""
    if not isinstance(body, bytes):
        return body or ""
    encoding = TRANSFER.get(transfer_encoding, transfer_encoding) if isinstance(transfer_encoding, int) else \
        (transfer_encoding or "").lower()
    if encoding == "base64" and BASE64_BODY.match(body):
        try:
            body = base64.b64decode(body, validate=False)
        except (binascii.Error, ValueError):
            pass
    elif encoding == "quoted-printable" and QP_ESCAPE.search(body):
        body = quopri.decodestring(body)
    charset = charset_of(content_type)
    if charset:
        return body.decode(charset, errors="replace")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return body.decode("cp1252", errors="replace")


def message_bodies(raw: bytes) -> tuple[str, str]:
    """(text/plain, text/html) of a raw RFC 5322 message (the first of each, attachments skipped)."""
    import email
    from email import policy

    msg = email.message_from_bytes(raw, policy=policy.default)
    found = {"plain": "", "html": ""}
    for part in msg.walk():
        subtype = part.get_content_subtype() if part.get_content_maintype() == "text" else ""
        if subtype in found and not found[subtype] and part.get_content_disposition() != "attachment":
            payload = part.get_payload(decode=True) or b""
            found[subtype] = decode_part(payload, part.get("Content-Type"))
    return found["plain"], found["html"]


def calendar_text(ics: str) -> str:
    """Summary, time, place and description of the events of an iCalendar invitation."""
    unfolded = re.sub(r"\r?\n[ \t]", "", ics)
    labels = {"SUMMARY": "", "DTSTART": "When: ", "LOCATION": "Where: ", "DESCRIPTION": ""}
    out = []
    for line in unfolded.splitlines():
        name, _, value = line.partition(":")
        key = name.split(";", 1)[0].upper()
        if key in labels and value.strip():
            value = value.replace("\\n", "\n").replace("\\N", "\n").replace("\\,", ",").replace("\\;", ";").strip()
            when = re.fullmatch(r"(\d{4})(\d\d)(\d\d)(?:T(\d\d)(\d\d)\d\dZ?)?", value) if key == "DTSTART" else None
            if when:
                y, mo, d, h, mi = when.groups()
                value = f"{y}-{mo}-{d}" + (f" {h}:{mi}" if h else "")
            out.append(labels[key] + value)
    return "\n".join(out)


# -- HTML → text --------------------------------------------------------------------------------------

BLOCK_TAGS = ("p", "div", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "table", "pre",
              "section", "article", "header", "footer", "ul", "ol", "dd", "dt", "hr")
QUOTE_SELECTORS = ("blockquote[type=cite]", ".gmail_quote", "blockquote.gmail_quote", ".moz-cite-prefix",
                   ".yahoo_quoted", "#mail-editor-reference-message-container")
QUOTE_FROM_HERE = ("#divRplyFwdMsg", "#appendonsend")  # Outlook: the original follows as siblings
CUT = "\n\uffffquoted-original\uffff\n"  # where an Outlook original starts (cut after get_text)
SIGNATURE_SELECTORS = (".gmail_signature", "[data-smartmail=gmail_signature]", "#Signature", ".moz-signature",
                       "#signature")


def html_to_text(html: str | bytes, *, strip_quotes: bool = True, strip_signature: bool = True) -> str:
    """The visible text of an HTML mail, one line per block; quote and signature containers dropped."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "lxml")
    for tag in soup(["script", "style", "head", "title", "noscript", "template"]):
        tag.decompose()
    if strip_quotes:
        for css in QUOTE_FROM_HERE:
            for start in soup.select(css):
                for sibling in list(start.find_next_siblings()):
                    sibling.decompose()
                start.replace_with(CUT)  # nested deeper than the original's siblings: cut the text here
        for css in QUOTE_SELECTORS:
            for tag in soup.select(css):
                tag.decompose()
    if strip_signature:
        for css in SIGNATURE_SELECTORS:
            for tag in soup.select(css):
                tag.decompose()
    for br in soup.find_all("br"):
        br.replace_with("\n")
    for tag in soup.find_all(BLOCK_TAGS):
        tag.insert_before("\n")
        tag.insert_after("\n")
    for cell in soup.find_all(["td", "th"]):
        cell.insert_after(" ")
    return tidy(soup.get_text().split(CUT, 1)[0])


INVISIBLE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad"), None)


def tidy(text: str) -> str:
    """Newlines normalised, spaces collapsed per line, invisible characters dropped, ≤1 blank line in a row."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\xa0", " ").translate(INVISIBLE)
    lines = [re.sub(r"[ \t\f\v]+", " ", line).strip() for line in text.split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


# -- SafeLinks ------------------------------------------------------------------------------------------

SAFELINK = re.compile(r"https?://[\w.-]*safelinks\.protection\.outlook\.com/?\?[^\s<>\"'\])]+", re.IGNORECASE)


def decode_safelinks(text: str) -> str:
    """Microsoft SafeLinks (`https://*.safelinks.protection.outlook.com/?url=<encoded>&…`) → the real URL."""

    def real(match: re.Match) -> str:
        url = match.group(0)
        for _ in range(3):  # a wrapped link may be wrapped again
            query = parse_qs(urlsplit(url.replace("&amp;", "&")).query)
            target = (query.get("url") or [""])[0]
            if not target:
                return url
            url = target
            if not SAFELINK.fullmatch(url):
                break
        return url

    return SAFELINK.sub(real, text)


# -- quoted replies -----------------------------------------------------------------------------------

ATTRIBUTION = re.compile(
    r"(?:On\s.{1,250}?\s(?:wrote|writes)"  # English
    r"|Am\s.{1,250}?\sschrieb(?:\s.{0,250}?)?"  # German: Am 04.03.2026 um 09:15 schrieb Jürgen <j@x>:
    r"|.{1,250}?\sschrieb\sam\s.{1,250}?"  # German (Gmail): Jürgen <j@x> schrieb am Mi., 4. März 2026:
    r"|Le\s.{1,250}?\sa\s+écrit"  # French
    r"|El\s.{1,250}?\sescribió"  # Spanish
    r"|Op\s.{1,250}?\sschreef(?:\s.{0,250}?)?"  # Dutch
    r"|Il\s.{1,250}?\sha\s+scritto"  # Italian
    r"|Em\s.{1,250}?\sescreveu"  # Portuguese
    r"|.{1,250}?書きました"  # Japanese
    r")\s?[:：]", re.IGNORECASE)
ORIGINAL = re.compile(
    r"^[-_=\s]*-{2,}\s*(?:Original Message|Ursprüngliche Nachricht|Original-?Nachricht|"
    r"Message d'origine|Message original|Mensaje original|Messaggio originale|Oorspronkelijk bericht|"
    r"Mensagem original|Originalmeddelande|Opprinnelig melding|Alkuperäinen viesti|Oryginalna wiadomość|"
    r"元のメッセージ|原始邮件)\s*-{2,}[-\s]*$", re.IGNORECASE)
FROM_LINE = re.compile(r"^\*?(?:From|Von|De|Van|Da|Från|Fra|Od|Lähettäjä|差出人|送信者|发件人|寄件者)\s?\*?\s?[:：]",
                       re.IGNORECASE)
SENT_LINE = re.compile(r"^\*?(?:Sent|Date|Gesendet|Datum|Envoyé|Date d'envoi|Enviado|Enviado el|Verzonden|Inviato|"
                       r"Skickat|Sendt|Wysłano|Lähetetty|送信日時|日時|发送时间|日期)\s?\*?\s?[:：]", re.IGNORECASE)
SEPARATOR = re.compile(r"^\s*[_—–-]{8,}\s*$")
ATTRIBUTION_WORDS = ("wrote", "writes", "schrieb", "écrit", "escribió", "schreef", "scritto", "escreveu", "書きました")
SUBJECT_LINE = re.compile(r"^\*?(?:Subject|Betreff|Objet|Asunto|Onderwerp|Oggetto|Assunto|Ämne|Emne|Temat|Aihe|件名|主题|主旨)"
                          r"\s?\*?\s?[:：]", re.IGNORECASE)


def _quoted(line: str) -> bool:
    return line.lstrip().startswith(">")


def _attribution(lines: list[str], i: int) -> int:
    """Lines (1-3) of an 'On <date>, X wrote:' header starting at line i, or 0."""
    window = " ".join(lines[i : i + 3]).lower()
    if len(lines[i]) > 400 or not any(word in window for word in ATTRIBUTION_WORDS):
        return 0
    joined = ""
    for n in range(1, 4):
        if i + n > len(lines) or not lines[i + n - 1].strip():
            break
        joined = (joined + " " + lines[i + n - 1].strip()).strip()
        # a real attribution carries a date or an address; "On Monday, Bob wrote:" in a sentence does not
        if ATTRIBUTION.fullmatch(joined) and re.search(r"\d|@", joined):
            return n
    return 0


def _outlook_block(lines: list[str], i: int) -> int:
    """1 when line i starts Outlook's 'From: … Sent: …' header (optionally after a ____ separator), else 0."""
    j = _next_text(lines, i + 1) if SEPARATOR.match(lines[i]) else i
    if j >= len(lines) or not FROM_LINE.match(lines[j].strip()):
        return 0
    window = [line.strip() for line in lines[j + 1 : j + 7]]
    has = lambda pattern: any(pattern.match(line) for line in window)  # noqa: E731
    return 1 if has(SENT_LINE) and has(SUBJECT_LINE) else 0


def _next_text(lines: list[str], i: int) -> int:
    return next((j for j in range(i, len(lines)) if lines[j].strip()), len(lines))


def reply_header(lines: list[str], i: int) -> int:
    """Lines of a reply header (attribution, original-message separator, Outlook block) at line i, or 0."""
    if ORIGINAL.match(lines[i]):
        return 1
    return _outlook_block(lines, i) or _attribution(lines, i)


def strip_quoted(text: str) -> str:
    """The new part of a reply: '>' lines dropped, and everything from a top-posted reply header on."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        if _quoted(lines[i]):
            i += 1
            continue
        n = reply_header(lines, i) if lines[i].strip() else 0
        if n:
            after = _next_text(lines, i + n)
            if after < len(lines) and _quoted(lines[after]):
                i += n  # the attribution of a '>' block (bottom or inline posting): the answers go on
                continue
            break  # top posting: the rest is the original message
        out.append(lines[i])
        i += 1
    kept = "\n".join(out).strip()
    return kept or text.strip()


# -- signatures ---------------------------------------------------------------------------------------

MOBILE = re.compile(
    r"^(?:Sent from my \w+.*|Sent from (?:Outlook|Mail|Yahoo Mail|Gmail|Samsung).*|Sent with .{1,40}|"
    r"Get Outlook for \w+.*|Von meinem \w+.*gesendet\.?|Gesendet von .{1,60}|Envoyé de mon \w+.*|"
    r"Envoyé depuis .{1,60}|Enviado desde mi \w+.*|Enviado do meu \w+.*|Inviato da .{1,40}|"
    r"Verstuurd vanaf mijn \w+.*|Skickat från min \w+.*)$", re.IGNORECASE)
SIGN_OFF = (r"(?:(?:best|kind|warm|warmest|many)\s+)?(?:regards|wishes)|best|cheers|thanks|thank you|many thanks|thx|"
            r"sincerely|yours sincerely|yours truly|all the best|take care|"
            r"mit freundlichen grüßen|mit freundlichen gruessen|freundliche grüße|viele grüße|beste grüße|"
            r"liebe grüße|herzliche grüße|schöne grüße|grüße|gruß|mfg|lg|vg|"
            r"cordialement|bien cordialement|bien à vous|amicalement|salutations|bonne journée|"
            r"saludos|un saludo|atentamente|met vriendelijke groet|groeten|cordiali saluti|saluti|"
            r"よろしくお願いします|よろしくお願いいたします")
SIGN_OFF_LINE = re.compile(rf"^(?i:{SIGN_OFF})(?:\s*[,.!]?|,\s+[A-ZÀ-Þ][\w.'-]*(?:\s+[A-ZÀ-Þ][\w.'-]*){{0,2}})\s*$")
DELIMITER = re.compile(r"^--\s?$")
SIGNATURE_LINES = 15  # a '-- ' delimiter starts a signature only when at most this many lines follow
NAME_BLOCK_LINES = 6  # lines after a sign-off that may still be the signature (name, role, phone)


def strip_signature(text: str) -> str:
    """The message without its signature: from a '-- ' line, a 'Sent from my iPhone' line, or a sign-off block."""
    lines = text.rstrip().split("\n")
    for i in range(len(lines) - 1, -1, -1):
        if DELIMITER.match(lines[i]) and len([x for x in lines[i + 1 :] if x.strip()]) <= SIGNATURE_LINES:
            lines = lines[:i]
            break
    lines = _drop_mobile(lines)
    lines = _drop_sign_off(lines)
    kept = "\n".join(lines).strip()
    return kept or text.strip()


def _drop_mobile(lines: list[str]) -> list[str]:
    tail = [i for i, line in enumerate(lines) if line.strip()][-3:]
    for i in tail:
        if MOBILE.match(lines[i].strip()):
            return lines[:i]
    return lines


def _drop_sign_off(lines: list[str]) -> list[str]:
    filled = [i for i, line in enumerate(lines) if line.strip()]
    for k in filled[-(NAME_BLOCK_LINES + 1):]:
        if not SIGN_OFF_LINE.match(lines[k].strip()):
            continue
        rest = [lines[i].strip() for i in filled if i > k]
        name_block = all(len(x) <= 60 and not x.endswith(("?", ":")) for x in rest)
        if name_block and not (rest and rest[0].endswith(".") and " " in rest[0].rstrip(".")):
            return lines[:k]
    return lines


# -- all together ------------------------------------------------------------------------------------


def clean_body(text: str, *, html: bool = False, forwarded: bool = False, quotes: bool = True,
               signature: bool = True) -> str:
    """A mail body ready to index: text, SafeLinks decoded, quoted replies and signature stripped."""
    strip = quotes and not forwarded
    text = html_to_text(text, strip_quotes=strip, strip_signature=signature) if html else tidy(text)
    text = decode_safelinks(text)
    if strip:
        text = strip_quoted(text)
    if signature:
        text = strip_signature(text)
    return tidy(text)


def looks_like_html(text: str) -> bool:
    head = text.lstrip()[:1000].lower()
    return head.startswith(("<!doctype html", "<html", "<div", "<p>", "<p ", "<table", "<body", "<meta")) or \
        bool(re.search(r"<(?:br|div|p|td|span|a href)\b[^>]*>", head))


# -- a message → Document ----------------------------------------------------------------------------


@dataclass(frozen=True)
class MailRecord:
    """What any mail source knows of one message; addresses already 'Name <addr>'."""

    subject: str
    body: str
    html: bool = False
    ts: int | None = None
    sender: str = ""
    to: tuple[str, ...] = ()
    cc: tuple[str, ...] = ()
    bcc: tuple[str, ...] = ()
    message_id: str = ""
    thread: str = ""
    in_reply_to: str = ""
    folders: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    attachments: tuple[str, ...] = ()
    extra: tuple[tuple[str, Any], ...] = ()  # source-specific metadata, e.g. (("body", "fti"),)


def mail_document(mail: MailRecord, *, quotes: bool = True, signature: bool = True) -> Document:
    """The Document of a message: subject as title, cleaned body, sender as author, everyone as participants."""
    body = clean_body(mail.body, html=mail.html, forwarded=is_forward(mail.subject), quotes=quotes,
                      signature=signature) if mail.body.strip() else ""
    people = tuple(dict.fromkeys(p for p in (mail.sender, *mail.to, *mail.cc, *mail.bcc) if p))
    meta = {"message_id": mail.message_id, "folders": list(mail.folders), "thread": mail.thread,
            "in_reply_to": mail.in_reply_to, "to": list(mail.to), "cc": list(mail.cc),
            "attachments": list(mail.attachments), **dict(mail.extra)}
    return Document(title=" ".join(mail.subject.split()) or "(no subject)", sections=(Section(body),) if body else (),
                    ts=mail.ts, author=mail.sender or None, participants=people, tags=mail.tags,
                    metadata={k: v for k, v in meta.items() if v not in ("", [], None)})
