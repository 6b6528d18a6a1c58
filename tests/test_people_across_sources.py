"""One person under a different id in mail (eM Client), chat (iMessage, Slack) and a calendar is found by one
`--with` filter through real sources, real Dagster materialisations and the CLI; dates are the items' own."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

import emclient_fixture
import imessage_fixture
import slack_fixture
from pipeline_env import make_home
from rag_pipelines.indexing import runs
from rag_pipelines.wiring import resources
from rag_search.cli.main import cli
from rag_search.store import Store, reads

ICS = """BEGIN:VCALENDAR\r
VERSION:2.0\r
PRODID:-//test//people//EN\r
BEGIN:VEVENT\r
UID:offsite-review@test\r
DTSTAMP:20260301T000000Z\r
DTSTART:20260304T140000Z\r
DTEND:20260304T150000Z\r
SUMMARY:Offsite and cluster upgrade review\r
ORGANIZER;CN=Me:mailto:me@example.com\r
ATTENDEE;CN=Ann Lee;PARTSTAT=ACCEPTED:mailto:Ann.Lee@Work.Example\r
END:VEVENT\r
BEGIN:VEVENT\r
UID:dentist@test\r
DTSTAMP:20260301T000000Z\r
DTSTART:20260305T090000Z\r
DTEND:20260305T100000Z\r
SUMMARY:Dentist\r
ORGANIZER;CN=Me:mailto:me@example.com\r
END:VEVENT\r
END:VCALENDAR\r
"""
PEOPLE = {"Ann Lee": ["ann.lee@example.com", "+1 (555) 555-0142", "slack:U024ANN", "ann.lee@work.example"]}


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp("people")
    mail = emclient_fixture.build(tmp / "eM Client").root
    chat = imessage_fixture.build(tmp / "Messages" / "chat.db")
    slack = slack_fixture.build_folder(tmp / "slack")
    ics = tmp / "work.ics"
    ics.write_bytes(ICS.encode())
    paths, _ = make_home(tmp, mp, extra_collections={
        "email": {"sources": [{"type": "email", "path": str(mail)}]},
        "imessage": {"sources": [{"type": "imessage", "path": str(chat)}]},
        "slack": {"sources": [{"type": "slack", "path": str(slack)}]},
        "calendar": {"sources": [{"type": "calendar", "paths": [str(ics)]}]},
    })
    config = yaml.safe_load(paths.config.read_text())
    paths.config.write_text(yaml.safe_dump({**config, "people": {"known": PEOPLE}}))
    summaries = runs.index_collections(paths, ["email", "imessage", "slack", "calendar"])
    assert all(not s.unavailable for s in summaries), [s.unavailable for s in summaries]
    stats = {r["collection"]: r for r in reads.knowledge_stats(resources.RagResource().store())}
    resources.close_all()
    mp.undo()
    yield paths.home, stats


def search(home, *args) -> list[dict]:
    result = CliRunner().invoke(cli, ["search", *args, "--json", "--top", "50"],
                                env={"LOCAL_RAG_HOME": str(home)}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["hits"]


def people_of(home, hit: dict) -> str:
    """Author and participants of the hit's item, as stored."""
    store = Store.open(home / "rag.db")
    rows = store.conn.execute(
        "SELECT c.author, c.participants FROM chunks c JOIN items i ON i.id = c.item_id "
        "JOIN collections co ON co.id = i.collection_id WHERE co.name = ? AND i.key = ?",
        (hit["collection"], hit["key"])).fetchall()
    store.close()
    return " ".join(f"{a or ''} {' '.join(json.loads(p or '[]'))}" for a, p in rows).lower()


def test_one_with_filter_finds_her_in_every_source(home):
    home, _ = home
    hits = search(home, "cluster upgrade offsite plans", "--with", "ann lee")
    assert {h["collection"] for h in hits} == {"email", "imessage", "slack", "calendar"}
    ids = ("ann.lee@example.com", "+15555550142", "slack:u024ann", "ann.lee@work.example")
    assert all(any(i in people_of(home, h) for i in ids) for h in hits), [people_of(home, h) for h in hits]
    # the same person by one of her ids, in another spelling
    by_phone = search(home, "cluster upgrade offsite plans", "--with", "555 555 0142")
    assert {h["collection"] for h in by_phone} == {"email", "imessage", "slack", "calendar"}
    # not hers: the dentist appointment and Bob-only Slack talk are left out
    assert "Dentist" not in {h["title"] for h in hits}
    everything = search(home, "cluster upgrade offsite plans dentist")
    assert len(everything) > len(hits)


def test_dates_are_the_items_own(home):
    home, stats = home
    march_4 = search(home, "offsite review", "--with", "ann lee", "--after", "2026-03-04", "--before", "2026-03-04",
                     "--no-undated")
    assert march_4 and all(h["timestamp"].startswith("2026-03-04") for h in march_4)
    assert "calendar" in {h["collection"] for h in march_4}
    assert stats["calendar"]["from"] == "2026-03-04T14:00:00Z" and stats["calendar"]["to"] == "2026-03-05T09:00:00Z"
    assert stats["imessage"]["from"] < stats["imessage"]["to"] and stats["email"]["items"] > 0


def authors_of(home, hit: dict) -> str:
    """Author and chat authors of the hit's item, as stored."""
    store = Store.open(home / "rag.db")
    rows = store.conn.execute(
        "SELECT c.author, json_extract(c.metadata, '$.authors') FROM chunks c JOIN items i ON i.id = c.item_id "
        "JOIN collections co ON co.id = i.collection_id WHERE co.name = ? AND i.key = ?",
        (hit["collection"], hit["key"])).fetchall()
    store.close()
    return " ".join(f"{a or ''} {' '.join(json.loads(w or '[]'))}" for a, w in rows).lower()


def test_from_finds_what_she_wrote_in_every_source_and_with_where_she_was(home):
    """`--from` on a chat matches the windows she wrote in (their authors: her number in iMessage, her Slack id),
    through the people directory as `--with` does; `--with` also finds those she was only present in."""
    home, _ = home
    query = "cluster upgrade offsite plans lunch ramen budget"
    wrote = search(home, query, "--from", "ann lee")
    assert {h["collection"] for h in wrote} == {"email", "imessage", "slack"}  # she organised no meeting
    ids = ("ann.lee@example.com", "+15555550142", "slack:u024ann", "ann.lee@work.example", "ann lee")
    assert all(any(i in authors_of(home, h) for i in ids) for h in wrote), [authors_of(home, h) for h in wrote]
    present = search(home, query, "--with", "ann lee")
    only_present = {(h["collection"], h["key"]) for h in present} - {(h["collection"], h["key"]) for h in wrote}
    assert {c for c, _ in only_present} >= {"slack", "calendar"}  # the group DM Sam wrote in; the meeting
    assert all(not any(i in authors_of(home, h) for i in ids) for h in present if (h["collection"], h["key"])
               in only_present)
    by_number = search(home, query, "--from", "+1 555 555 0142", "--collection", "imessage")
    assert by_number and {h["key"] for h in by_number} <= {h["key"] for h in wrote if h["collection"] == "imessage"}
