"""A large generated eM Client data folder for benchmarks (the schema of tests/emclient_fixture.py, at scale).

    python bench/emclient_gen.py OUT_DIR [--messages 150000]

`--messages` counts MailItems rows. Two stores: a Gmail one (2/3 of the rows, WAL, FTI, mail_data indexed on
id) and an Office 365 one (1/3, the schema variant without editTime/downloadState). About 1/6 of all rows
are Gmail "All Mail" copies of an INBOX/Sent/label message (same Message-ID, a second folder), ~1% sit in
Spam/Deleted Items (excluded by default), ~0.5% carry the deleted flag, ~0.5% of the Office 365 messages
share a Message-ID with a Gmail one. Dates run from 2016 to 2026, rising with the row id.

Bodies are real English prose (docstrings of installed packages, bench/docstrings.py) in mail form:
greeting, 1–5 paragraphs, sign-off, often a signature block, "Sent from my iPhone", quoted replies
('On … wrote:' with '>' lines, Outlook's '-----Original Message-----') and a German minority. Where the
source finds them:
- ~85%: FTI part "1" (plain text), plus the MIME parts in mail_data.dat (text/plain and text/html);
- ~5%: HTML-only, text in FTI part "2", the text/html part in mail_data.dat;
- ~10%: HTML-only and not in the FTI at all: the body must come from mail_data.dat's text/html part;
- ~8% have an attachment (a small PDF-ish blob, its name as FTI part "1.2").
Every message also has a TEXT part whose header is a realistic RFC 822 header block.

A finished folder holds `generated.json` (the generator version and the figures); `ensure()` reuses it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import sqlite3
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

import emclient_fixture as fx  # noqa: E402
from docstrings import docstrings  # noqa: E402

VERSION = 3  # bump when the generated content changes (cached folders are rebuilt)
START = datetime(2016, 1, 1, tzinfo=timezone.utc).timestamp()
END = datetime(2026, 3, 1, tzinfo=timezone.utc).timestamp()
GMAIL_FOLDERS = fx.GMAIL_FOLDERS + [(8, "Receipts", "/Receipts"), (9, "Travel", "/Travel"),
                                    (10, "Family", "/Family"), (11, "Newsletters", "/Newsletters")]
O365_FOLDERS = fx.O365_FOLDERS + [(4, "Archive", "/Archive"), (5, "Projects", "/Inbox/Projects"),
                                  (6, "Hiring", "/Inbox/Hiring"), (7, "Vendors", "/Inbox/Vendors")]
# (folder id, weight) per store; All Mail copies come on top for Gmail
GMAIL_PLACES = [(2, 62), (5, 16), (7, 5), (8, 5), (9, 3), (10, 4), (11, 4), (6, 1)]
O365_PLACES = [(1, 55), (2, 17), (4, 14), (5, 6), (6, 3), (7, 4), (3, 1)]
EXCLUDED = {("gmail", 6), ("o365", 3)}  # Spam, Deleted Items
FIRST = ["Ann", "Bob", "Carol", "Dan", "Eve", "Frank", "Grace", "Heidi", "Ivan", "Judy", "Mallory", "Niaj", "Olivia",
         "Peggy", "Rupert", "Sybil", "Trent", "Victor", "Walter", "Priya", "Jürgen", "Élodie", "Zoë", "Søren", "Chen",
         "Akira", "Fatima", "Lars", "Mateo", "Ines"]
LAST = ["Lee", "Stone", "Díaz", "Müller", "Patel", "Dubois", "Nguyen", "Kowalski", "Rossi", "Smith", "Tanaka",
        "Hansen", "García", "O'Brien", "Novak", "Schmidt", "Okafor", "Berg", "Silva", "Walker"]
DOMAINS = ["example.com", "contoso.com", "beispiel.de", "exemple.fr", "fabrikam.io", "northwind.org", "mail.example.net"]
TOPICS = ["budget", "offsite", "release", "migration", "invoice", "contract", "hiring plan", "roadmap", "outage",
          "travel", "renewal", "design review", "quarterly report", "onboarding", "vendor call", "security audit"]


def ensure(folder: Path, messages: int, log=print) -> dict:
    """The generated data folder at `folder` (built unless a finished one of this size and version is there)."""
    marker = folder / "generated.json"
    if marker.exists():
        info = json.loads(marker.read_text())
        if info.get("version") == VERSION and info.get("rows") == messages:
            return info
    if folder.exists():
        shutil.rmtree(folder)
    t0 = time.perf_counter()
    info = build(folder, messages, log=log)
    info["seconds"] = round(time.perf_counter() - t0, 1)
    marker.write_text(json.dumps(info, indent=1))
    return info


class Corpus:
    def __init__(self, n_paragraphs: int, seed: int):
        self.paras = docstrings(n_paragraphs, min_words=12, max_words=200)
        self.rnd = random.Random(seed)

    def para(self) -> str:
        return self.rnd.choice(self.paras)


def build(root: Path, rows: int, seed: int = 0, log=print) -> dict:
    rnd = random.Random(seed)
    log(f"  reading the prose corpus (docstrings of installed packages) for {rows} messages ...")
    corpus = Corpus(30_000, seed)  # the same corpus at any size
    people = [(f"{f} {l}", f"{_ascii(f)}.{_ascii(l)}@{DOMAINS[(i * 7 + j) % len(DOMAINS)]}".lower())
              for i, f in enumerate(FIRST) for j, l in enumerate(LAST)]
    me_gmail, me_work = ("Sam Taylor", "sam.taylor@gmail.example"), ("Sam Taylor", "sam@contoso.com")
    root.mkdir(parents=True, exist_ok=True)
    (root / "settings.dat").write_text("not sqlite: settings\n")
    fx._sqlite(root / "accounts.dat", "CREATE TABLE Accounts (id INTEGER PRIMARY KEY, name TEXT)")
    n_gmail = round(rows * 2 / 3)
    gmail_ids: list[str] = []
    stats = {"version": VERSION, "rows": rows, "stores": {}, "body_kinds": {}}
    for name, (a, b), folders, places, variant, me, n in (
            ("gmail", fx.GMAIL, GMAIL_FOLDERS, GMAIL_PLACES, fx.GMAIL_VARIANT, me_gmail, n_gmail),
            ("o365", fx.O365, O365_FOLDERS, O365_PLACES, fx.O365_VARIANT, me_work, rows - n_gmail)):
        t0 = time.perf_counter()
        store = root / a / b
        store.mkdir(parents=True, exist_ok=True)
        (store.parent / ("Gmail me.acn" if name == "gmail" else "Work.acn")).write_text("")
        s = _write_store(store, name, folders, places, variant, me, n, rnd, corpus, people, gmail_ids, stats)
        s["seconds"] = round(time.perf_counter() - t0, 1)
        stats["stores"][name] = s
        log(f"  store {name}: {n} rows in {s['seconds']} s")
    stats["bytes"] = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    stats["files"] = {str(p.relative_to(root)): p.stat().st_size for p in sorted(root.rglob("*.dat"))}
    return stats


def _write_store(store: Path, name: str, folders, places, variant, me, n: int, rnd: random.Random, corpus: Corpus,
                 people: list, gmail_ids: list[str], stats: dict) -> dict:
    fx._sqlite(store / "folders.dat", "CREATE TABLE Folders (id INTEGER PRIMARY KEY, uniqueId TEXT, name TEXT, "
               "path TEXT, parentFolderId INTEGER, delimiter TEXT)",
               [("INSERT INTO Folders VALUES (?, ?, ?, ?, NULL, '/')", [(i, f"uid-{i}", nm, p) for i, nm, p in folders])])
    index = sqlite3.connect(store / "mail_index.dat")
    if name == "gmail":
        index.execute("PRAGMA journal_mode=WAL")
    index.executescript(fx.INDEX_DDL.format(variant=variant))
    cols = [r[1] for r in index.execute("PRAGMA table_info(MailItems)")]
    data = sqlite3.connect(store / "mail_data.dat")
    data.executescript(fx.DATA_DDL + "CREATE INDEX idx_LocalMailContents_id ON LocalMailContents(id);")
    fti = sqlite3.connect(store / "mail_fti.dat")
    fti.executescript("CREATE VIRTUAL TABLE LocalMailsIndex3 USING fts4(id, partName, content);"
                      "CREATE VIRTUAL TABLE MailSubjectIndex USING fts4(id, subject);")
    folder_ids, weights = zip(*places)
    month_buckets: set[tuple[int, str]] = set()
    items, addrs, cats, parts, ftis, subjects = [], [], [], [], [], []
    row_id, unique, copies, threads = 0, 0, 0, []
    span = (END - START) / n

    def flush() -> None:
        marks = ", ".join("?" * len(cols))
        index.executemany(f"INSERT INTO MailItems ({', '.join(_q(c) for c in cols)}) VALUES ({marks})", items)
        index.executemany("INSERT INTO MailAddresses (parentId, type, position, displayName, address) "
                          "VALUES (?, ?, ?, ?, ?)", addrs)
        index.executemany("INSERT INTO MailCategoryNames VALUES (?, ?)", cats)
        data.executemany("INSERT INTO LocalMailContents (id, partName, contentType, contentDisposition, "
                         "contentTransferEncoding, contentLength, partHeader, partBody) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                         parts)
        fti.executemany("INSERT INTO LocalMailsIndex3 (id, partName, content) VALUES (?, ?, ?)", ftis)
        fti.executemany("INSERT INTO MailSubjectIndex (id, subject) VALUES (?, ?)", subjects)
        for lst in (items, addrs, cats, parts, ftis, subjects):
            lst.clear()

    while row_id < n:
        folder = rnd.choices(folder_ids, weights)[0]
        ts = int(START + row_id * span + rnd.uniform(0, span))
        date = ts * 10_000_000 + fx.TICKS_AT_UNIX_EPOCH
        sent = (name, folder) in (("gmail", 5), ("o365", 2))
        sender = me if sent else rnd.choice(people)
        to = [rnd.choice(people) for _ in range(rnd.choice((1, 1, 1, 2, 3)))] if sent else [me]
        cc = [rnd.choice(people) for _ in range(rnd.choice((0, 0, 0, 1, 2)))]
        # threads: a reply continues one of the recent conversations
        reply = threads and rnd.random() < 0.4
        if reply:
            conv, topic, parent_mid, parent_text, parent_who = rnd.choice(threads[-200:])
            subject = ("AW: " if "beispiel" in parent_mid else "Re: ") + topic
        else:
            topic = f"{rnd.choice(TOPICS).capitalize()} {rnd.randrange(1, 999)}: " + " ".join(corpus.para().split()[:5])
            conv, parent_mid, parent_text, parent_who, subject = f"conv-{name}-{row_id}", "", "", None, topic
        shared = name == "o365" and gmail_ids and rnd.random() < 0.005
        mid = rnd.choice(gmail_ids) if shared else \
            f"<{hashlib.sha1(f'{name}{row_id}'.encode()).hexdigest()[:16]}.{row_id}@{sender[1].split('@')[1]}>"
        text = _body(rnd, corpus, sender, to[0], parent_text if reply else "", parent_who, date)
        kind = rnd.choices(("fti", "html_fti2", "html_only"), (85, 5, 10))[0]
        stats["body_kinds"][kind] = stats["body_kinds"].get(kind, 0) + 1
        attach = rnd.random() < 0.08
        flags = 2 | (65536 if rnd.random() < 0.005 else 0)
        copy_to_all_mail = name == "gmail" and folder != 6 and unique % 3 == 0 and row_id + 1 < n
        for place in ([folder, 4] if copy_to_all_mail else [folder]):
            row_id += 1
            unique += place == folder
            copies += place != folder
            row = {"id": row_id, "uniqueId": f"u{row_id}", "folder": place, "date": date,
                   "receivedDate": date + 50_000_000, "subject": subject, "messageId": mid,
                   "inReplyTo": parent_mid or None, "conversationId": conv, "preview": " ".join(text.split())[:200],
                   "flags": flags, "importance": 0, "size": len(text) + 2500, "editTime": 0, "downloadState": 1}
            items.append([row.get(c) for c in cols])
            for kind_no, who in [(1, sender)] + [(4, p) for p in to] + [(5, p) for p in cc]:
                addrs.append((row_id, kind_no, 0, who[0], who[1]))
            if rnd.random() < 0.05:
                cats.append((row_id, rnd.choice(["Work", "Private", "Einkauf", "Important"])))
            header = _header(sender, to, cc, subject, mid, ts)
            html = _html(text)
            if kind == "fti":
                ftis.append((row_id, "1", text))
                parts += [(row_id, "TEXT", "multipart/alternative; boundary=b1", "", 0, 0, header, b""),
                          (row_id, "1", "text/plain; charset=utf-8", "", 0, len(text.encode()), b"", text.encode()),
                          (row_id, "2", "text/html; charset=utf-8", "", 0, len(html), b"", html)]
            else:
                if kind == "html_fti2":
                    ftis.append((row_id, "2", text))
                parts += [(row_id, "TEXT", "text/html; charset=utf-8", "", 0, 0, header, b""),
                          (row_id, "1", "text/html; charset=utf-8", "", 0, len(html), b"", html)]
            if attach:
                fname = f"{topic.split(':')[0].replace(' ', '_')}.pdf"
                ftis.append((row_id, "1.2", fname))
                blob = rnd.randbytes(rnd.randrange(2_000, 8_000))
                parts.append((row_id, "3", f'application/pdf; name="{fname}"', f'attachment; filename="{fname}"',
                              4, len(blob), b"", blob))
            subjects.append((row_id, subject))
            if (name, place) not in EXCLUDED and not flags & 65536:
                month_buckets.add((place, datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m")))
        if name == "gmail":
            gmail_ids.append(mid)
        if not reply:
            threads.append((conv, topic, mid, text, sender))
        elif rnd.random() < 0.3:
            threads.append((conv, topic.removeprefix("Re: "), mid, text, sender))
        if len(items) >= 5000:
            flush()
    flush()
    for conn in (index, data, fti):
        conn.commit()
        conn.close()
    return {"rows": row_id, "unique_messages": unique, "all_mail_copies": copies,
            "mailbox_month_buckets": len(month_buckets)}


def _body(rnd: random.Random, corpus: Corpus, sender, to, quoted: str, quoted_who, date: int) -> str:
    german = "beispiel.de" in sender[1] or rnd.random() < 0.08
    first = to[0].split()[0]
    greet = rnd.choice((f"Hallo {first},", f"Lieber {first},") if german else (f"Hi {first},", f"Dear {first},",
                                                                               f"Hello {first},", f"{first} —"))
    paras = [corpus.para() for _ in range(rnd.choices((1, 2, 3, 4, 5), (45, 30, 13, 8, 4))[0])]
    sign = rnd.choice(("Viele Grüße", "Mit freundlichen Grüßen") if german else ("Best regards,", "Thanks,", "Cheers,"))
    out = f"{greet}\n\n" + "\n\n".join(paras) + f"\n\n{sign}\n{sender[0].split()[0]}\n"
    r = rnd.random()
    if r < 0.3:
        out += f"\n-- \n{sender[0]}\n{rnd.choice(['Platform team', 'Finance', 'SRE', 'Einkauf'])} | " \
               f"{sender[1].split('@')[1]}\n+49 30 {rnd.randrange(1000000, 9999999)}\n"
    elif r < 0.35:
        out += "\nSent from my iPhone\n"
    if quoted:
        day = datetime.fromtimestamp((date - fx.TICKS_AT_UNIX_EPOCH) // 10_000_000 - 86_400, timezone.utc)
        if german:
            out += f"\nAm {day:%d.%m.%Y} um {day:%H:%M} schrieb {quoted_who[0]} <{quoted_who[1]}>:\n\n" + quoted
        elif rnd.random() < 0.3:
            sent = day.strftime("%A, %B %d, %Y %I:%M %p")
            out += (f"\n-----Original Message-----\nFrom: {quoted_who[0]} <{quoted_who[1]}>\nSent: {sent}\n"
                    f"To: {sender[0]}\nSubject: previous\n\n" + quoted)
        else:
            out += f"\nOn {day:%a, %b %d, %Y at %I:%M %p} {quoted_who[0]} <{quoted_who[1]}> wrote:\n" + \
                   "\n".join("> " + line for line in quoted.splitlines())
    return out


def _html(text: str) -> bytes:
    body = "".join(f"<p>{p.replace(chr(10), '<br>')}</p>" for p in text.split("\n\n"))
    return ("<html><head><meta charset='utf-8'><style>p{margin:0 0 8px 0;font-family:Calibri}</style></head>"
            f"<body><div dir='ltr'>{body}</div></body></html>").encode()


def _header(sender, to, cc, subject: str, mid: str, ts: int) -> bytes:
    date = datetime.fromtimestamp(ts, timezone.utc).strftime("%a, %d %b %Y %H:%M:%S +0000")
    lines = [f"Received: from mx.{sender[1].split('@')[1]} (mx.{sender[1].split('@')[1]} [192.0.2.7]) by "
             f"mail.example.net with ESMTPS id {mid[1:13]}; {date}",
             f"DKIM-Signature: v=1; a=rsa-sha256; d={sender[1].split('@')[1]}; s=s1; bh={mid[1:20]}=; "
             "b=" + hashlib.sha256(mid.encode()).hexdigest() * 3,
             f"From: {sender[0]} <{sender[1]}>", "To: " + ", ".join(f"{n} <{a}>" for n, a in to)]
    if cc:
        lines.append("Cc: " + ", ".join(f"{n} <{a}>" for n, a in cc))
    lines += [f"Subject: {subject}", f"Date: {date}", f"Message-ID: {mid}", "MIME-Version: 1.0",
              "Content-Type: multipart/alternative; boundary=b1"]
    return ("\r\n".join(lines) + "\r\n").encode()


def _ascii(s: str) -> str:
    import unicodedata

    return unicodedata.normalize("NFKD", s).encode("ascii", "ignore").decode().replace("'", "")


def _q(col: str) -> str:
    return f'"{col}"'


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--messages", type=int, default=150_000)
    a = ap.parse_args()
    print(json.dumps(ensure(a.out, a.messages), indent=1))
