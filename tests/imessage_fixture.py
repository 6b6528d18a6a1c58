"""A Messages chat.db generated from the documented schema (../shared/reference/sources.md §4), in WAL mode.

attributedBody blobs are written the way Messages writes them (NSArchiver typedstream of an
NS(Mutable)AttributedString: header, class chains, the NSString's "+" value with its byte length, one attribute
run with __kIMMessagePartAttributeName); `attributed_body("أهلاً بالعالم")` is byte for byte the blob of a real
message published with imessage-exporter's parser tests.

Conversations (see MESSAGES):
- Ann, in three chats: iMessage and SMS with +1 555-555-0142 and iMessage with Ann@Example.com (same
  person_centric_id): one conversation. Two sessions (2 and 5 March 2026, more than 4 h apart). Text only;
  NULL text with a blob; an SMS; a tapback (2001) and its removal (3001); an edited and an unsent message; an
  errored row without text (error 39); a blob over 127 bytes (0x81 length form); a row in "Recently Deleted"
  only; date_read = 0; a damaged blob (undecodable); the app's rows added by AppWriter (one committed only in
  the -wal, one uncommitted).
- "Climbing crew", a group (style 43) with three handles: a rename event (item_type 2); Japanese text with
  emoji (multi-byte; a mutable-string blob); an attachment placeholder (U+FFFC) whose ~/ file is missing; a
  "loved" tapback on it; a message of 33 KB (0x82 length form) that is a window of its own.
- Eve, an SMS chat from 2012 whose dates are in seconds next to one in nanoseconds.
"""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

APPLE_EPOCH = 978_307_200

SCHEMA = """
CREATE TABLE handle (ROWID INTEGER PRIMARY KEY AUTOINCREMENT UNIQUE, id TEXT NOT NULL, country TEXT,
  service TEXT NOT NULL, uncanonicalized_id TEXT, person_centric_id TEXT, UNIQUE (id, service));
CREATE TABLE chat (ROWID INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT UNIQUE NOT NULL, style INTEGER, state INTEGER,
  account_id TEXT, properties BLOB, chat_identifier TEXT, service_name TEXT, room_name TEXT, account_login TEXT,
  is_archived INTEGER DEFAULT 0, last_addressed_handle TEXT, display_name TEXT, group_id TEXT, is_filtered INTEGER,
  successful_query INTEGER, engram_id TEXT, server_change_token TEXT, ck_sync_state INTEGER DEFAULT 0,
  original_group_id TEXT, last_read_message_timestamp INTEGER DEFAULT 0, cloudkit_record_id TEXT,
  last_addressed_sim_id TEXT, is_blackholed INTEGER DEFAULT 0, syndication_date INTEGER DEFAULT 0,
  syndication_type INTEGER DEFAULT 0, is_recovered INTEGER DEFAULT 0, is_deleting_incoming_messages INTEGER DEFAULT 0);
CREATE TABLE message (ROWID INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT UNIQUE NOT NULL, text TEXT,
  replace INTEGER DEFAULT 0, service_center TEXT, handle_id INTEGER DEFAULT 0, subject TEXT, country TEXT,
  attributedBody BLOB, version INTEGER DEFAULT 0, type INTEGER DEFAULT 0, service TEXT, account TEXT,
  account_guid TEXT, error INTEGER DEFAULT 0, date INTEGER, date_read INTEGER, date_delivered INTEGER,
  is_delivered INTEGER DEFAULT 0, is_finished INTEGER DEFAULT 0, is_emote INTEGER DEFAULT 0,
  is_from_me INTEGER DEFAULT 0, is_empty INTEGER DEFAULT 0, is_read INTEGER DEFAULT 0, is_sent INTEGER DEFAULT 0,
  cache_has_attachments INTEGER DEFAULT 0, is_audio_message INTEGER DEFAULT 0, item_type INTEGER DEFAULT 0,
  other_handle INTEGER DEFAULT 0, group_title TEXT, group_action_type INTEGER DEFAULT 0,
  associated_message_guid TEXT DEFAULT NULL, associated_message_type INTEGER DEFAULT 0,
  balloon_bundle_id TEXT DEFAULT NULL, payload_data BLOB, expressive_send_style_id TEXT DEFAULT NULL,
  message_summary_info BLOB DEFAULT NULL, destination_caller_id TEXT DEFAULT NULL, reply_to_guid TEXT DEFAULT NULL,
  thread_originator_guid TEXT DEFAULT NULL, date_retracted INTEGER DEFAULT 0, date_edited INTEGER DEFAULT 0,
  part_count INTEGER, future_column_2030 TEXT);
CREATE TABLE attachment (ROWID INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT UNIQUE NOT NULL, created_date INTEGER
  DEFAULT 0, start_date INTEGER DEFAULT 0, filename TEXT, uti TEXT, mime_type TEXT, transfer_state INTEGER DEFAULT 0,
  is_outgoing INTEGER DEFAULT 0, user_info BLOB, transfer_name TEXT, total_bytes INTEGER DEFAULT 0,
  is_sticker INTEGER DEFAULT 0, hide_attachment INTEGER DEFAULT 0);
CREATE TABLE chat_handle_join (chat_id INTEGER REFERENCES chat (ROWID) ON DELETE CASCADE, handle_id INTEGER
  REFERENCES handle (ROWID) ON DELETE CASCADE, UNIQUE(chat_id, handle_id));
CREATE TABLE chat_message_join (chat_id INTEGER REFERENCES chat (ROWID) ON DELETE CASCADE, message_id INTEGER
  REFERENCES message (ROWID) ON DELETE CASCADE, message_date INTEGER DEFAULT 0, PRIMARY KEY (chat_id, message_id));
CREATE TABLE message_attachment_join (message_id INTEGER REFERENCES message (ROWID) ON DELETE CASCADE,
  attachment_id INTEGER REFERENCES attachment (ROWID) ON DELETE CASCADE, UNIQUE(message_id, attachment_id));
CREATE TABLE chat_recoverable_message_join (chat_id INTEGER REFERENCES chat (ROWID) ON DELETE CASCADE,
  message_id INTEGER REFERENCES message (ROWID) ON DELETE CASCADE, delete_date INTEGER, ck_sync_state INTEGER
  DEFAULT 0, PRIMARY KEY (chat_id, message_id));
CREATE INDEX chat_message_join_idx_message_id_only ON chat_message_join(message_id);
CREATE INDEX message_attachment_join_idx_message_id ON message_attachment_join(message_id);
"""


# -- typedstream ----------------------------------------------------------------------------------------------


def _int(n: int) -> bytes:
    """A typedstream integer: one byte below 0x80, else 0x81 + int16 LE, else 0x82 + int32 LE."""
    if 0 <= n < 0x80:
        return bytes([n])
    if n < 0x8000:
        return b"\x81" + n.to_bytes(2, "little")
    return b"\x82" + n.to_bytes(4, "little")


class _Writer:
    """A typedstream being written: strings and classes are literal the first time, references afterwards."""

    def __init__(self):
        self.out = bytearray(b"\x04\x0bstreamtyped\x81\xe8\x03")  # version 4, signature, system version 1000
        self.strings: list[bytes] = []
        self.objects: list[bytes | None] = []

    def shared(self, s: bytes) -> None:
        if s in self.strings:
            self.out.append(0x92 + self.strings.index(s))
        else:
            self.strings.append(s)
            self.out += b"\x84" + _int(len(s)) + s

    def obj(self, chain: list[tuple[bytes, int]]) -> None:
        """START of an object whose class chain (class, parents…) is new or continues into a seen class."""
        self.out.append(0x84)
        self.objects.append(None)
        for name, version in chain:
            if name in self.objects:
                self.out.append(0x92 + self.objects.index(name))
                return
            self.out.append(0x84)
            self.shared(name)
            self.out += _int(version)
            self.objects.append(name)
        self.out.append(0x85)

    def text(self, data: bytes) -> None:
        self.shared(b"+")
        self.out += _int(len(data)) + data + b"\x86"


def attributed_body(text: str, mutable: bool = False) -> bytes:
    """The attributedBody of a plain message, as Messages archives it."""
    w = _Writer()
    w.shared(b"@")
    root, string = [(b"NSAttributedString", 0), (b"NSObject", 0)], [(b"NSString", 1), (b"NSObject", 0)]
    if mutable:
        root.insert(0, (b"NSMutableAttributedString", 0))
        string.insert(0, (b"NSMutableString", 1))
    w.obj(root)
    w.shared(b"@")
    w.obj(string)
    w.text(text.encode("utf-8"))
    units = len(text.encode("utf-16-le")) // 2  # attribute ranges count UTF-16 units
    if units:
        w.shared(b"iI")
        w.out += _int(1) + _int(units)
        w.shared(b"@")
        w.obj([(b"NSDictionary", 0), (b"NSObject", 0)])
        w.shared(b"i")
        w.out += _int(1)  # one attribute
        w.shared(b"@")
        w.obj([(b"NSString", 1)])
        w.text(b"__kIMMessagePartAttributeName")
        w.shared(b"@")
        w.obj([(b"NSNumber", 0), (b"NSValue", 0), (b"NSObject", 0)])
        w.shared(b"*")
        w.out.append(0x84)
        w.shared(b"i")  # the number's C type, then its value 0 (part 0)
        w.shared(b"i")
        w.out += _int(0) + b"\x86\x86"
    w.out += b"\x86"
    return bytes(w.out)


# -- the database ---------------------------------------------------------------------------------------------


def unix(iso: str) -> int:
    return int(datetime.fromisoformat(iso).replace(tzinfo=timezone.utc).timestamp())


def apple_ns(iso: str) -> int:
    return (unix(iso) - APPLE_EPOCH) * 1_000_000_000 + 123_456_789


def apple_s(iso: str) -> int:
    return unix(iso) - APPLE_EPOCH


def guid(n: int) -> str:
    return f"{n:08X}-5E1F-4C4A-9B8B-{n * 7919:012X}"


@dataclass
class Msg:
    n: int  # ROWID, and the seed of its GUID
    chat: int
    date: int  # as stored (Apple epoch, ns or s)
    handle: int = 0
    from_me: bool = False
    text: str | None = None
    body: bytes | None = None
    service: str = "iMessage"
    item_type: int = 0
    amt: int = 0  # associated_message_type
    target: int = 0  # associated message (tapbacks)
    error: int = 0
    edited: int = 0
    retracted: int = 0
    date_read: int | None = None
    attachments: list[tuple[str, str]] = field(default_factory=list)  # (transfer_name, filename)
    recoverable: bool = False  # in "Recently Deleted": chat_recoverable_message_join, not chat_message_join
    group_title: str | None = None

    @property
    def guid(self) -> str:
        return guid(self.n)


HANDLES = [  # ROWID, id, service, person_centric_id
    (1, "+15555550142", "iMessage", "PCID-ANN-7F3A"),
    (2, "+15555550142", "SMS", None),
    (3, "Ann@Example.com", "iMessage", "PCID-ANN-7F3A"),
    (4, "+447700900123", "iMessage", None),
    (5, "carol@example.org", "iMessage", None),
    (6, "+4915112345678", "iMessage", None),
    (7, "+33612345678", "SMS", None),
]
CHATS = [  # ROWID, guid, style, chat_identifier, service, display_name, handles
    (1, "iMessage;-;+15555550142", 45, "+15555550142", "iMessage", None, [1]),
    (2, "SMS;-;+15555550142", 45, "+15555550142", "SMS", None, [2]),
    (3, "iMessage;-;Ann@Example.com", 45, "Ann@Example.com", "iMessage", None, [3]),
    (4, "iMessage;+;chat884422", 43, "chat884422", "iMessage", "Climbing crew", [4, 5, 6]),
    (5, "SMS;-;+33612345678", 45, "+33612345678", "SMS", None, [7]),
]

AGENDA = ("Here is the full agenda for the offsite: arrival Thursday afternoon, a walk around the lake, the "
          "roadmap review on Friday morning, lunch on the terrace, the hiring plan after lunch and a long "
          "sauna evening. Please tell me what is missing — und bitte die Zimmer bestätigen!")
TRAINING = "\n".join(f"Week {w} day {d}: hangboard {w + d} sets, {4 + d} boulders at grade {w % 6 + 3}, "
                     f"stretch the shoulders and log every session in the team sheet so the coach can plan."
                     for w in range(1, 60) for d in range(1, 5))
JAPANESE = "日本のクライミングジムは最高です 🧗‍♀️🇯🇵 次は東京で登ろう"
ANN_S1, ANN_S2, CREW, EVE = "2026-03-02T09:", "2026-03-05T18:", "2026-03-03T19:", "2012-06-01T12:"

MESSAGES = [
    Msg(1, 1, apple_ns(ANN_S1 + "00:00"), 1, text="Morning! Did you see the offsite budget?"),
    Msg(2, 1, apple_ns(ANN_S1 + "01:00"), 0, True,
        body=attributed_body("Yes — shall we book the lake hotel for the offsite in April?")),
    Msg(3, 2, apple_ns(ANN_S1 + "02:00"), 2, service="SMS",
        text="Lake hotel sounds great, but check the sauna opening hours"),
    Msg(4, 1, apple_ns(ANN_S1 + "03:00"), 1, text="Liked “Yes — shall we book the lake hotel…”", amt=2001, target=2),
    Msg(5, 1, apple_ns(ANN_S1 + "03:30"), 1, text="Removed a like from “Yes — shall we book…”", amt=3001, target=2),
    Msg(6, 1, apple_ns(ANN_S1 + "05:00"), 0, True, text="Booked two rooms at the Seehotel",
        edited=apple_ns(ANN_S1 + "06:00")),
    Msg(7, 1, apple_ns(ANN_S1 + "06:30"), 0, True, retracted=apple_ns(ANN_S1 + "07:00")),  # unsent: no text left
    Msg(8, 2, apple_ns(ANN_S1 + "07:00"), 2, service="SMS", error=39),  # errored junk row
    Msg(9, 3, apple_ns(ANN_S1 + "08:00"), 3, body=attributed_body(AGENDA, mutable=True)),  # > 127 bytes: 0x81
    Msg(10, 1, apple_ns(ANN_S1 + "09:00"), 1, text="delete me: the secret pineapple code", recoverable=True),
    Msg(11, 1, apple_ns(ANN_S1 + "10:00"), 1, text="Can't wait!", date_read=0),
    Msg(12, 1, apple_ns(ANN_S2 + "00:00"), 1, body=attributed_body("this message was cut off in transit")[:80]),  # undecodable
    Msg(13, 1, apple_ns(ANN_S2 + "01:00"), 0, True, text="Dinner at the lake on Friday then?"),
    Msg(20, 4, apple_ns(CREW + "00:00"), 4, item_type=2, group_title="Climbing crew"),  # rename event
    Msg(21, 4, apple_ns(CREW + "01:00"), 4, body=attributed_body(JAPANESE, mutable=True)),
    Msg(22, 4, apple_ns(CREW + "02:00"), 5, text="\ufffc",
        attachments=[("route-map.jpg", "~/Library/Messages/Attachments/ab/11/0A1B2C3D/route-map.jpg")]),
    Msg(23, 4, apple_ns(CREW + "03:00"), 6, text="Loved an image", amt=2000, target=22),
    Msg(24, 4, apple_ns(CREW + "04:00"), 0, True, body=attributed_body("Boulder session Thursday at the "
                                                                       "Kletterhalle? 🤙")),
    Msg(25, 4, apple_ns(CREW + "05:00"), 6, body=attributed_body(TRAINING)),  # 33 KB: the 0x82 length form
    Msg(26, 4, apple_ns(CREW + "06:00"), 5, text="Wow, that plan is intense"),
    Msg(30, 5, apple_s(EVE + "00:00"), 7, service="SMS", text="Bonjour ! Le train arrive à 18h à Lyon"),
    Msg(31, 5, apple_s(EVE + "02:00"), 0, True, service="SMS", text="Parfait, je serai sur le quai"),
    Msg(32, 5, apple_ns(EVE + "05:00"), 7, service="SMS", text="Le train a 10 minutes de retard"),
]
LATE = Msg(40, 1, apple_ns(ANN_S2 + "30:00"), 1, text="The sauna opens at 7, bring towels")  # only in the -wal
UNCOMMITTED = Msg(41, 1, apple_ns(ANN_S2 + "31:00"), 1, text="secret ferret plans, never committed")

ANN, CREW_KEY, EVE_KEY = "with/+15555550142", "group/chat884422", "with/+33612345678"


def window(conv: str, first: Msg) -> str:
    stamp = datetime.fromtimestamp(unix_of(first.date), timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{conv}/{stamp}~{first.guid}"


def unix_of(date: int) -> float:
    return date / 1e9 + APPLE_EPOCH if date > 100_000_000_000 else date + APPLE_EPOCH


def by_n(n: int) -> Msg:
    return next(m for m in MESSAGES + [LATE, UNCOMMITTED] if m.n == n)


EXPECTED = {  # window key → ROWIDs of its messages
    window(ANN, by_n(1)): [1, 2, 3, 6, 9, 11],
    window(ANN, by_n(13)): [13],
    window(CREW_KEY, by_n(21)): [21, 22, 24],
    window(CREW_KEY, by_n(25)): [25],
    window(CREW_KEY, by_n(26)): [26],
    window(EVE_KEY, by_n(30)): [30, 31, 32],
}
UNDECODABLE = f"{ANN}/undecodable~{guid(12)}"


def build(path: Path, messages: list[Msg] | None = None) -> Path:
    """Write chat.db (WAL mode); every connection closed afterwards (the -wal checkpointed away)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(SCHEMA)
    conn.execute("BEGIN")
    for rowid, ident, service, person in HANDLES:
        conn.execute("INSERT INTO handle (ROWID, id, country, service, uncanonicalized_id, person_centric_id) "
                     "VALUES (?, ?, 'us', ?, ?, ?)", (rowid, ident, service, ident, person))
    for rowid, g, style, ident, service, name, members in CHATS:
        conn.execute("INSERT INTO chat (ROWID, guid, style, chat_identifier, service_name, display_name) "
                     "VALUES (?, ?, ?, ?, ?, ?)", (rowid, g, style, ident, service, name))
        conn.executemany("INSERT INTO chat_handle_join VALUES (?, ?)", [(rowid, h) for h in members])
    add_messages(conn, MESSAGES if messages is None else messages)
    conn.execute("COMMIT")
    conn.close()
    return path


def add_messages(conn: sqlite3.Connection, messages: list[Msg]) -> None:
    for m in messages:
        conn.execute(
            "INSERT INTO message (ROWID, guid, text, handle_id, attributedBody, service, error, date, date_read, "
            "date_delivered, is_from_me, is_read, is_sent, cache_has_attachments, item_type, group_title, "
            "associated_message_guid, associated_message_type, date_retracted, date_edited, part_count) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)",
            (m.n, m.guid, m.text, m.handle, m.body, m.service, m.error, m.date,
             m.date + 60 if m.date_read is None else m.date_read, m.date, int(m.from_me), int(m.date_read != 0),
             int(m.from_me), int(bool(m.attachments)), m.item_type, m.group_title,
             f"p:0/{guid(m.target)}" if m.target else None, m.amt, m.retracted, m.edited))
        join = "chat_recoverable_message_join" if m.recoverable else "chat_message_join"
        conn.execute(f"INSERT INTO {join} (chat_id, message_id) VALUES (?, ?)", (m.chat, m.n))
        for i, (name, filename) in enumerate(m.attachments):
            a = conn.execute("INSERT INTO attachment (guid, filename, mime_type, transfer_name, total_bytes) "
                             "VALUES (?, ?, 'image/jpeg', ?, 48213)", (f"at_{m.n}_{i}", filename, name)).lastrowid
            conn.execute("INSERT INTO message_attachment_join VALUES (?, ?)", (m.n, a))


def append(db: Path, *messages: Msg) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("BEGIN")
    add_messages(conn, list(messages))
    conn.execute("COMMIT")
    conn.close()


def execute(db: Path, sql: str, params=()) -> None:
    conn = sqlite3.connect(db)
    with conn:
        conn.execute(sql, params)
    conn.close()


class AppWriter:
    """Messages running: a row committed only to the -wal (no checkpoint), then an open write transaction."""

    def __init__(self, db: Path):
        self.conn = sqlite3.connect(db, isolation_level=None)
        self.conn.execute("PRAGMA wal_autocheckpoint=0")
        self.conn.execute("BEGIN")
        add_messages(self.conn, [LATE])
        self.conn.execute("COMMIT")
        self.conn.execute("BEGIN IMMEDIATE")
        add_messages(self.conn, [UNCOMMITTED])

    def close(self) -> None:
        self.conn.execute("ROLLBACK")
        self.conn.close()


def hash_tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}
