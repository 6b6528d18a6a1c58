"""NetNewsWire as a Source: one item per article of an account's DB.sqlite3 (or of every account in Accounts/).

Read-only through appdb (`mode=ro`, lock retries, a private copy of a WAL file nobody has open), base tables
only: articles, statuses, authors, authorsLookup (never the FTS4 `search` table), and feedSettings of
FeedSettings.db. Reference: ../shared/reference/sources.md §3.

Keys: `<account folder>/<articleID>` (OnMyMac/3f2a…, 17_<id>/123456): the articleID as is when it is printable
ASCII without '%' or '...' and at most 200 characters, else `~` and its sha1. The same articleID in several
accounts (one feed in On My Mac and iCloud) is one item, under the first account (OnMyMac, then by name).
Stamps hash the row's small columns, the lengths of its bodies, its starred flag, its legacy authors and its
feed's name and folder: an edit, a star or a feed rename changes them; reading an article does not (`read` is
not indexed). Dates: FMDB binds NSDate as seconds since 1970 (REAL), so stored values are unix seconds.
Feed names come from Subscriptions.opml (its titles are the names the user sees), matched on the feed URL,
which is the feedID of local accounts; sync accounts' feedIDs map to URLs through FeedSettings.db (2026
builds) or FeedMetadata.plist (older ones).
"""

from __future__ import annotations

import hashlib
import html
import json
import math
import re
import sqlite3
from collections import namedtuple
from pathlib import Path
from typing import Iterator, Literal, Mapping, Sequence
from urllib.parse import quote, urljoin, urlsplit

from pydantic import Field, field_validator
from rag_search.records import Document, Section

from rag_pipelines.parsers.errors import ParseError
from rag_pipelines.parsers.limits import MB, Limits
from rag_pipelines.parsers.mail import format_address
from rag_pipelines.parsers.webpage import html_sections
from rag_pipelines.sources import appdb
from rag_pipelines.sources.base import BaseSource, Loaded, ScanResult, SourceUnavailable, Stamp
from rag_pipelines.sources.options import SourceOptions

APP, BATCH = "NetNewsWire", 500
VERSION = "netnewswire-1"  # part of every content hash: bump when the Document built from the same rows changes
KEY_SAFE = re.compile(r"[\x21-\x24\x26-\x7e]{1,200}")  # printable ASCII without space or '%'
TAG = re.compile(r"<[^<>]{0,500}>")
SMALL = ("feedID", "title", "url", "externalURL", "datePublished", "dateModified", "authors")
BODIES = ("contentHTML", "contentText", "markdown", "summary")  # in order of preference
LEGACY = ("(SELECT json_group_array(json_array(au.name, au.emailAddress, au.url)) FROM authorsLookup l "
          "JOIN authors au ON au.authorID = l.authorID WHERE l.articleID = a.articleID)")


class NetNewsWireOptions(SourceOptions):
    type: Literal["rss"] = Field(description="rss: NetNewsWire's articles.")
    path: Path = Field(description="A NetNewsWire account folder (…/NetNewsWire/Accounts/OnMyMac), its DB.sqlite3, "
                       "or the Accounts folder (every account in it).")

    @field_validator("path")
    @classmethod
    def _expand(cls, v: Path) -> Path:
        return Path(v).expanduser().resolve()


Account = namedtuple("Account", "name folder db")  # name: the folder's (OnMyMac, 2_iCloud, 17_<id>)
Feed = namedtuple("Feed", "name url home folder")
# one articles row as _read selects it (bodies as lengths in a scan, as text in a load); legacy: JSON
# [[name, email, url], …] of the authors/authorsLookup tables
Row = namedtuple("Row", "article_id feed_id title url external_url published modified authors html text markdown "
                 "summary starred arrived legacy")
_Item = namedtuple("_Item", "account article_id accounts feed stamp uri")  # account: index into the scan's accounts
# what an article's Document is made from (its JSON is the content hash); bodies: (column, text) of the
# non-empty ones in order of preference; dates: published, modified, arrived as stored; extra: static metadata
Article = namedtuple("Article", "article_id accounts feed title bodies url external_url dates authors starred extra")


class NetNewsWireSource(BaseSource):
    """The articles of one NetNewsWire account, or of every account under an Accounts folder."""

    type = "rss"

    def __init__(self, options: NetNewsWireOptions, label: str | None = None, limits: Limits | None = None):
        super().__init__(label)
        self.options, self.limits = options, limits or Limits()
        self._accounts: list[Account] = []
        self._items: dict[str, _Item] | None = None

    def scan(self) -> ScanResult:
        accounts = find_accounts(self.options.path)
        groups: dict[str, list[tuple[int, Row, Feed]]] = {}
        for ai, account in enumerate(accounts):
            feeds = read_feeds(account)
            for row in _read(account, "length({})"):
                feed = feeds.get(row.feed_id) or feeds.setdefault(row.feed_id, _unknown_feed(row.feed_id))
                groups.setdefault(row.article_id, []).append((ai, row, feed))
        items = {}
        for aid, rows in groups.items():
            (ai, row, feed), names = rows[0], tuple(accounts[a].name for a, _, _ in rows)
            stamp = hashlib.sha1(repr([(accounts[a].name, r[1:], f) for a, r, f in rows]).encode()).hexdigest()[:20]
            uri = _absolute(row.url, feed) or _absolute(row.external_url, feed) or \
                f"netnewswire://{quote(names[0])}/{quote(aid, safe='')}"
            items[self.key(f"{_safe(names[0])}/{_safe(aid)}")] = _Item(ai, aid, names, feed, stamp, uri)
        self._accounts, self._items = accounts, items
        return ScanResult({key: Stamp(item.stamp, item.uri) for key, item in items.items()})

    def watch_paths(self) -> list:
        try:
            return [a.folder for a in (self._accounts or find_accounts(self.options.path))]
        except SourceUnavailable:
            return []

    def load(self, keys: Sequence[str], known_uris: Mapping[str, str] | None = None) -> Iterator[Loaded]:
        keys, known = list(dict.fromkeys(keys)), known_uris or {}
        if self._items is None or any(k not in self._items for k in keys):
            try:
                self.scan()  # a fresh process, or keys new since the last scan
            except SourceUnavailable as exc:
                yield from (_unavailable(k, known.get(k, k), str(exc)) for k in keys)
                return
        items, by_account = self._items or {}, {}
        for key in keys:
            if key in items:
                by_account.setdefault(items[key].account, []).append(key)
            else:
                yield Loaded(key, known.get(key, key), "article", gone=True)
        for ai, account_keys in by_account.items():
            for start in range(0, len(account_keys), BATCH):
                yield from self._load_batch(self._accounts[ai], account_keys[start : start + BATCH])

    def _load_batch(self, account: Account, keys: list[str]) -> Iterator[Loaded]:
        items = self._items or {}
        ids = [items[k].article_id for k in keys]
        try:  # one short read per batch: a long-lived reader would stop the app's WAL checkpoints
            where = f"WHERE a.articleID IN ({','.join('?' * len(ids))})"
            rows = {r.article_id: r for r in _read(account, "{}", where, ids)}
        except SourceUnavailable as exc:
            yield from (_unavailable(k, items[k].uri, str(exc)) for k in keys)
            return
        for key in keys:
            row = rows.get(items[key].article_id)
            yield self._loaded(key, items[key], row) if row else Loaded(key, items[key].uri, "article", gone=True)

    def _loaded(self, key: str, item: _Item, row: Row) -> Loaded:
        limit, extra, bodies = int(self.limits.max_text_mb * MB), dict(self.options.metadata), []
        for column, value in zip(BODIES, (row.html, row.text, row.markdown, row.summary)):
            text = _s(value)
            if len(text) > limit:
                text = text[:limit]
                extra["parse_warning"] = f"{column} cut to limits.max_text_mb ({self.limits.max_text_mb} MB)"
            if text.strip():
                bodies.append((column, text))
        url = _absolute(row.url, item.feed)
        article = Article(item.article_id, item.accounts, item.feed, _s(row.title), tuple(bodies), url,
                          _absolute(row.external_url, item.feed), (row.published, row.modified, row.arrived),
                          authors(row.authors, row.legacy), bool(row.starred), tuple(sorted(extra.items())))
        payload = json.dumps([VERSION, article], ensure_ascii=False, default=str)
        return Loaded(key, item.uri, "article", stamp=item.stamp, parse=lambda: article_document(article),
                      content_hash=hashlib.sha256(payload.encode()).hexdigest())


def find_accounts(path: Path) -> list[Account]:
    """The accounts under path: a DB.sqlite3, an account folder, or an Accounts folder (OnMyMac first)."""
    try:
        if path.is_file():
            return [Account(path.parent.name, path.parent, path)]
        if (path / "DB.sqlite3").is_file():
            return [Account(path.name, path, path / "DB.sqlite3")]
        if path.is_dir():
            found = [Account(d.name, d, d / "DB.sqlite3") for d in path.iterdir()
                     if not d.name.startswith(".") and (d / "DB.sqlite3").is_file()]
            if found:
                return sorted(found, key=lambda a: (a.name != "OnMyMac", a.name))
            raise SourceUnavailable(f"{path} holds no NetNewsWire account (no DB.sqlite3 in it or its folders); point "
                                    "`path` at …/NetNewsWire/Accounts/OnMyMac. Nothing indexed from it was removed.")
    except OSError as exc:
        raise SourceUnavailable(f"{path} cannot be read ({exc.strerror or exc}); check its permissions (macOS: give "
                                "the terminal Full Disk Access). Nothing indexed from it was removed.") from exc
    raise SourceUnavailable(f"{path} does not exist; check the path in the config (is NetNewsWire installed and has "
                            "it run once?). Nothing indexed from it was removed.")


def _read(account: Account, body: str, where: str = "", params: Sequence = ()) -> list[Row]:
    """Rows of `articles` with their statuses and legacy authors; bodies selected through `body` ("length({})")."""
    with appdb.open_ro(account.db, APP, ("articles",)) as conn:
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            cols = appdb.columns(conn, "articles")
            small = ", ".join(f'a."{c}"' if c in cols else "NULL" for c in SMALL)
            bodies = ", ".join(body.format(f'a."{c}"') if c in cols else "NULL" for c in BODIES)
            status, join = ("s.starred, s.dateArrived", "LEFT JOIN statuses s ON s.articleID = a.articleID") \
                if "statuses" in tables else ("NULL, NULL", "")
            legacy = LEGACY if {"authors", "authorsLookup"} <= tables else "NULL"
            sql = f"SELECT a.articleID, {small}, {bodies}, {status}, {legacy} FROM articles a {join} {where}"
            return [Row(_s(r[0]), _s(r[1]), *r[2:]) for r in appdb.query(conn, sql, params)]
        except sqlite3.DatabaseError as exc:
            raise SourceUnavailable(f"{account.db} could not be read ({exc}); it is tried again on the next run. "
                                    "Nothing indexed from it was removed.") from exc


def read_feeds(account: Account) -> dict[str, Feed]:
    """feedID → Feed from Subscriptions.opml; the feed settings map sync services' feedIDs and edited names."""
    ids, edited = _feed_settings(account.folder)
    out: dict[str, Feed] = {}
    for url, title, home, folder in opml_feeds(account.folder / "Subscriptions.opml"):
        out.setdefault(ids.get(url) or url, Feed(edited.get(url) or title or _host(url), url, home, folder))
    return out


def opml_feeds(path: Path) -> list[tuple[str, str, str, str]]:
    """(xmlUrl, title, htmlUrl, folder path) of each feed outline; [] when the file is missing or broken."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return []
    out, stack = [], [(root.find("body") if root.find("body") is not None else root, "")]
    while stack:
        node, folder = stack.pop()
        for outline in node.findall("outline"):
            title = " ".join((outline.get("title") or outline.get("text") or "").split())
            if outline.get("xmlUrl"):
                out.append((outline.get("xmlUrl", "").strip(), title, (outline.get("htmlUrl") or "").strip(), folder))
            else:
                stack.append((outline, f"{folder}/{title}" if folder and title else folder or title))
    return out


def _feed_settings(folder: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(feed URL → feedID, feed URL → edited name) from FeedSettings.db, else FeedMetadata.plist (both optional)."""
    rows: list = []
    if (folder / "FeedSettings.db").is_file():
        try:
            with appdb.open_ro(folder / "FeedSettings.db", APP, ("feedSettings",)) as conn:
                cols = appdb.columns(conn, "feedSettings")
                wanted = appdb.pick(cols, "feedURL", "feedID", "editedName")
                rows = appdb.query(conn, f"SELECT {wanted} FROM feedSettings")
        except (SourceUnavailable, sqlite3.DatabaseError):
            rows = []  # names fall back to the OPML's, feedIDs to the URL
    if not rows and (folder / "FeedMetadata.plist").is_file():
        import plistlib

        try:
            data = plistlib.loads((folder / "FeedMetadata.plist").read_bytes())
        except Exception:  # noqa: BLE001 - an optional side file: any damage only loses the mapping
            data = {}
        data = data if isinstance(data, dict) else {}
        rows = [(url, m.get("feedID"), m.get("editedName")) for url, m in data.items() if isinstance(m, dict)]
    ids = {_s(url): _s(fid) for url, fid, _ in rows if url and fid}
    return ids, {_s(url): " ".join(_s(name).split()) for url, _, name in rows if url and _s(name).strip()}


def authors(raw: object, legacy: object = None) -> tuple[str, ...]:
    """'Name <email>' (else the name, email or URL) of each author: the JSON column, else the legacy tables."""
    for value in (raw, legacy):
        try:
            data = json.loads(_s(value)) if value else []
        except ValueError:
            data = []
        entries = [d for d in (data if isinstance(data, list) else []) if isinstance(d, (dict, list))]
        people = [(d.get("name"), d.get("emailAddress"), d.get("url")) if isinstance(d, dict) else
                  (list(d) + [None] * 3)[:3] for d in entries]
        out = {format_address(_s(n), _s(e)) or _s(u).strip() for n, e, u in people} - {""}
        if out:
            return tuple(sorted(out))  # the app stores a Set: its JSON order is arbitrary
    return ()


def article_document(a: Article) -> Document:
    """Title, text (HTML content, else plain text, Markdown or the summary), date, authors, feed and URL."""
    sections, body = [], "none"
    for column, text in a.bodies:
        found = html_sections(text)[1] if column in ("contentHTML", "summary") else [Section(text.strip())]
        if found:
            sections, body = found, column
            break
    title = " ".join(html.unescape(TAG.sub("", a.title)).split()) or \
        (" ".join(sections[0].text.split())[:80] if sections else "")
    if not title:
        raise ParseError("no_text", "the article has neither text nor a title")
    meta = {"feed": a.feed.name, "feed_url": a.feed.url, "feed_folder": a.feed.folder, "url": a.url,
            "external_url": a.external_url if a.external_url != a.url else "", "account": a.accounts[0],
            "accounts": list(a.accounts) if len(a.accounts) > 1 else [], "article_id": a.article_id,
            "starred": a.starred, "body": body, **dict(a.extra)}
    return Document(title=title, sections=tuple(sections) or (Section(title),),
                    ts=next((t for t in map(unix_seconds, a.dates) if t is not None), None),
                    author=", ".join(a.authors) or None, participants=a.authors, tags=("starred",) if a.starred else (),
                    metadata={k: v for k, v in meta.items() if v not in ("", [], None)})


def unix_seconds(value: object) -> int | None:
    """A stored date → unix seconds: FMDB binds NSDate as REAL seconds since 1970; NULL and 0 (no date) → None."""
    try:
        seconds = float(_s(value)) if isinstance(value, (str, bytes)) else value
    except ValueError:
        return None
    return int(seconds) if isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0 else None


def _absolute(link: str | None, feed: Feed) -> str:
    """The link, resolved against the feed's home page (or feed URL) when relative; '' when it cannot be."""
    link = _s(link).strip()
    if not link or link.startswith(("https://", "http://")) or urlsplit(link).scheme:
        return link
    base = next((b for b in (feed.home, feed.url) if urlsplit(b).scheme in ("http", "https")), "")
    return urljoin(base, link) if base else ""


def _unknown_feed(feed_id: str) -> Feed:
    """A feed the OPML does not list (unsubscribed, its articles not cleaned up yet): named by its host or ID."""
    url = feed_id if urlsplit(feed_id).scheme in ("http", "https") else ""
    return Feed(_host(url) or feed_id, url, "", "")


def _host(url: str) -> str:
    return urlsplit(url).hostname or url


def _safe(ident: str) -> str:
    """An ID as a key part: itself when short printable ASCII, else `~` + its sha1."""
    if KEY_SAFE.fullmatch(ident) and "..." not in ident:
        return ident
    return "~" + hashlib.sha1(ident.encode("utf-8", "surrogatepass")).hexdigest()


def _s(value: object) -> str:
    return "" if value is None else value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _unavailable(key: str, uri: str, why: str) -> Loaded:
    # a stamp no scan gives: the next sync sees a change and retries; the previous chunks stay searchable
    return Loaded(key, uri, "article", stamp="unavailable", error=("unavailable", why))


def _cli_params() -> tuple:
    import click

    return (click.Option(["--path"], type=click.Path(exists=True, path_type=Path),
                         help="NetNewsWire's Accounts folder, one account folder (…/Accounts/OnMyMac) or its "
                              "DB.sqlite3 (registers the collection); without it the configured rss sources are "
                              "indexed."),)


def _cli_source(path: Path | None = None, **_) -> dict | None:
    return None if path is None else {"path": str(path)}


def _source_type():
    from rag_pipelines.sources.registry import SourceType

    return SourceType(type="rss", options=NetNewsWireOptions, build=NetNewsWireSource, collection="rss", kind="system",
                      summary="NetNewsWire: every article of its accounts (feed, title, authors, date, URL, text).",
                      cli_params=_cli_params(), cli_source=_cli_source, seed_keys={"netnewswire_db_path": "path"})


SOURCE = _source_type()
