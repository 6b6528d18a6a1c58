"""An eM Client data folder generated from the documented schema (../shared/reference/sources.md §1).

    <root>/accounts.dat, settings.dat          top-level files: an SQLite one and a non-SQLite one, no store
    <root>/<A>/Gmail me.acn                    account marker
    <root>/<A>/<B>/                            store "gmail": mail_index.dat (WAL), folders.dat, mail_fti.dat
                                               (a real FTS4 table), mail_data.dat (indexed on id), a non-SQLite
                                               conversations.dat
    <root>/<C>/<D>/                            store "o365": no mail_fti.dat, mail_data.dat without an index on
                                               id, MailItems without editTime/downloadState and with an extra column
    <root>/<E>/<F>/contact_data.dat            a folder without mail_index.dat: not a store

Nasty cases (see MESSAGES): .NET ticks incl. date = 0 (and both dates 0), Message-ID with and without <>,
`<>`, missing; the same Message-ID in INBOX and All Mail and in the other store; HTML-only (FTI part 2 only);
a body only in mail_data.dat (ISO-8859-1); zero-length partBody with contentLength > 0 (preview fallback);
quoted-printable windows-1252 part; a raw message in the TEXT part header; replies quoting their original
in English ('On … wrote:' + '>'), German ('Am … schrieb …:', '-----Ursprüngliche Nachricht-----') and
Outlook's 'From: … Sent: …' block; signatures ('-- ', 'Sent from my iPhone', sign-offs); SafeLinks;
non-ASCII names; a deleted-flag row (flags & 65536); a Spam-folder row; a text/calendar invitation; an
image attachment; categories.
"""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

TICKS_AT_UNIX_EPOCH = 621_355_968_000_000_000
GMAIL = ("1b4e28ba-2fa1-11d2-883f-0016d3cca427", "6fa459ea-ee8a-3ca4-894e-db77e160355e")
O365 = ("886313e1-3b8a-5372-9b90-0c9aee199e5d", "a8098c1a-f86e-11da-bd1a-00112444be1e")
NOT_A_STORE = ("16fd2706-8baf-433b-82eb-8c7fada847da", "e902893a-9d22-3c7e-a7b8-d6e313b71d9f")
SAFELINK = ("https://eur01.safelinks.protection.outlook.com/?url=https%3A%2F%2Fbeispiel.de%2Fangebot%2Fkx500"
            "%3Fref%3Dmail&data=05%7C02%7Csam%40example.com%7C&sdata=Xq%2Bz&reserved=0")
ME = ("Sam Taylor", "sam@example.com")
ANN = ("Ann Lee", "Ann.Lee@Example.com")
BOB = ("Bob Stone", "bob@example.com")
JUERGEN = ("Jürgen Müller", "juergen.mueller@beispiel.de")
PRIYA = ("Priya Patel", "priya@contoso.com")


def ticks(iso: str) -> int:
    dt = datetime.fromisoformat(iso).replace(tzinfo=timezone.utc)
    return int(dt.timestamp()) * 10_000_000 + TICKS_AT_UNIX_EPOCH


def unix(iso: str) -> int:
    return int(datetime.fromisoformat(iso).replace(tzinfo=timezone.utc).timestamp())


@dataclass
class Mail:
    """One MailItems row and what belongs to it in the other files."""

    id: int
    folder: int
    subject: str
    message_id: str | None
    date: int
    received: int
    sender: tuple[str, str] | None
    to: list = field(default_factory=list)
    cc: list = field(default_factory=list)
    bcc: list = field(default_factory=list)
    fti: list = field(default_factory=list)  # (partName, text)
    parts: list = field(default_factory=list)  # (partName, contentType, disposition, encoding, length, header, body)
    preview: str = ""
    flags: int = 2
    conversation: str = ""
    in_reply_to: str = ""
    categories: list = field(default_factory=list)


K8S = ("Hi all, the Kubernetes cluster upgrade to 1.31 is planned for the weekend of March 14. We drain the nodes "
       "one by one and keep the etcd snapshot for rollback.\n\nBest regards,\nAnn Lee\nPlatform team")
ANGEBOT = ("Sehr geehrter Herr Taylor,\nanbei unser Angebot für die Kühlanlage KX-500 mit Wartungsvertrag. "
           f"Details und Preise: {SAFELINK}\n\nMit freundlichen Grüßen\nJürgen Müller\nBeispiel Kältetechnik GmbH")
BOB_REPLY = ("Works for me, but let's take a fresh etcd snapshot right before draining the first node.\n\n"
             "Sent from my iPhone\n\nOn Mon, Mar 2, 2026 at 9:00 AM Ann Lee <ann.lee@example.com> wrote:\n"
             "> Hi all, the Kubernetes cluster upgrade is planned. zebrafish-quoted\n> Ann\n")
SAM_GERMAN = ("Hallo Herr Müller,\n\nvielen Dank, wir nehmen das Angebot für die Kältemaschine an. Lieferung bitte bis "
              "Ende April an das Lager in Leipzig.\n\nViele Grüße\nSam Taylor\n\n"
              "Am 04.03.2026 um 08:30 schrieb Jürgen Müller <juergen.mueller@beispiel.de>:\n\n"
              "Sehr geehrter Herr Taylor, anbei unser Angebot axolotl-quoted für die Kühlanlage.\n")
INVITE = ("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nUID:qr-2026@example.com\r\nSUMMARY:Quarterly review of "
          "the hiring plan\r\nDTSTART:20260310T100000Z\r\nLOCATION:Room Aurora\\, 4th floor\r\nDESCRIPTION:We go "
          "through the hiring budget per tea\r\n m.\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n")
CAFE = ("Bonjour Sam,\n\nla réunion du comité aura lieu au café Procope, salle de l'étage, jeudi à 18 h. Apportez "
        "le plan de la crèche.\n\nCordialement,\nÉlodie\n").encode("iso-8859-1")
OUTLOOK_HTML = (
    "<html><head><style>p{margin:0}</style></head><body><div dir='ltr'><p>Team,</p><p>the database failover "
    "finished at 02:14; replication lag is back to zero. Root cause: a full disk on the primary. Runbook: "
    f"<a href='{SAFELINK}'>{SAFELINK}</a></p><div id='Signature'><p>Priya Patel | SRE</p></div></div>"
    "<div id='appendonsend'></div><hr><div id='divRplyFwdMsg'><b>From:</b> Bob Stone<br><b>Sent:</b> "
    "Tuesday<br><b>Subject:</b> outage</div><div><p>Is the kangaroo-quoted database down?</p></div></body></html>")
OUTLOOK_TEXT = ("Approved: we order the two replacement SSDs for the backup server today.\n\n-----Original "
                "Message-----\nFrom: Sam Taylor <sam@example.com>\nSent: Monday, March 9, 2026 4:12 PM\nTo: Priya\n"
                "Subject: SSD order\n\nCan we order the SSDs? wombat-quoted\n").encode("cp1252")
RAW = (b"From: Bob Stone <bob@example.com>\r\nTo: Sam Taylor <sam@example.com>\r\nSubject: Lunch order\r\n"
       b"Message-ID: <lunch-42@example.com>\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n"
       b"Two falafel wraps and a lemonade for the Friday lunch, please.\r\n")
PNG = b"\x89PNG\r\n\x1a\n" + bytes(64)


def _qp(data: bytes) -> bytes:
    import quopri

    return quopri.encodestring(data)


GMAIL_FOLDERS = [(1, "", "/"), (2, "INBOX", "/INBOX"), (3, "[Gmail]", "/[Gmail]"), (4, "All Mail", "/[Gmail]/All Mail"),
                 (5, "Sent Mail", "/[Gmail]/Sent Mail"), (6, "Spam", "/[Gmail]/Spam"), (7, "Kühlung", "/Projekte/Kühlung")]
O365_FOLDERS = [(1, "Inbox", "/Inbox"), (2, "Sent Items", "/Sent Items"), (3, "Deleted Items", "/Deleted Items")]

GMAIL_MAILS = [
    Mail(1, 2, "Kubernetes upgrade plan", "<k8s-plan@example.com>", ticks("2026-03-02T09:00:00"),
         ticks("2026-03-02T09:00:05"), ANN, to=[ME, BOB], cc=[("Carol Díaz", "carol@example.com")],
         bcc=[("", "Dan@Example.com")], fti=[("1", K8S), ("1.2", "plan.pdf")], conversation="conv-k8s",
         categories=["Work"], preview=K8S[:120]),
    Mail(2, 4, "Kubernetes upgrade plan", "k8s-plan@example.com", ticks("2026-03-02T09:00:00"),
         ticks("2026-03-02T09:00:05"), ANN, to=[ME, BOB], cc=[("Carol Díaz", "carol@example.com")],
         bcc=[("", "Dan@Example.com")], fti=[("1", K8S)], conversation="conv-k8s", preview=K8S[:120]),
    Mail(3, 2, "Angebot für die Kühlanlage", "<angebot-kx500@beispiel.de>", ticks("2026-03-04T08:30:00"),
         ticks("2026-03-04T08:31:00"), JUERGEN, to=[ME], fti=[("2", ANGEBOT)],
         parts=[("TEXT", "multipart/alternative", "", 0, 0, b"Subject: Angebot\r\n", b""),
                ("1", "text/html; charset=utf-8", "", 4, 400, b"", f"<p>{ANGEBOT}</p>".encode())]),
    Mail(4, 7, "Angebot für die Kühlanlage", "<angebot-kx500@beispiel.de>", ticks("2026-03-04T08:30:00"),
         ticks("2026-03-04T08:31:00"), JUERGEN, to=[ME], categories=["Einkauf"]),
    Mail(5, 2, "Re: Kubernetes upgrade plan", "<re-k8s-bob@example.com>", ticks("2026-03-03T10:00:00"),
         ticks("2026-03-03T10:00:09"), BOB, to=[ANN], cc=[ME], fti=[("1", BOB_REPLY)], conversation="conv-k8s",
         in_reply_to="<k8s-plan@example.com>"),
    Mail(6, 5, "AW: Angebot für die Kühlanlage", "<aw-angebot@example.com>", ticks("2026-03-05T07:45:00"),
         ticks("2026-03-05T07:45:00"), ME, to=[JUERGEN], fti=[("1", SAM_GERMAN)]),
    Mail(7, 2, "Invitation: Quarterly review", "<invite-qr@example.com>", ticks("2026-03-06T12:00:00"),
         ticks("2026-03-06T12:00:00"), ANN, to=[ME],
         parts=[("1", "text/calendar; charset=utf-8; method=REQUEST", "", 0, len(INVITE), b"", INVITE.encode())]),
    Mail(8, 2, "Old newsletter", "<old-news@example.com>", ticks("2025-01-01T00:00:00"), ticks("2025-01-01T00:00:00"),
         ("News", "news@example.com"), to=[ME], fti=[("1", "This deleted newsletter mentions platypus-deleted.")],
         flags=2 | 65536),
    Mail(9, 6, "You won a prize", "<spam-1@spam.example>", ticks("2026-03-01T00:00:00"), ticks("2026-03-01T00:00:00"),
         ("Prize", "win@spam.example"), to=[ME], fti=[("1", "Claim your prize now: narwhal-spam lottery winnings.")]),
    Mail(10, 2, "Note to self", None, ticks("2026-03-07T18:00:00"), ticks("2026-03-07T18:00:00"), ME, to=[ME],
         fti=[("1", "Remember to renew the domain example.com before the 20th; the registrar is Gandi.")]),
    Mail(11, 2, "", "<>", 0, 0, ("", "noreply@example.com"), to=[ME], preview="Your parcel tracking number is 4711.",
         parts=[("1", "text/plain; charset=utf-8", "", 0, 120, b"", b"")]),  # empty body, length > 0
    Mail(12, 2, "Réunion du comité", "<reunion@exemple.fr>", ticks("2026-03-08T16:00:00"),
         ticks("2026-03-08T16:00:00"), ("Élodie Dubois", "elodie@exemple.fr"), to=[ME],
         parts=[("TEXT", "multipart/mixed", "", 0, 0, b"Subject: x\r\n", b""),
                ("1", "text/plain; charset=ISO-8859-1", "", 0, len(CAFE), b"", CAFE),
                ("2", "image/png; name=\"crèche plan.png\"", "attachment; filename=\"crèche plan.png\"", 4, len(PNG),
                 b"", PNG)]),
]
O365_MAILS = [
    Mail(101, 1, "Incident report: database failover", "<incident-77@contoso.com>", ticks("2026-03-10T03:00:00"),
         ticks("2026-03-10T03:00:02"), PRIYA, to=[ME, BOB],
         parts=[("1", "text/html; charset=utf-8", "", 4, len(OUTLOOK_HTML), b"", OUTLOOK_HTML.encode())]),
    Mail(102, 1, "RE: SSD order", "<ssd-order@contoso.com>", 0, ticks("2026-03-10T09:30:00"), PRIYA, to=[ME],
         parts=[("1", "text/plain; charset=windows-1252", "", 5, len(OUTLOOK_TEXT), b"", _qp(OUTLOOK_TEXT))]),
    Mail(103, 1, "Kubernetes upgrade plan", "<k8s-plan@example.com>", ticks("2026-03-02T09:00:00"),
         ticks("2026-03-02T09:00:07"), ANN, to=[("Sam Taylor", "sam@contoso.com")],
         preview="Hi all, the Kubernetes cluster upgrade"),
    Mail(104, 1, "Lunch order", "<lunch-42@example.com>", ticks("2026-03-11T11:00:00"), ticks("2026-03-11T11:00:00"),
         BOB, to=[ME], parts=[("TEXT", "text/plain; charset=utf-8", "", 0, 0, RAW, b"")]),
    Mail(105, 3, "Deleted items are left out", "<trash-1@contoso.com>", ticks("2026-03-11T12:00:00"),
         ticks("2026-03-11T12:00:00"), BOB, to=[ME], preview="This one sits in Deleted Items: quokka-trash."),
]

# What the folder indexes as (key → subject), with the default excluded folders.
EXPECTED = {
    "<k8s-plan@example.com>": "Kubernetes upgrade plan",
    "<angebot-kx500@beispiel.de>": "Angebot für die Kühlanlage",
    "<re-k8s-bob@example.com>": "Re: Kubernetes upgrade plan",
    "<aw-angebot@example.com>": "AW: Angebot für die Kühlanlage",
    "<invite-qr@example.com>": "Invitation: Quarterly review",
    f"nomid:{hashlib.sha1(('Note to self' + chr(0) + str(ticks('2026-03-07T18:00:00'))).encode()).hexdigest()[:20]}":
        "Note to self",
    f"row:{GMAIL[0]}/{GMAIL[1]}/11": "(no subject)",
    "<reunion@exemple.fr>": "Réunion du comité",
    "<incident-77@contoso.com>": "Incident report: database failover",
    "<ssd-order@contoso.com>": "RE: SSD order",
    "<lunch-42@example.com>": "Lunch order",
}

INDEX_DDL = """
CREATE TABLE MailItems (id INTEGER PRIMARY KEY, uniqueId TEXT, folder INTEGER, date INTEGER, receivedDate INTEGER,
  subject TEXT, messageId TEXT, inReplyTo TEXT, "references" TEXT, conversationId TEXT, preview TEXT, flags INTEGER,
  importance INTEGER, size INTEGER, notes TEXT, classification TEXT, replyDate INTEGER, forwardDate INTEGER,
  versionId INTEGER, syncFlags INTEGER, syncFolder INTEGER, account INTEGER, {variant} operationsPerformed INTEGER,
  lastMarkAsRead INTEGER, sendAfter INTEGER, showAfterDate INTEGER, imipDate INTEGER, imipEndDate INTEGER);
CREATE TABLE MailAddresses (id INTEGER PRIMARY KEY, parentId INTEGER, type INTEGER, position INTEGER,
  displayName TEXT, address TEXT);
CREATE INDEX idx_MailAddresses_parentId ON MailAddresses(parentId);
CREATE TABLE MailCategoryNames (id INTEGER, categoryName TEXT);
CREATE TABLE FlaggedMailItems (id INTEGER PRIMARY KEY);
CREATE TABLE MailCounts (folder INTEGER PRIMARY KEY, unread INTEGER, total INTEGER);
"""
GMAIL_VARIANT = "editTime INTEGER, downloadState INTEGER,"
O365_VARIANT = "aiSummary TEXT,"  # editTime and downloadState missing, an unknown column added
DATA_DDL = """
CREATE TABLE LocalMailContents (id INTEGER, partName TEXT, contentType TEXT, contentId TEXT, contentDescription TEXT,
  contentDisposition TEXT, contentTransferEncoding INTEGER, contentLength INTEGER, synchronizationKey TEXT,
  partHeader BLOB, partBody BLOB);
"""


@dataclass
class EmClientFolder:
    root: Path
    gmail: Path  # store folders
    o365: Path


def build(root: Path) -> EmClientFolder:
    """Write the eM Client data folder under root (created); returns its store folders."""
    root.mkdir(parents=True, exist_ok=True)
    gmail, o365 = root / GMAIL[0] / GMAIL[1], root / O365[0] / O365[1]
    _sqlite(root / "accounts.dat", "CREATE TABLE Accounts (id INTEGER PRIMARY KEY, name TEXT)")
    (root / "settings.dat").write_text("not sqlite: settings\n")
    (root / NOT_A_STORE[0] / NOT_A_STORE[1]).mkdir(parents=True)
    _sqlite(root / NOT_A_STORE[0] / NOT_A_STORE[1] / "contact_data.dat", "CREATE TABLE Contacts (id INTEGER)")
    write_store(gmail, GMAIL_FOLDERS, GMAIL_MAILS, GMAIL_VARIANT, fti=True, data_index=True, wal=True)
    (gmail.parent / "Gmail me.acn").write_text("")
    (gmail / "conversations.dat").write_bytes(b"\x00garbage, not an SQLite file")
    write_store(o365, O365_FOLDERS, O365_MAILS, O365_VARIANT, fti=False, data_index=False, wal=False)
    return EmClientFolder(root, gmail, o365)


def write_store(folder: Path, folders: list, mails: list[Mail], variant: str, *, fti: bool, data_index: bool,
                wal: bool) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    _sqlite(folder / "folders.dat", "CREATE TABLE Folders (id INTEGER PRIMARY KEY, uniqueId TEXT, name TEXT, "
            "path TEXT, parentFolderId INTEGER, delimiter TEXT); CREATE TABLE FolderAttributes (id INTEGER, "
            "name TEXT, value TEXT)", [("INSERT INTO Folders VALUES (?, ?, ?, ?, NULL, '/')",
                                        [(i, f"uid-{i}", n, p) for i, n, p in folders])])
    conn = sqlite3.connect(folder / "mail_index.dat")
    if wal:
        conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(INDEX_DDL.format(variant=variant))
    add_mails(conn, mails)
    conn.commit()
    conn.close()
    data = sqlite3.connect(folder / "mail_data.dat")
    data.executescript(DATA_DDL + ("CREATE INDEX idx_LocalMailContents_id ON LocalMailContents(id);" if data_index else ""))
    data.executemany("INSERT INTO LocalMailContents (id, partName, contentType, contentDisposition, "
                     "contentTransferEncoding, contentLength, partHeader, partBody) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                     [(m.id, *p) for m in mails for p in m.parts])
    data.commit()
    data.close()
    if fti:
        add_fti(folder, mails, create=True)


def add_mails(conn: sqlite3.Connection, mails: list[Mail]) -> None:
    """Insert MailItems, MailAddresses and categories rows (the caller commits)."""
    cols = {r[1] for r in conn.execute("PRAGMA table_info(MailItems)")}
    for m in mails:
        row = {"id": m.id, "uniqueId": f"u{m.id}", "folder": m.folder, "date": m.date, "receivedDate": m.received,
               "subject": m.subject, "messageId": m.message_id, "inReplyTo": m.in_reply_to or None,
               "conversationId": m.conversation or None, "preview": m.preview, "flags": m.flags, "size": 2048,
               "editTime": 0, "downloadState": 1}
        row = {k: v for k, v in row.items() if k in cols}
        conn.execute(f"INSERT INTO MailItems ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})", list(row.values()))
        people = [(1, m.sender)] if m.sender else []
        people += [(4, p) for p in m.to] + [(5, p) for p in m.cc] + [(6, p) for p in m.bcc]
        positions: dict[int, int] = {}
        for kind, (name, address) in people:
            positions[kind] = positions.get(kind, -1) + 1
            conn.execute("INSERT INTO MailAddresses (parentId, type, position, displayName, address) "
                         "VALUES (?, ?, ?, ?, ?)", (m.id, kind, positions[kind], name, address))
        conn.executemany("INSERT INTO MailCategoryNames VALUES (?, ?)", [(m.id, c) for c in m.categories])


def add_fti(folder: Path, mails: list[Mail], create: bool = False) -> None:
    """eM Client's full-text index: a real FTS4 table, so the _content shadow table exists as in the app."""
    conn = sqlite3.connect(folder / "mail_fti.dat")
    if create:
        conn.executescript("CREATE VIRTUAL TABLE LocalMailsIndex3 USING fts4(id, partName, content);"
                           "CREATE VIRTUAL TABLE MailSubjectIndex USING fts4(id, subject);")
    rows = [(m.id if m.id % 2 else str(m.id), part, text) for m in mails for part, text in m.fti]  # ids of both types
    conn.executemany("INSERT INTO LocalMailsIndex3 (id, partName, content) VALUES (?, ?, ?)", rows)
    conn.executemany("INSERT INTO MailSubjectIndex (id, subject) VALUES (?, ?)", [(m.id, m.subject) for m in mails])
    conn.commit()
    conn.close()


def _sqlite(path: Path, ddl: str, inserts: list | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.executescript(ddl)
    for sql, rows in inserts or []:
        conn.executemany(sql, rows)
    conn.commit()
    conn.close()


def delete_mail(store: Path, mail_id: int) -> None:
    """What eM Client does when a message is deleted for good (its FTI row may stay behind)."""
    with sqlite3.connect(store / "mail_index.dat") as conn:
        conn.execute("DELETE FROM MailItems WHERE id = ?", (mail_id,))
        conn.execute("DELETE FROM MailAddresses WHERE parentId = ?", (mail_id,))
    conn.close()


def move_mail(store: Path, mail_id: int, folder: int) -> None:
    with sqlite3.connect(store / "mail_index.dat") as conn:
        conn.execute("UPDATE MailItems SET folder = ? WHERE id = ?", (folder, mail_id))
    conn.close()


class AppWriter:
    """eM Client running: a WAL writer with rows only in the -wal (no checkpoint), then an open write transaction."""

    LATE = Mail(40, 2, "Rooftop party on Friday", "<rooftop@example.com>", ticks("2026-03-12T17:00:00"),
                ticks("2026-03-12T17:00:00"), BOB, to=[ME], preview="Rooftop party on Friday at 6 pm, bring snacks.")
    UNCOMMITTED = Mail(41, 2, "Uncommitted draft", "<uncommitted@example.com>", ticks("2026-03-12T18:00:00"),
                       ticks("2026-03-12T18:00:00"), ME, to=[BOB], preview="secret ferret plans, not committed")

    def __init__(self, store: Path):
        self.conn = sqlite3.connect(store / "mail_index.dat", isolation_level=None)
        self.conn.execute("PRAGMA wal_autocheckpoint=0")
        self.conn.execute("BEGIN")
        add_mails(self.conn, [self.LATE])
        self.conn.execute("COMMIT")  # committed, but only in mail_index.dat-wal
        self.conn.execute("SELECT count(*) FROM MailItems").fetchall()  # the app reads too (sets its read mark)
        self.conn.execute("BEGIN IMMEDIATE")
        add_mails(self.conn, [self.UNCOMMITTED])  # held open while we index

    def close(self) -> None:
        self.conn.execute("ROLLBACK")
        self.conn.close()


def hash_tree(root: Path) -> dict[str, str]:
    """sha256 of every file under root (the app's databases and their -wal/-shm included)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}
