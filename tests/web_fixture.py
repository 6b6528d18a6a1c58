"""A local-rag home for the search page's tests, indexed by the real sources, parsers and chunkers (no Dagster):

    notes   an Obsidian vault: Garden.md (front matter, a tag, hostile HTML and links, a [[Compost]] link, a long
            last section holding the word "bramble" far down the page) and Compost.md
    gmail   the Takeout mbox export of mbox_fixture (recipients, folders) and REPLY, a reply in PLAN's thread
    slack   the Slack export of slack_fixture (chat windows of conversations)
    books   a project folder with an EPUB of three chapters; the word "lighthouse" only in chapter 2

Vectors come from the small hashing embedder (tests/fakes.py), so the tests are fast and deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import mbox_fixture
import slack_fixture
from document_builders import epub_file
from fakes import HashEmbedder

from rag_search.config import Paths
from rag_search.file_updates import private_folder
from rag_search.people import PeopleDirectory, Person
from rag_search.retrieval import SearchEngine
from rag_search.store import Store
from rag_search.web import Backend

FILLER = " ".join(f"Plain words about soil number {n} and patience." for n in range(60))
GARDEN = f"""---
tags: [garden]
aliases: [Allotment]
---
# Garden

Plans for the allotment. See [[Compost]] for the heap.

<script>alert('note script')</script> <img src=x onerror="alert('img')">
[click me](javascript:alert('link')) and a [normal link](https://example.org/page).

## Beds

{FILLER}

## Hedge

The bramble hedge along the north fence needs cutting back in March; keep the blackberries.
"""
COMPOST = """# Compost

Turn the heap monthly. Brown and green layers; the garden gets it in spring.
"""
CHAPTERS = [
    ("ch1.xhtml", "<h1>Departure</h1>" + "<p>The ship left the harbour at dawn with a cargo of tea.</p>" * 8),
    ("ch2.xhtml", "<h1>The Storm</h1>" + "<p>Waves broke over the bow all night long.</p>" * 8
     + "<p>At last the lighthouse beam showed the rocks ahead.</p>"),
    ("ch3.xhtml", "<h1>Arrival</h1>" + "<p>They reached the port on the third day, tired but whole.</p>" * 8),
]

REPLY = mbox_fixture._msg("reply", "<offsite-reply@example.org>", [
    "X-GM-THRID: 1771000000000000001",  # the thread of mbox_fixture.PLAN, to which it replies
    "From: Bob Stone <bob@example.org>",
    "To: Ann Example <ann@example.com>",
    "Subject: Re: Offsite in March: venue decision",
    "Date: Wed, 04 Mar 2026 10:00:00 +0000",
    "Message-ID: <offsite-reply@example.org>",
    "In-Reply-To: <offsite-plan@example.com>",
], "The lakeside lodge works for me; trains are booked.\n")


@dataclass
class WebHome:
    paths: Paths
    store: Store
    backend: Backend
    embedder: HashEmbedder


def build(tmp: Path, embedder=None, configured: bool = False) -> WebHome:
    """Write the sources under `tmp`, index them into `tmp/home/rag.db`, open the backend the page reads.

    embedder: the hashing one by default (the real model for a home `local-rag serve` opens); configured: declare
    the collections in config.yaml (0600, as local-rag writes it), so a server can index them again."""
    from rag_pipelines.config import validate_collection
    from rag_pipelines.indexing import items, scan

    paths = Paths.from_env({"LOCAL_RAG_HOME": str(tmp / "home")})
    private_folder(paths.home)  # as local-rag makes it: 0700
    store, embedder = Store.open(paths.db), embedder or HashEmbedder()
    declared = _collections(tmp)
    if configured:
        import yaml

        from rag_search.file_updates import write_atomic

        entries = {c["name"]: {k: v for k, v in c.items() if k != "name"} for c in declared}
        write_atomic(paths.config, yaml.safe_dump({"collections": entries}), mode=0o600)
    for cfg in map(validate_collection, declared):
        sources = scan.open_sources(cfg)
        items.index_keys(store, embedder, cfg, [k for s in sources for k in s.scan().items], sources=sources)
    people = PeopleDirectory([Person("Ann Example", ["ann@example.com", "slack:U024ANN"])])
    backend = Backend(paths, store, SearchEngine(store, embedder), people)
    return WebHome(paths, store, backend, embedder)


def _collections(tmp: Path) -> list[dict]:
    vault, books = tmp / "vault", tmp / "books"
    vault.mkdir()
    (vault / "Garden.md").write_text(GARDEN, encoding="utf-8")
    (vault / "Compost.md").write_text(COMPOST, encoding="utf-8")
    books.mkdir()
    toc = [("Departure", "ch1.xhtml"), ("The Storm", "ch2.xhtml"), ("Arrival", "ch3.xhtml")]
    (books / "voyage.epub").write_bytes(epub_file(CHAPTERS, toc, title="The Voyage"))
    export = mbox_fixture.build(tmp / "takeout", mbox_fixture.MESSAGES + (REPLY,))
    slack = slack_fixture.build_folder(tmp / "slack")
    return [
        {"name": "notes", "sources": [{"type": "obsidian", "paths": [str(vault)]}]},
        {"name": "books", "sources": [{"type": "project", "paths": [str(books)]}]},
        {"name": "gmail", "kind": "system", "sources": [{"type": "gmail", "path": str(export.mail)}]},
        {"name": "slack", "kind": "system", "sources": [{"type": "slack", "path": str(slack), "timezone": "UTC"}]},
    ]


def item_id(store: Store, collection: str, key_part: str) -> int:
    """The id of the one item of `collection` whose key contains `key_part`."""
    rows = store.conn.execute("SELECT i.id FROM items i JOIN collections c ON c.id = i.collection_id WHERE c.name = ? "
                              "AND i.key LIKE ? AND i.status = 'indexed'", (collection, f"%{key_part}%")).fetchall()
    assert len(rows) == 1, (collection, key_part, rows)
    return rows[0][0]
