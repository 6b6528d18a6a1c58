"""A Google Takeout mail export generated from the documented format (../shared/reference/sources.md §6b).

    <root>/Takeout/Mail/All mail Including Spam and Trash.mbox   CRLF, Takeout From_ lines (`From <id>@xxx <date>`),
                                                                 X-GM-THRID first, X-Gmail-Labels (CSV)
    <root>/Takeout/Mail/Work-Projects.mbox                       LF, a per-label file: a copy of PLAN (same
                                                                 Message-ID, other labels) and one message of its own
    <root>/Takeout/archive_browser.html                          not an mbox: ignored

Nasty cases (MESSAGES): labels quoted for a comma, nested with '/', RFC 2047-encoded, read-state labels (Opened,
Unread, IMAP_*); multipart/alternative; an ISO-8859-1 base64 part; a QP UTF-8 part with emoji and soft breaks;
HTML only, with a cited quote and a Gmail signature; a part in raw 8-bit Latin-1 under a bogus declared charset and
a raw 8-bit Subject; a windows-1252 part beside a PDF and a text attachment (named, never read); a mboxrd-escaped
`>From ` body line, a bare `From ` body line after a blank line and a From_-like line after a non-blank one; a
Chat-labelled transcript; no Message-ID and no Date (time from Received); an invalid Date and no Received (time
from the From_ line); Spam and Trash (left out by default); a calendar invitation only; winmail.dat; the same
Message-ID in two threads (two messages); a quoted reply and a signature to strip.
"""

from __future__ import annotations

import base64
import hashlib
import quopri
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

ALL_MAIL = "All mail Including Spam and Trash.mbox"


def unix(iso: str) -> int:
    return int(datetime.fromisoformat(iso).replace(tzinfo=timezone.utc).timestamp())


@dataclass(frozen=True)
class Msg:
    name: str
    key: str  # expected item key ('' when left out or keyed by hash)
    raw: bytes  # headers and body as stored in the file (mboxrd-escaped), LF line ends
    envelope: str = "Tue Mar 03 08:15:00 +0000 2026"
    gmail_id: str = ""


def _msg(name: str, key: str, headers: list[str], body: bytes | str, envelope: str = "Tue Mar 03 08:15:00 +0000 2026",
         gid: int = 0) -> Msg:
    head = "\n".join(headers).encode("utf-8", "surrogateescape")
    data = body.encode("utf-8") if isinstance(body, str) else body
    return Msg(name, key, head + b"\n\n" + data.rstrip(b"\n") + b"\n", envelope, str(gid or 1770000000000000000 + len(name)))


def _b64(data: bytes) -> str:
    return base64.encodebytes(data).decode("ascii")


PLAN = _msg("plan", "<offsite-plan@example.com>", [
    "X-GM-THRID: 1771000000000000001",
    'X-Gmail-Labels: Inbox,Important,"Label, with comma",Work/Projects,Opened,IMAP_$NotJunk',
    "Delivered-To: me@gmail.com",
    "Received: by 2002:a05:6000:1:b0:1 with SMTP id x; Tue, 3 Mar 2026 00:15:01 -0800 (PST)",
    "From: Ann Example <Ann@Example.COM>",
    "To: Me Myself <me@gmail.com>",
    "Cc: Bob Stone <bob@example.org>, =?UTF-8?Q?J=C3=BCrgen_M=C3=BCller?= <j.mueller@beispiel.de>",
    "Subject: Offsite in March: venue decision",
    "Date: Tue, 03 Mar 2026 09:15:00 +0100",
    "Message-ID: <offsite-plan@example.com>",
    "In-Reply-To: <offsite-ask@example.org>",
    "MIME-Version: 1.0",
    'Content-Type: multipart/alternative; boundary="ALT"',
], """--ALT
Content-Type: text/plain; charset="UTF-8"

Hi all,

we decided: the March offsite will be at the lakeside lodge in Bavaria, 19-20 March.
Please book trains before Friday.

On Mon, 2 Mar 2026 at 18:00, Bob Stone <bob@example.org> wrote:
> What about the zebrafish aquarium as a venue?

--
Ann Example
Head of Operations
--ALT
Content-Type: text/html; charset="UTF-8"

<div>Hi all,<br>we decided: the March offsite will be at the lakeside lodge.</div>
--ALT--
""", "Tue Mar 03 08:15:00 +0000 2026", 1771000000000000011)

LATIN = _msg("latin", "<angebot-4711@beispiel.de>", [
    "X-GM-THRID: 1771000000000000002",
    "X-Gmail-Labels: Inbox,Category Updates",
    "From: =?utf-8?q?J=C3=BCrgen_M=C3=BCller?= <J.Mueller@Beispiel.de>",
    "To: me@gmail.com",
    "Subject: =?ISO-8859-1?Q?Angebot_K=FChlanlage_f=FCr_die_Halle?=",
    "Date: Wed, 04 Mar 2026 10:00:00 +0000",
    "Message-ID: <angebot-4711@beispiel.de>",
    'Content-Type: text/plain; charset="ISO-8859-1"',
    "Content-Transfer-Encoding: base64",
], _b64("Sehr geehrte Damen und Herren,\n\nanbei unser Angebot für die Kühlanlage der Lagerhalle in München. "
        "Die Wartung kostet 1.200 € im Jahr.\n\nMit freundlichen Grüßen\nJürgen Müller\n".encode("cp1252")))

QP = _msg("qp", "<cafe-qp@gmail.com>", [
    "X-GM-THRID: 1771000000000000003",
    "X-Gmail-Labels: Sent",
    "From: Me Myself <me@gmail.com>",
    'To: "Doe, Jane" <Jane@X.org>',
    "Subject: =?UTF-8?B?Q2Fmw6kgbWVldHVwIOKYlQ==?=",
    "Date: Thu, 05 Mar 2026 08:30:00 -0500",
    "Message-ID: <cafe-qp@gmail.com>",
    "Content-Type: text/plain; charset=utf-8",
    "Content-Transfer-Encoding: quoted-printable",
], quopri.encodestring("Jane, let's meet at the café near the station on Saturday for the offsite budget review "
                       "— I'll bring the spreadsheet 📊 with all numbers.\n".encode("utf-8")))

HTML = _msg("html", "<newsletter-9@news.example.com>", [
    "X-GM-THRID: 1771000000000000004",
    'X-Gmail-Labels: Inbox,"Label, with comma",Unread',
    "From: Example News <news@news.example.com>",
    "To: me@gmail.com",
    "Subject: Rooftop garden workshop",
    "Date: Fri, 06 Mar 2026 12:00:00 +0000",
    "Message-ID: <newsletter-9@news.example.com>",
    "Content-Type: text/html; charset=utf-8",
], """<html><head><style>p {color:red}</style></head><body>
<p>Join our rooftop garden workshop: composting, raised beds and watering schedules.</p>
<blockquote type="cite">Earlier: the axolotl exhibition is closed.</blockquote>
<div class="gmail_signature">Example News Team</div>
</body></html>""")

BADCHARSET = _msg("badcharset", "<reunion-bogus@exemple.fr>", [
    "X-GM-THRID: 1771000000000000005",
    "X-Gmail-Labels: Inbox",
    "From: Claire Dubois <claire@exemple.fr>",
    "To: me@gmail.com",
    "Subject: R\udce9union d\udce9plac\udce9e",
    "Date: Mon, 09 Mar 2026 07:45:00 +0100",
    "Message-ID: <reunion-bogus@exemple.fr>",
    'Content-Type: text/plain; charset="x-bogus-8859"',
    "Content-Transfer-Encoding: 8bit",
], "Bonjour, la réunion du comité est déplacée à jeudi, même salle. Préparez le procès-verbal.\n".encode("latin-1"))

MIXED = _msg("mixed", "<q1-report@example.org>", [
    "X-GM-THRID: 1771000000000000006",
    "X-Gmail-Labels: Inbox,Work/Projects",
    "From: Bob Stone <bob@example.org>",
    "To: me@gmail.com",
    "Subject: Q1 report",
    "Date: Tue, 10 Mar 2026 16:20:00 +0000",
    "Message-ID: <q1-report@example.org>",
    'Content-Type: multipart/mixed; boundary="MIX"',
], """--MIX
Content-Type: text/plain; charset=windows-1252
Content-Transfer-Encoding: quoted-printable

The Q1 budget figures are in the attached r=E9sum=E9; summary: travel costs =
rose 12 % =96 mostly the offsite.
--MIX
Content-Type: application/pdf; name="Q1 report.pdf"
Content-Disposition: attachment; filename="Q1 report.pdf"
Content-Transfer-Encoding: base64

JVBERi0xLjQKJcfsj6IKMSAwIG9iago8PC9UeXBlL0NhdGFsb2c+PgplbmRvYmoK
--MIX
Content-Type: text/plain; charset=utf-8; name="notes.txt"
Content-Disposition: attachment; filename*=UTF-8''n%C3%B6tes.txt

The ferret in the attachment must never be indexed.
--MIX--
""")

ESCAPED = _msg("escaped", "<archive-note@example.org>", [
    "X-GM-THRID: 1771000000000000007",
    "X-Gmail-Labels: Inbox",
    "From: Carol Lee <carol@example.org>",
    "To: me@gmail.com",
    "Subject: Notes from the archive",
    "Date: Wed, 11 Mar 2026 11:00:00 +0000",
    "Message-ID: <archive-note@example.org>",
    "Content-Type: text/plain; charset=us-ascii",
], """The historical ledger was found in the basement.

>From the archive: ledgers from 1923 list the original owners.
>>From a quoted mbox: kept with one quote mark.

From the desk of Carol: please scan the ledger pages.
Next line before a From_-like line
From carol Thu Mar  5 10:00:00 2026
and the message goes on after it.
""")

CHAT = _msg("chat", "<chat-77@gmail.com>", [
    "X-GM-THRID: 1771000000000000008",
    "X-Gmail-Labels: Chat",
    "From: Bob Stone <bob@example.org>",
    "To: me@gmail.com",
    "Subject: Chat with Bob Stone",
    "Date: Thu, 12 Mar 2026 13:05:00 +0000",
    "Message-ID: <chat-77@gmail.com>",
    "Content-Type: text/plain; charset=utf-8",
], "Bob: lunch at the noodle bar at one?\nme: yes, see you there\n")

NOMID = _msg("nomid", "", [  # keyed nomid:<hash>
    "X-GM-THRID: 1771000000000000009",
    "X-Gmail-Labels: Inbox",
    "Received: from mx.example.net by mx.google.com; Fri, 13 Mar 2026 06:30:00 +0000",
    "From: alerts@monitoring.example.net",
    "To: me@gmail.com",
    "Subject: Disk almost full on build server",
    "Content-Type: text/plain",
], "The build server volume /var is 93% full. Rotate the logs.\n")

BADDATE = _msg("baddate", "<when-unknown@example.org>", [
    "X-GM-THRID: 1771000000000000010",
    "X-Gmail-Labels: Inbox",
    "From: Dana <dana@example.org>",
    "To: me@gmail.com",
    "Subject: Sourdough starter instructions",
    "Date: someday soon",
    "Message-ID: <when-unknown@example.org>",
    "Content-Type: text/plain; charset=utf-8",
], "Feed the sourdough starter twice a day with rye flour.\n", "Sat Mar 14 09:00:00 +0000 2026")

SPAM = _msg("spam", "", [
    "X-GM-THRID: 1771000000000000011",
    "X-Gmail-Labels: Spam,Unread",
    "From: Winner <win@spam.example>",
    "To: me@gmail.com",
    "Subject: You won",
    "Date: Sun, 15 Mar 2026 00:00:00 +0000",
    "Message-ID: <spam-1@spam.example>",
], "Claim your narwhal lottery prize now.\n")

TRASH = _msg("trash", "", [
    "X-GM-THRID: 1771000000000000012",
    "X-Gmail-Labels: Trash,Opened",
    "From: Old Friend <old@example.com>",
    "To: me@gmail.com",
    "Subject: Old plans",
    "Date: Sun, 15 Mar 2026 01:00:00 +0000",
    "Message-ID: <trash-1@example.com>",
], "The quokka photos from last year.\n")

INVITE = _msg("invite", "<invite-55@calendar.example.com>", [
    "X-GM-THRID: 1771000000000000013",
    "X-Gmail-Labels: Inbox",
    "From: Ann Example <ann@example.com>",
    "To: me@gmail.com",
    "Subject: Invitation: offsite planning call",
    "Date: Mon, 16 Mar 2026 08:00:00 +0000",
    "Message-ID: <invite-55@calendar.example.com>",
    "Content-Type: text/calendar; charset=utf-8; method=REQUEST",
], """BEGIN:VCALENDAR
BEGIN:VEVENT
SUMMARY:Offsite planning call
DTSTART:20260318T150000Z
LOCATION:Video call
DESCRIPTION:Agenda: lodge booking\\, trains\\, catering
END:VEVENT
END:VCALENDAR
""")

WINMAIL = _msg("winmail", "<tnef-1@contoso.com>", [
    "X-GM-THRID: 1771000000000000014",
    "X-Gmail-Labels: =?UTF-8?Q?Projekte/K=C3=BChlung?=,Inbox",
    "From: Outlook User <user@contoso.com>",
    "To: me@gmail.com",
    "Subject: Wartungsvertrag",
    "Date: Tue, 17 Mar 2026 10:00:00 +0000",
    "Message-ID: <tnef-1@contoso.com>",
    'Content-Type: multipart/mixed; boundary="TNEF"',
], """--TNEF
Content-Type: text/plain; charset=utf-8

Der Wartungsvertrag liegt bei.
--TNEF
Content-Type: application/ms-tnef; name="winmail.dat"
Content-Disposition: attachment; filename="winmail.dat"
Content-Transfer-Encoding: base64

eJ8+IgEAAQaQCAAEAAAAAAABAAEAAQeQBgAIAAAA5AQAAAAAAADoAAEIgAcAGAAAAElQTS5NaWNy
--TNEF--
""")

DUP_A = _msg("dup-a", "<same-id@broken.example>", [
    "X-GM-THRID: 1771000000000000015",
    "X-Gmail-Labels: Inbox",
    "From: Broken Mailer <noreply@broken.example>",
    "To: me@gmail.com",
    "Subject: Your parcel shipped",
    "Date: Wed, 18 Mar 2026 09:00:00 +0000",
    "Message-ID: <same-id@broken.example>",
], "Your parcel with the telescope has shipped.\n")

DUP_B = _msg("dup-b", "<same-id@broken.example>#1771000000000000016", [
    "X-GM-THRID: 1771000000000000016",
    "X-Gmail-Labels: Inbox",
    "From: Broken Mailer <noreply@broken.example>",
    "To: me@gmail.com",
    "Subject: Your invoice",
    "Date: Thu, 19 Mar 2026 09:00:00 +0000",
    "Message-ID: <same-id@broken.example>",
], "Your invoice for the telescope is attached as text.\n")

PLAN_COPY = Msg("plan-copy", PLAN.key, PLAN.raw.replace(
    b'Inbox,Important,"Label, with comma",Work/Projects,Opened,IMAP_$NotJunk', b"Work/Projects,Starred"),
    PLAN.envelope, PLAN.gmail_id)
ROADMAP = _msg("roadmap", "<roadmap@example.com>", [
    "X-GM-THRID: 1771000000000000017",
    "X-Gmail-Labels: Work/Projects",
    "From: Ann Example <ann@example.com>",
    "To: me@gmail.com",
    "Subject: Roadmap",
    "Date: Fri, 20 Mar 2026 09:00:00 +0000",
    "Message-ID: <roadmap@example.com>",
], "The roadmap for the second quarter focuses on the search latency.\n")

MESSAGES = (PLAN, LATIN, QP, HTML, BADCHARSET, MIXED, ESCAPED, CHAT, NOMID, BADDATE, SPAM, TRASH, INVITE, WINMAIL,
            DUP_A, DUP_B)
EXCLUDED = (SPAM, TRASH)
KEYED = tuple(m for m in MESSAGES if m.key)  # every indexed message but NOMID
LABEL_FILE = (PLAN_COPY, ROADMAP)


def mbox_bytes(messages, crlf: bool = True) -> bytes:
    """Messages in mbox form: a Takeout From_ line, the message as stored (escaping is in `raw`), a blank line."""
    data = b"".join(f"From {m.gmail_id}@xxx {m.envelope}\n".encode() + m.raw + b"\n" for m in messages)
    return data.replace(b"\n", b"\r\n") if crlf else data


@dataclass
class Export:
    root: Path  # the Takeout folder's parent
    mail: Path  # Takeout/Mail
    all_mail: Path
    label_file: Path


def build(root: Path, messages=MESSAGES) -> Export:
    mail = root / "Takeout" / "Mail"
    mail.mkdir(parents=True)
    (root / "Takeout" / "archive_browser.html").write_text("<html>Takeout</html>")
    all_mail, label_file = mail / ALL_MAIL, mail / "Work-Projects.mbox"
    all_mail.write_bytes(mbox_bytes(messages))
    label_file.write_bytes(mbox_bytes(LABEL_FILE, crlf=False))
    return Export(root, mail, all_mail, label_file)


def generated(start: int, count: int, words: tuple[str, ...] = ()) -> list[Msg]:
    """Plain messages gen-<i>; `words` are put in their bodies (for searches)."""
    out = []
    for i in range(start, start + count):
        extra = " ".join(words)
        out.append(_msg(f"gen-{i}", f"<gen-{i}@example.com>", [
            f"X-GM-THRID: {1772000000000000000 + i}",
            "X-Gmail-Labels: Inbox,Category Forums",
            f"From: List {i % 7} <list{i % 7}@lists.example.org>",
            "To: me@gmail.com",
            f"Subject: Digest number {i}",
            f"Date: Sat, 21 Mar 2026 {i % 24:02d}:00:00 +0000",
            f"Message-ID: <gen-{i}@example.com>",
            "Content-Type: text/plain; charset=utf-8",
        ], f"Digest {i}: today's topic is item {i} of the list. {extra}\n", "Sat Mar 21 10:00:00 +0000 2026",
            1773000000000000000 + i))
    return out


def append(path: Path, messages, crlf: bool = True) -> int:
    """Append messages as a mail client (or a second Takeout run into the same file) would; bytes appended."""
    data = mbox_bytes(messages, crlf)
    with open(path, "ab") as fh:
        fh.write(data)
    return len(data)


def hash_tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*"))
            if p.is_file()}
