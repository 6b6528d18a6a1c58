"""A generated Messages chat.db of N message rows, shaped like a real one (cached under bench/out/).

    ensure(folder, n) -> info dict (also written to folder/generated.json)

Shape (seeded, so the same N gives the same database): 300 contacts with a phone handle (a third also write from
an e-mail handle with the same person_centric_id, a fifth also by SMS) and 25 group chats of 3–6 members; message
counts per conversation Zipf-like; each conversation a series of sessions at random times over five years, each
session a burst of a few to a few dozen messages seconds to minutes apart. Rows: ~70% with NULL text and the
words only in attributedBody (as since macOS 13; half of them NSMutableAttributedString), ~4% tapbacks,
~1% attachments (U+FFFC + an attachment row), ~0.3% errored empty rows, a few group events and edits; dates in
nanoseconds. Texts are sentences of real English prose (docstrings of installed packages, bench/docstrings.py).
"""

from __future__ import annotations

import json
import random
import sqlite3
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from docstrings import docstrings  # noqa: E402
from imessage_fixture import SCHEMA, attributed_body  # noqa: E402

EPOCH = 978_307_200
START, END = 1_609_459_200, 1_772_323_200  # 2021-01-01 .. 2026-03-01 UTC
VERSION = 1


def _sentences(rng: random.Random) -> list[str]:
    out = []
    for doc in docstrings(4000, min_words=12, max_words=80):
        out += [s.strip() for s in doc.replace("? ", ". ").split(". ") if 2 <= len(s.split()) <= 40]
    rng.shuffle(out)
    return out


def _text(rng: random.Random, sentences: list[str]) -> str:
    n = 1 if rng.random() < 0.7 else rng.choice((2, 3, 4, 8))
    words = " ".join(rng.choice(sentences) for _ in range(n))
    return words if rng.random() < 0.6 else " ".join(words.split()[: rng.randint(2, 9)])


def _handles_and_chats(rng: random.Random):
    handles, chats, people = [], [], []
    for p in range(300):
        phone = f"+1555{rng.randint(1_000_000, 9_999_999)}"
        hs = [(phone, "iMessage")]
        if rng.random() < 0.33:
            hs.append((f"person{p}@example.com", "iMessage"))
        if rng.random() < 0.2:
            hs.append((phone, "SMS"))
        person_chats = []
        for ident, service in hs:
            handles.append((len(handles) + 1, ident, service, f"PCID-{p}"))
            chats.append((len(chats) + 1, f"{service};-;{ident}", 45, ident, service, None, [len(handles)]))
            person_chats.append(len(chats))
        people.append(person_chats)
    groups = []
    for g in range(25):
        members = rng.sample(range(1, len(handles) + 1), rng.randint(3, 6))
        chats.append((len(chats) + 1, f"iMessage;+;chat{g:06d}", 43, f"chat{g:06d}", "iMessage", f"Group {g}", members))
        groups.append(len(chats))
    return handles, chats, people, groups


def _rows(n: int, rng: random.Random, chats, people, groups, sentences):
    convs = [(pc, False) for pc in people] + [([g], True) for g in groups]
    weights = [1 / (i + 1) ** 0.9 for i in range(len(convs))]
    rng.shuffle(weights)
    counts = [max(1, round(n * w / sum(weights))) for w in weights]
    counts[0] += n - sum(counts)
    members = {c[0]: c[6] for c in chats}
    rowid = 0
    for (conv_chats, group), count in zip(convs, counts):
        made = 0
        while made < count:
            t = rng.uniform(START, END)
            for _ in range(min(count - made, max(1, int(rng.expovariate(1 / 9))))):
                t += rng.expovariate(1 / 90)
                rowid += 1
                made += 1
                chat = rng.choice(conv_chats) if not group or rng.random() < 0.99 else conv_chats[0]
                yield rowid, chat, t, group, rng.choice(members[chat])


def ensure(folder: Path, n: int, log=print) -> dict:
    meta = folder / "generated.json"
    if meta.exists():
        info = json.loads(meta.read_text())
        if info.get("version") == VERSION and info.get("rows") == n:
            return info
    t0 = time.perf_counter()
    rng = random.Random(n)
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "chat.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    sentences = _sentences(rng)
    log(f"generating {n:,} messages ({len(sentences):,} sentences of prose) into {db}")
    handles, chats, people, groups = _handles_and_chats(rng)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(SCHEMA)
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO handle (ROWID, id, service, person_centric_id) VALUES (?, ?, ?, ?)", handles)
    for rowid, guid, style, ident, service, name, members in chats:
        conn.execute("INSERT INTO chat (ROWID, guid, style, chat_identifier, service_name, display_name) "
                     "VALUES (?, ?, ?, ?, ?, ?)", (rowid, guid, style, ident, service, name))
        conn.executemany("INSERT INTO chat_handle_join VALUES (?, ?)", [(rowid, h) for h in members])
    kinds: dict[str, int] = {}
    batch, joins, attach = [], [], []
    for rowid, chat, t, group, member in _rows(n, rng, chats, people, groups, sentences):
        r = rng.random()
        me = rng.random() < 0.45
        handle = 0 if me else member
        text, body, amt, item_type, error, edited = None, None, 0, 0, 0, 0
        if r < 0.04:
            kind, amt, text = "tapback", rng.choice((2000, 2001, 2003, 3001)), "Liked “…”"
        elif r < 0.045 and group:
            kind, item_type = "group_event", 2
        elif r < 0.048:
            kind, error = "errored", 39
        elif r < 0.058:
            kind, text = "attachment", "\ufffc"
            attach.append((rowid, f"IMG_{rowid:05d}.HEIC"))
        else:
            words = _text(rng, sentences)
            if rng.random() < 0.7:
                kind, body = "attributedBody", attributed_body(words, mutable=rng.random() < 0.5)
            else:
                kind, text = "text", words
            edited = int((t + 30 - EPOCH) * 1e9) if rng.random() < 0.002 else 0
        kinds[kind] = kinds.get(kind, 0) + 1
        batch.append((rowid, f"G{rowid:09d}-{rng.getrandbits(48):012X}", text, handle, body,
                      "SMS" if chats[chat - 1][4] == "SMS" else "iMessage", error, int((t - EPOCH) * 1e9),
                      int(me), item_type, amt, edited))
        joins.append((chat, rowid))
        if len(batch) >= 5000:
            _flush(conn, batch, joins, attach)
    _flush(conn, batch, joins, attach)
    conn.execute("COMMIT")
    conn.close()
    info = {"version": VERSION, "rows": n, "kinds": kinds, "chats": len(chats), "handles": len(handles),
            "bytes": db.stat().st_size, "seconds": round(time.perf_counter() - t0, 1)}
    meta.write_text(json.dumps(info, indent=1))
    return info


def _flush(conn, batch, joins, attach) -> None:
    conn.executemany("INSERT INTO message (ROWID, guid, text, handle_id, attributedBody, service, error, date, "
                     "is_from_me, item_type, associated_message_type, date_edited) VALUES "
                     "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", batch)
    conn.executemany("INSERT INTO chat_message_join (chat_id, message_id) VALUES (?, ?)", joins)
    for message_id, name in attach:
        a = conn.execute("INSERT INTO attachment (guid, filename, transfer_name) VALUES (?, ?, ?)",
                         (f"at{message_id}", f"~/Library/Messages/Attachments/00/00/{message_id}/{name}", name)).lastrowid
        conn.execute("INSERT INTO message_attachment_join VALUES (?, ?)", (message_id, a))
    batch.clear()
    joins.clear()
    attach.clear()
