"""A NetNewsWire Accounts folder generated from the documented schema (../shared/reference/sources.md §3).

    <root>/OnMyMac/          DB.sqlite3 in WAL mode with the app's CREATE statements (FTS4 `search` table and its
                             delete trigger included, search rows filled as the app does), Subscriptions.opml
                             (nested folders, a renamed feed, an entity in a title), FeedMetadata.plist and
                             Settings.plist (binary plists: not SQLite, never opened)
    <root>/17_<UUID>/        a Feedbin account: an old-schema DB.sqlite3 (rollback journal; no markdown, authors or
                             searchRowID columns, an unknown extra one; the legacy tags/attachments tables and
                             statuses.userDeleted), numeric feedIDs mapped to feed URLs by FeedSettings.db (WAL,
                             2026 builds, dates in the 2001 epoch), legacy authors only
    <root>/2_iCloud/         the On My Mac blog feed again: one article with the same articleID (one item)
    <root>/.Trash/           a dot folder with a DB.sqlite3: ignored

Nasty cases (see ARTICLES): HTML content with headings, a script, a tracking pixel and relative links; a summary
and no content; contentText only; Markdown only; an empty podcast body (title only); a relative article URL; an
externalURL only; neither URL (netnewswire:// URI); authors as JSON, as legacy authorsLookup rows, both (JSON
wins), none; dates as the app stores them (REAL unix seconds with fractions), datePublished NULL (dateModified
used), both NULL (statuses.dateArrived used), a future date; a very long full-text article; Japanese, German and
Greek text; HTML in a title; read / unread / starred; a status row whose article is gone; an unsubscribed
feed's article; a sync-service articleID with spaces and non-ASCII (hashed key).
"""

from __future__ import annotations

import hashlib
import json
import plistlib
import sqlite3
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

FEEDBIN = "17_4F2C9E1A-6B3D-4C8E-9A71-2D5B8C0E4F13"
BLOG, ZEIT, POD, JP, GONE = ("https://blog.example.com/feed.xml", "https://www.zeit.example/wissen/index",
                             "https://podcast.example.org/rss", "https://news.example.jp/rss",
                             "https://gone.example.net/atom")
KOTTKE, KOTTKE_ID = "https://kottke.example/feed.json", "1402"

# The app's statements (Modules/ArticlesDatabase/Sources/ArticlesDatabase/ArticlesDatabase.swift).
SCHEMA = """
CREATE TABLE if not EXISTS articles (articleID TEXT NOT NULL PRIMARY KEY, feedID TEXT NOT NULL, uniqueID TEXT NOT NULL,
  title TEXT, contentHTML TEXT, contentText TEXT, markdown TEXT, url TEXT, externalURL TEXT, summary TEXT, imageURL TEXT,
  bannerImageURL TEXT, datePublished DATE, dateModified DATE, searchRowID INTEGER, authors TEXT);
CREATE TABLE if not EXISTS statuses (articleID TEXT NOT NULL PRIMARY KEY, read BOOL NOT NULL DEFAULT 0,
  starred BOOL NOT NULL DEFAULT 0, dateArrived DATE NOT NULL DEFAULT 0);
CREATE TABLE if not EXISTS authors (authorID TEXT NOT NULL PRIMARY KEY, name TEXT, url TEXT, avatarURL TEXT,
  emailAddress TEXT);
CREATE TABLE if not EXISTS authorsLookup (authorID TEXT NOT NULL, articleID TEXT NOT NULL,
  PRIMARY KEY(authorID, articleID));
CREATE INDEX if not EXISTS articles_feedID_datePublished_articleID on articles (feedID, datePublished, articleID);
CREATE INDEX if not EXISTS statuses_starred_index on statuses (starred);
CREATE INDEX if not EXISTS authorsLookup_articleID on authorsLookup (articleID);
CREATE VIRTUAL TABLE if not EXISTS search using fts4(title, body);
CREATE TRIGGER if not EXISTS articles_after_delete_trigger_delete_search_text after delete on articles begin
  delete from search where rowid = OLD.searchRowID; end;
"""
# An older database: before markdown, authors (JSON) and searchRowID; tags and attachments still there.
OLD_SCHEMA = """
CREATE TABLE articles (articleID TEXT NOT NULL PRIMARY KEY, feedID TEXT NOT NULL, uniqueID TEXT NOT NULL, title TEXT,
  contentHTML TEXT, contentText TEXT, url TEXT, externalURL TEXT, summary TEXT, imageURL TEXT, bannerImageURL TEXT,
  datePublished DATE, dateModified DATE, futureColumn TEXT);
CREATE TABLE statuses (articleID TEXT NOT NULL PRIMARY KEY, read BOOL NOT NULL DEFAULT 0,
  starred BOOL NOT NULL DEFAULT 0, userDeleted BOOL NOT NULL DEFAULT 0, dateArrived DATE NOT NULL DEFAULT 0);
CREATE TABLE authors (authorID TEXT NOT NULL PRIMARY KEY, name TEXT, url TEXT, avatarURL TEXT, emailAddress TEXT);
CREATE TABLE authorsLookup (authorID TEXT NOT NULL, articleID TEXT NOT NULL, PRIMARY KEY(authorID, articleID));
CREATE TABLE tags (tagName TEXT NOT NULL, articleID TEXT NOT NULL, PRIMARY KEY(tagName, articleID));
CREATE TABLE attachments (attachmentID TEXT NOT NULL PRIMARY KEY, url TEXT NOT NULL, mimeType TEXT, title TEXT,
  sizeInBytes INTEGER, durationInSeconds INTEGER);
CREATE TABLE attachmentsLookup (attachmentID TEXT NOT NULL, articleID TEXT NOT NULL,
  PRIMARY KEY(attachmentID, articleID));
"""
FEED_SETTINGS = """
CREATE TABLE IF NOT EXISTS feedSettings (feedURL TEXT PRIMARY KEY, feedID TEXT NOT NULL DEFAULT '', homePageURL TEXT,
  iconURL TEXT, faviconURL TEXT, editedName TEXT, contentHash TEXT, newArticleNotificationsEnabled INTEGER,
  readerViewAlwaysEnabled INTEGER, authors TEXT, externalID TEXT, folderRelationship TEXT, lastCheckDate REAL);
"""


def seconds(iso: str) -> float:
    """A date as NetNewsWire stores it: NSDate bound by FMDB = REAL seconds since 1970 (fractions kept)."""
    return datetime.fromisoformat(iso).replace(tzinfo=timezone.utc).timestamp() + 0.375


def unix(iso: str) -> int:
    return int(datetime.fromisoformat(iso).replace(tzinfo=timezone.utc).timestamp())


def local_id(feed_id: str, unique_id: str) -> str:
    """articleID of a local or iCloud article: md5 of "<feedID> <uniqueID>" (Article.calculatedArticleID)."""
    return hashlib.md5(f"{feed_id} {unique_id}".encode()).hexdigest()


def author(name: str | None = None, email: str | None = None, url: str | None = None) -> dict:
    """An Author as the app's JSON encoder writes it (nil properties left out; authorID = md5 of the fields)."""
    d = {"authorID": hashlib.md5(f"{name or ''}{url or ''}{email or ''}".encode()).hexdigest()}
    return d | {k: v for k, v in (("name", name), ("url", url), ("emailAddress", email)) if v}


@dataclass
class Art:
    feed: str
    unique: str
    title: str | None = None
    html: str | None = None
    text: str | None = None
    markdown: str | None = None
    summary: str | None = None
    url: str | None = None
    external: str | None = None
    published: float | None = None
    modified: float | None = None
    authors: list[dict] | None = None  # the JSON column
    legacy: list[dict] = field(default_factory=list)  # authors + authorsLookup rows
    read: bool = False
    starred: bool = False
    arrived: float = 0.0
    article_id: str | None = None  # a sync service's ID; else computed like the app

    @property
    def id(self) -> str:
        return self.article_id or local_id(self.feed, self.unique)


def _long_article() -> str:
    topics = ["Ingest", "Storage", "Compaction", "Replication", "Backups", "Monitoring", "Capacity", "Lessons"]
    parts = ["<p>A complete account of running the telemetry pipeline for a year, as published in full text.</p>"]
    for i, topic in enumerate(topics):
        parts.append(f"<h2>{topic}</h2>")
        parts += [f"<p>Part {i + 1}.{j + 1}: the {topic.lower()} stage handled shard {i * 10 + j} of the telemetry "
                  f"stream; we measured latency, retried failed writes and wrote down every surprise we met.</p>"
                  for j in range(5)]
    parts.append("<h2>Lessons</h2><p>The lighthouse keeper metaphor stuck: watch the beam, not the lamp.</p>")
    return "\n".join(parts)


ANN = author("Ann Lee", "Ann.Lee@Example.com")
VACUUM = Art(BLOG, "post-101", "Tuning autovacuum for busy PostgreSQL tables", url="https://blog.example.com/2026/03/autovacuum",
             html="<h1>Tuning autovacuum</h1><p>Dead tuples piled up in our orders table until queries slowed.</p>"
                  "<h2>Settings we changed</h2><p>We lowered <code>autovacuum_vacuum_scale_factor</code> to 0.02 and "
                  "raised the cost limit so vacuum keeps pace with updates. See <a href=\"/docs/vacuum\">the docs</a>."
                  "</p><img src=\"https://t.example.com/pixel.gif?u=1\" width=\"1\" height=\"1\">"
                  "<script>track('zebrafish')</script><style>.x{color:red}</style>",
             published=seconds("2026-03-02T09:00:00"), modified=seconds("2026-03-03T10:00:00"), authors=[ANN],
             read=True, arrived=seconds("2026-03-02T09:05:00"))
POOLING = Art(BLOG, "post-102", "Connection pooling with PgBouncer", url="/2026/03/pgbouncer",  # relative URL
              html="<p>PgBouncer in transaction mode cut our connection count from 900 to 60.</p>",
              published=seconds("2026-03-04T08:00:00"),
              authors=[author("Bob Stone", url="https://bob.example.com")], legacy=[author("Robert Old Name")])
LONG = Art(BLOG, "post-103", "A year of running the telemetry pipeline", url="https://blog.example.com/2026/02/year",
           html=_long_article(), published=seconds("2026-02-20T12:00:00"), authors=[ANN])
FUTURE = Art(BLOG, "post-999", "Scheduled: the roadmap for 2030", url="https://blog.example.com/2030/roadmap",
             html="<p>Quantum-safe TLS everywhere and a second data centre in Lisbon.</p>",
             published=seconds("2030-01-01T00:00:00"))
RUST = Art(BLOG, "post-104", "<b>Rust</b> &amp; WebAssembly at the edge", url="https://blog.example.com/rust-wasm",
           html="<p>We compiled the image resizer to WebAssembly and run it in the CDN's edge workers.</p>",
           published=seconds("2026-03-05T10:00:00"))
MARKDOWN = Art(BLOG, "post-105", "Notes on SQLite WAL mode", url="https://blog.example.com/wal",
               markdown="# WAL\n\nReaders never block the writer; checkpoints move pages back into the database.",
               published=seconds("2026-03-06T10:00:00"))
LINKED = Art(BLOG, "post-106", "Worth reading: a history of the B-tree", external="https://other.example.org/btree",
             text="Link post: a lovely history of the B-tree and why databases still love it.",
             published=seconds("2026-03-07T10:00:00"))
DOOMED = Art(BLOG, "post-107", "Deprecated: the old staging cluster", url="https://blog.example.com/staging",
             html="<p>The staging cluster called marmoset is switched off next week.</p>",
             published=seconds("2026-03-08T10:00:00"))
QUANTUM = Art(ZEIT, "https://www.zeit.example/wissen/2026-03/quanten", "Über Quantencomputer: Fortschritte in München",
              url="https://www.zeit.example/wissen/2026-03/quanten",
              summary="<p>Forscher in München haben einen Quantenprozessor mit 100 Qubits gebaut, der Fehler selbst "
                      "korrigiert. Die Kühlung erfolgt bei 10 Millikelvin.</p>",
              published=seconds("2026-03-10T08:30:00"), legacy=[author("Jürgen Müller", "j.mueller@zeit.example")],
              starred=True)
GLACIER = Art(ZEIT, "https://www.zeit.example/wissen/2026-03/gletscher", "Gletscher schmelzen schneller",
              url="https://www.zeit.example/wissen/2026-03/gletscher",
              text="Die Gletscher der Alpen verlieren jedes Jahr zwei Prozent ihres Eises, melden Glaziologen aus Zürich.",
              modified=seconds("2026-03-11T12:00:00"), authors=[author("Anna Berg")], legacy=[author("Anna Berg")])
UNDATED = Art(ZEIT, "https://www.zeit.example/wissen/2026-03/olympia", "Ελληνικά: οι Ολυμπιακοί αγώνες",
              url="https://www.zeit.example/wissen/2026-03/olympia",
              html="<p>Η φλόγα των Ολυμπιακών αγώνων ανάβει στην αρχαία Ολυμπία.</p>",
              arrived=seconds("2026-03-12T07:00:00"))
EPISODE = Art(POD, "ep-42", "Episode 42: Sourdough starters", url="https://podcast.example.org/42", html="",
              published=seconds("2026-03-09T06:00:00"))
SAKURA = Art(JP, "sakura-2026", "東京の桜の開花予想", url="https://news.example.jp/sakura",
             html="<p>気象庁によると、東京の桜は三月二十日ごろに開花する見込みです。</p>",
             published=seconds("2026-03-01T00:00:00"), authors=[author("山田 太郎")])
ORPHAN = Art(GONE, "gone-1", "Farewell from an unsubscribed feed",
             html="<p>This feed is gone but its article about capybaras remains until cleanup.</p>",
             published=seconds("2026-01-15T10:00:00"))
LOCAL = [VACUUM, POOLING, LONG, FUTURE, RUST, MARKDOWN, LINKED, DOOMED, QUANTUM, GLACIER, UNDATED, EPISODE, SAKURA, ORPHAN]

PAPERCLIP = Art(KOTTKE_ID, "", "The history of the paperclip", url="https://kottke.example/2026/03/paperclip",
                html="<p>Johan Vaaler's paperclip design was never produced; the Gem clip won.</p>",
                published=seconds("2026-03-03T15:00:00"), legacy=[author("Jason K", "jason@kottke.example")],
                article_id="3344556677")
ODD_ID = Art("1999", "", "A feed with no settings row", url="https://unknown.example/odd",
             html="<p>Odd identifiers from sync services still make stable keys: the otter item.</p>",
             published=seconds("2026-03-04T15:00:00"), article_id="entry 7 · ü")
FEEDBIN_ARTICLES = [PAPERCLIP, ODD_ID]
ICLOUD_ARTICLES = [VACUUM]  # the same feed in iCloud: same computed articleID

LATE = Art(BLOG, "post-200", "Rooftop garden sensors with LoRaWAN", url="https://blog.example.com/rooftop",
           html="<p>Soil moisture sensors on the rooftop garden report over LoRaWAN every ten minutes.</p>",
           published=seconds("2026-03-12T17:00:00"))
UNCOMMITTED = Art(BLOG, "post-201", "Uncommitted draft", html="<p>secret ferret plans, never committed</p>",
                  published=seconds("2026-03-12T18:00:00"))


def key(account: str, art: Art) -> str:
    return f"{account}/{art.id}"


EXPECTED = {key("OnMyMac", a): a for a in LOCAL} | {key(FEEDBIN, PAPERCLIP): PAPERCLIP}
ODD_KEY = f"{FEEDBIN}/~{hashlib.sha1(ODD_ID.id.encode()).hexdigest()}"
EXPECTED[ODD_KEY] = ODD_ID

OPML = """<?xml version="1.0" encoding="UTF-8"?>
<!-- OPML generated by NetNewsWire -->
<opml version="1.1">
\t<head>
\t\t<title>Subscriptions-OnMyMac.opml</title>
\t</head>
<body>
\t<outline text="Bread Talk Podcast" title="Bread Talk Podcast" description="" type="rss" version="RSS" htmlUrl="https://podcast.example.org/" xmlUrl="https://podcast.example.org/rss"/>
\t<outline text="桜ニュース" title="桜ニュース" description="" type="rss" version="RSS" htmlUrl="https://news.example.jp/" xmlUrl="https://news.example.jp/rss"/>
\t<outline text="Nachrichten" title="Nachrichten">
\t\t<outline text="Meine Zeitung" title="Meine Zeitung" description="" type="rss" version="RSS" htmlUrl="https://www.zeit.example/wissen/" xmlUrl="https://www.zeit.example/wissen/index"/>
\t</outline>
\t<outline text="Tech" title="Tech">
\t\t<outline text="Databases" title="Databases">
\t\t\t<outline text="Example Engineering &amp; Ops" title="Example Engineering &amp; Ops" description="" type="rss" version="RSS" htmlUrl="https://blog.example.com/" xmlUrl="https://blog.example.com/feed.xml"/>
\t\t</outline>
\t</outline>
</body>
</opml>
"""
FEEDBIN_OPML = """<?xml version="1.0" encoding="UTF-8"?>
<opml version="1.1"><head><title>Subscriptions-Feedbin.opml</title></head><body>
<outline text="Reading" title="Reading" nnw_externalID="4711">
<outline text="Kottke Daily" title="Kottke Daily" description="" type="rss" version="RSS" htmlUrl="https://kottke.example/" xmlUrl="https://kottke.example/feed.json"/>
</outline></body></opml>
"""


@dataclass
class Accounts:
    root: Path
    local: Path
    feedbin: Path
    icloud: Path


def build(root: Path) -> Accounts:
    """Write the Accounts folder; every connection is closed (the WAL files checkpointed away)."""
    local, feedbin, icloud = root / "OnMyMac", root / FEEDBIN, root / "2_iCloud"
    write_db(local / "DB.sqlite3", LOCAL, wal=True, statuses_only=["0badc0ffee0badc0ffee0badc0ffee00"])
    (local / "Subscriptions.opml").write_text(OPML, encoding="utf-8")
    metadata = {ZEIT: {"feedID": ZEIT, "name": "ZEIT ONLINE | Wissen", "editedName": "Meine Zeitung",
                       "homePageURL": "https://www.zeit.example/wissen/"},
                BLOG: {"feedID": BLOG, "name": "Example Engineering & Ops", "homePageURL": "https://blog.example.com/"}}
    (local / "FeedMetadata.plist").write_bytes(plistlib.dumps(metadata, fmt=plistlib.FMT_BINARY))
    (local / "Settings.plist").write_bytes(plistlib.dumps({"name": "On My Mac"}, fmt=plistlib.FMT_BINARY))
    write_db(feedbin / "DB.sqlite3", FEEDBIN_ARTICLES, wal=False, old=True)
    (feedbin / "Subscriptions.opml").write_text(FEEDBIN_OPML, encoding="utf-8")
    write_feed_settings(feedbin / "FeedSettings.db", {KOTTKE: (KOTTKE_ID, "https://kottke.example/")})
    write_db(icloud / "DB.sqlite3", ICLOUD_ARTICLES, wal=True)
    (icloud / "Subscriptions.opml").write_text(OPML, encoding="utf-8")
    write_db(root / ".Trash" / "DB.sqlite3", [ORPHAN], wal=False)
    return Accounts(root, local, feedbin, icloud)


def write_db(path: Path, articles: list[Art], *, wal: bool, old: bool = False, statuses_only=()) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    if wal:
        conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(OLD_SCHEMA if old else SCHEMA)
    conn.execute("BEGIN")
    add_articles(conn, articles, old=old)
    for article_id in statuses_only:  # a status row whose article is gone (cleaned up later by the app)
        conn.execute("INSERT INTO statuses (articleID, read, starred, dateArrived) VALUES (?, 1, 1, ?)",
                     (article_id, seconds("2025-12-01T00:00:00")))
    if old:
        conn.execute("INSERT INTO tags VALUES ('history', ?)", (PAPERCLIP.id,))
    conn.execute("COMMIT")
    conn.close()


def add_articles(conn: sqlite3.Connection, articles: list[Art], old: bool = False) -> None:
    for a in articles:
        row = {"articleID": a.id, "feedID": a.feed, "uniqueID": a.unique or a.id, "title": a.title,
               "contentHTML": a.html, "contentText": a.text, "url": a.url, "externalURL": a.external,
               "summary": a.summary, "datePublished": a.published, "dateModified": a.modified}
        if not old:
            search = conn.execute("INSERT INTO search (title, body) VALUES (?, ?)",
                                  (a.title or "", a.html or a.text or a.summary or "")).lastrowid
            row |= {"markdown": a.markdown, "searchRowID": search,
                    "authors": json.dumps(a.authors) if a.authors is not None else None}
        conn.execute(f"INSERT INTO articles ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})", list(row.values()))
        conn.execute("INSERT INTO statuses (articleID, read, starred, dateArrived) VALUES (?, ?, ?, ?)",
                     (a.id, a.read, a.starred, a.arrived))
        for person in a.legacy:
            conn.execute("INSERT OR IGNORE INTO authors (authorID, name, url, emailAddress) VALUES (?, ?, ?, ?)",
                         (person["authorID"], person.get("name"), person.get("url"), person.get("emailAddress")))
            conn.execute("INSERT INTO authorsLookup (authorID, articleID) VALUES (?, ?)", (person["authorID"], a.id))


def write_feed_settings(path: Path, feeds: dict[str, tuple[str, str]]) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(FEED_SETTINGS)
    for url, (feed_id, home) in feeds.items():
        conn.execute("INSERT INTO feedSettings (feedURL, feedID, homePageURL, lastCheckDate) VALUES (?, ?, ?, ?)",
                     (url, feed_id, home, 794_000_000.0))  # seconds since 2001-01-01
    conn.close()


def delete_article(db: Path, art: Art) -> None:
    """What the app's retention does: the row goes (its trigger removes the search row); the status stays."""
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("DELETE FROM articles WHERE articleID = ?", (art.id,))
    conn.close()


def update(db: Path, art: Art, **columns) -> None:
    conn = sqlite3.connect(db)
    with conn:
        for name, value in columns.items():
            table = "statuses" if name in ("read", "starred") else "articles"
            conn.execute(f"UPDATE {table} SET {name} = ? WHERE articleID = ?", (value, art.id))
    conn.close()


class AppWriter:
    """NetNewsWire running: a WAL writer with a row only in the -wal (no checkpoint), then an open write transaction."""

    def __init__(self, db: Path):
        self.conn = sqlite3.connect(db, isolation_level=None)
        self.conn.execute("PRAGMA wal_autocheckpoint=0")
        self.conn.execute("BEGIN")
        add_articles(self.conn, [LATE])
        self.conn.execute("COMMIT")  # committed, but only in DB.sqlite3-wal
        self.conn.execute("SELECT count(*) FROM articles").fetchall()
        self.conn.execute("BEGIN IMMEDIATE")
        add_articles(self.conn, [UNCOMMITTED])  # held open while we index

    def close(self) -> None:
        self.conn.execute("ROLLBACK")
        self.conn.close()


def hash_tree(root: Path) -> dict[str, str]:
    """sha256 of every file under root (databases and their -wal/-shm included)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}
