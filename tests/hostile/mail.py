"""Hostile mail inputs for the gmail (mbox) source, as real exports showed them (issue 23).

Each shape writes a folder and indexes it with `local-rag index gmail --path <folder>`: one unrecognisable file
among good mbox files; a Mailman pipermail archive (`.txt`, its shapes as in datactive/bigbang's
tests/data/2001-November.txt, a real numpy-discussion month); a message whose attachment is broken base64 under a
broken encoded-word name; a broken base64 encoded-word Subject; MIME parts nested too deeply to parse.
"""

from __future__ import annotations

from pathlib import Path

import mbox_fixture as fx
from hostile import Shape


def message(n: int, headers: list[str], body: str, envelope: str = "Tue Mar 03 08:15:00 +0000 2026") -> fx.Msg:
    """A Takeout-style message `<hostile-n@example.org>` with these extra headers and body."""
    head = [f"X-GM-THRID: {1779000000000000000 + n}", "X-Gmail-Labels: Inbox", "From: Ann Example <ann@example.com>",
            "To: me@gmail.com", f"Date: Tue, 03 Mar 2026 {8 + n % 10:02d}:15:00 +0000",
            f"Message-ID: <hostile-{n}@example.org>", *headers]
    if not any(h.lower().startswith("subject:") for h in headers):
        head.append(f"Subject: Plain message {n}")
    raw = "\n".join(head).encode("utf-8") + b"\n\n" + body.encode("utf-8").rstrip(b"\n") + b"\n"
    return fx.Msg(f"m{n}", f"<hostile-{n}@example.org>", raw, envelope, str(1779100000000000000 + n))


def plain(n: int) -> fx.Msg:
    return message(n, [], f"Message {n} is an ordinary one about the greenhouse irrigation schedule.\n")


def write(folder: Path, name: str, messages) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(fx.mbox_bytes(messages))
    return folder / name


BROKEN_ATTACHMENT = message(10, ['Content-Type: multipart/mixed; boundary="MIX"'], "\n".join([
    "--MIX", "Content-Type: text/plain; charset=utf-8", "",
    "The quarterly figures for the orchard cooperative are attached.", "",
    "--MIX", 'Content-Type: application/pdf; name="=?utf-8?B?UmVwb3J0?=x.pdf"',
    'Content-Disposition: attachment; filename="=?utf-8?B?a?="', "Content-Transfer-Encoding: base64", "",
    "JVBERi0xLjQK!!!this is no base64 at all===\nQ", "--MIX--", ""]))
BROKEN_SUBJECT = message(11, ["Subject: =?utf-8?B?a?= Budget for the orchard"],
                         "The orchard budget grows by a tenth next year.\n")


def nested(n: int, depth: int = 1500) -> fx.Msg:
    """A message whose multipart parts nest `depth` deep (Python's email package recurses once per level)."""
    opening = "".join(f'--b{i}\nContent-Type: multipart/mixed; boundary="b{i + 1}"\n\n' for i in range(depth))
    closing = "".join(f"--b{i}--\n" for i in reversed(range(depth + 1)))
    return message(n, ['Content-Type: multipart/mixed; boundary="b0"'],
                   f"{opening}--b{depth}\nContent-Type: text/plain\n\ndeep inside\n{closing}")


def pipermail_archive() -> bytes:
    """A month of a Mailman 2 list as pipermail serves it (`<list>/2001-November.txt`): obfuscated addresses in the
    envelope and the headers, asctime dates without a zone, `From ` body lines that are not escaped."""
    posts = [
        ("jjl", "pobox.com", "John J. Lee", "Thu Nov  1 11:19:12 2001", "[Numpy-discussion] RE: Numeric2",
         "What does Numeric2 do differently?\n\nFrom what I read it rewrites the array core."),
        ("hungjunglu", "yahoo.com", "Hung Jung Lu", "Fri Nov  2 10:24:10 2001", "[Numpy-discussion] Re: Numeric2",
         "From my experience the rewrite is worth it.\n\nFrom 2002 on it should be the default array package."),
        ("paul", "pfdubois.com", "Paul F. Dubois", "Sun Nov 11 09:14:02 2001", "[Numpy-discussion] Release 20.3",
         "Release 20.3 of Numeric is out; the masked arrays gained a fill value."),
    ]
    out = []
    for i, (user, domain, name, date, subject, body) in enumerate(posts):
        out.append(f"From {user} at {domain}  {date}\nFrom: {user} at {domain} ({name})\nDate: {date}\n"
                   f"Subject: {subject}\nMessage-ID: <post-{i}@{domain}>\n\n{body}\n\n\n")
    return "".join(out).encode("ascii")


def _unrecognised(folder: Path) -> list[str]:
    write(folder, "Inbox.mbox", [plain(1), plain(2)])
    write(folder, "Sent.mbox", [plain(3)])
    (folder / "Archive.mbox").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8)  # not an mbox at all
    return ["gmail", "--path", str(folder)]


def _pipermail(folder: Path) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "2001-November.txt").write_bytes(pipermail_archive())
    (folder / "README.txt").write_text("Archives of numpy-discussion, downloaded from the list's page.\n")
    return ["gmail", "--path", str(folder)]


def _broken_attachment(folder: Path) -> list[str]:
    write(folder, "All mail.mbox", [plain(1), BROKEN_ATTACHMENT, plain(2)])
    return ["gmail", "--path", str(folder)]


def _broken_subject(folder: Path) -> list[str]:
    write(folder, "All mail.mbox", [plain(1), BROKEN_SUBJECT, plain(2)])
    return ["gmail", "--path", str(folder)]


def _too_deep(folder: Path) -> list[str]:
    write(folder, "All mail.mbox", [plain(1), nested(12), plain(2)])
    return ["gmail", "--path", str(folder)]


SHAPES = [
    Shape("mbox-unrecognised-among-good", "a folder of mbox files, one of them no mbox at all (a PNG named .mbox)",
          _unrecognised, {"indexed": 3, "failed": 1}),
    Shape("mbox-pipermail-archive", "a Mailman pipermail month (.txt): `From x at y  date` envelopes, unescaped "
          "`From ` body lines, obfuscated addresses", _pipermail, {"indexed": 3}),
    Shape("mail-broken-base64-attachment", "an attachment of broken base64 under a broken base64 encoded-word name",
          _broken_attachment, {"indexed": 3}),
    Shape("mail-broken-base64-subject", "a Subject that is a broken base64 encoded word", _broken_subject,
          {"indexed": 3}),
    Shape("mail-nested-too-deep", "multipart parts nested 1,500 deep (the email package recurses per level)",
          _too_deep, {"indexed": 2, "failed": 1}),
]
