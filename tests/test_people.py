"""People and time as filters: identifiers in one normal form, a people file (YAML or vCard) that maps several ids
to one person, `--with` across sources, relative dates, MCP `days`/`participants`, and per-source knowledge stats."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from click.testing import CliRunner
from conftest import add_doc

from rag_search.cli.main import cli
from rag_search.config import Settings
from rag_search.errors import ConfigError, QueryError
from rag_search.people import (PeopleDirectory, normalise_identifier, normalise_phone, participant, read_vcards,
                               resolve_filters, split_participant)
from rag_search.retrieval import Filters, SearchEngine, SearchRequest, parse_date
from rag_search.store import Store, reads

MARCH = int(datetime(2026, 3, 12, 9, 30, tzinfo=timezone.utc).timestamp())
APRIL = int(datetime(2026, 4, 2, 16, 0, tzinfo=timezone.utc).timestamp())

VCF = """BEGIN:VCARD\r
VERSION:3.0\r
N:Example;Ann;;;\r
FN:Ann Example\r
item1.EMAIL;TYPE=INTERNET:ann@example.com\r
TEL;TYPE=CELL:+49 171 555\r
 0100\r
IMPP:slack:U024ANN\r
END:VCARD\r
BEGIN:VCARD\r
VERSION:4.0\r
N:Baker;Bob;;;\r
EMAIL:bob@example.org\r
END:VCARD\r
BEGIN:VCARD\r
VERSION:3.0\r
FN:Nobody Without Ids\r
END:VCARD\r
"""


# -- normal forms ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw, region, expected", [
    ("+49 (171) 555-0100", None, "+491715550100"),
    ("0049 171 5550100", None, "+491715550100"),
    ("0171 5550100", "DE", "+491715550100"),
    ("(415) 555-0100", "US", "+14155550100"),
    ("tel:+1-415-555-0100", None, "+14155550100"),
    ("415 555 0100", None, "4155550100"),  # no country and no region: its digits, not a guess
])
def test_phone_numbers_become_e164(raw, region, expected):
    assert normalise_phone(raw, region) == expected


def test_identifiers_and_participants_have_one_form():
    assert normalise_identifier("mailto:Ann@Example.COM") == "ann@example.com"
    assert normalise_identifier("<Ann@Example.COM>") == "ann@example.com"
    assert normalise_identifier("Slack:U024ANN") == "slack:U024ANN"
    assert normalise_identifier("  Ann   Example ") == "Ann Example"
    assert participant('"Ann Example"', "ANN@example.com") == "Ann Example <ann@example.com>"
    assert participant("Ann", "+49 171 5550100") == "Ann <+491715550100>"
    assert participant("ann@example.com", "ann@example.com") == "ann@example.com"
    assert participant(None, None) == ""
    assert split_participant("Ann Example <ann@example.com>") == ("Ann Example", "ann@example.com")
    assert split_participant("+491715550100") == ("", "+491715550100")
    assert split_participant("Bob") == ("Bob", "")


# -- the people directory ------------------------------------------------------------------------------


def test_vcard_export_gives_each_person_their_ids():
    people = read_vcards(VCF)
    assert people == {"Ann Example": ["ann@example.com", "+49 171 5550100", "U024ANN"],
                      "Bob Baker": ["bob@example.org"]}  # N when FN is missing; cards without ids left out


def test_directory_from_a_yaml_file_and_inline_config(tmp_path):
    f = tmp_path / "people.yaml"
    f.write_text("Ann Example: [ann@example.com, '0171 5550100', 'slack:U024ANN']\nCarl: carl@example.net\n")
    settings = Settings(people={"file": str(f), "known": {"Ann Example": ["ann.e@work.example"]},
                                "phone_region": "DE"})
    d = PeopleDirectory.from_settings(settings)
    assert [p.name for p in d.matching("ann")] == ["Ann Example"]
    assert [p.name for p in d.matching("an ex")] == ["Ann Example"]  # every word a name's word prefix
    assert [p.name for p in d.matching("+49 171 555-0100")] == ["Ann Example"]  # by an id in another format
    assert d.matching("nn") == []  # inside a word is not a name match
    assert d.alternatives("ann") == ("ann", "Ann Example", "ann@example.com", "+491715550100", "slack:U024ANN",
                                     "ann.e@work.example")
    assert d.alternatives("dora") == ("dora",)  # unknown people are a plain substring


def test_bad_people_files_say_what_to_write(tmp_path):
    missing = Settings(people={"file": str(tmp_path / "nope.yaml")})
    with pytest.raises(ConfigError, match="people.file"):
        PeopleDirectory.from_settings(missing)
    (tmp_path / "list.yaml").write_text("- ann@example.com\n")
    with pytest.raises(ConfigError, match="map each person"):
        PeopleDirectory.from_settings(Settings(people={"file": str(tmp_path / "list.yaml")}))


# -- --with across sources -------------------------------------------------------------------------------


@pytest.fixture
def crowd(tmp_path, fake_embedder):
    """Ann under a different id in each source, plus items that are not hers."""
    store = Store.open(tmp_path / "rag.db")
    add = lambda *a, **kw: add_doc(store, fake_embedder, *a, **kw)  # noqa: E731
    add("email", "m1", "offsite planning budget", source_type="email", author="Ann Example <ann@example.com>",
        participants=("Ann Example <ann@example.com>", "Me <me@example.com>"), ts=MARCH)
    add("imessage", "c1", "offsite: shall we book the lake hotel?", source_type="chat",
        participants=("+491715550100", "Me <me@example.com>"), ts=MARCH + 3600)
    add("slack", "s1", "offsite agenda draft", source_type="chat",
        participants=("Ann E. <slack:U024ANN>", "Bob <slack:U099BOB>"), ts=APRIL)
    add("calendar", "e1", "Offsite kickoff meeting", source_type="event",
        participants=("Ann Example <ann.e@work.example>", "Bob Baker <bob@example.org>"), ts=APRIL + 86400)
    add("email", "m2", "offsite catering from Joanna", source_type="email", author="Joanna <jo@example.com>",
        participants=("Joanna <jo@example.com>",), ts=MARCH)
    add("slack", "s2", "offsite parking", source_type="chat", participants=("Bob <slack:U099BOB>",), ts=APRIL)
    store.close()
    people = tmp_path / "people.vcf"
    people.write_text(VCF.replace("END:VCARD\r\nBEGIN:VCARD\r\nVERSION:4.0",
                                  "EMAIL:ann.e@work.example\r\nEND:VCARD\r\nBEGIN:VCARD\r\nVERSION:4.0", 1))
    (tmp_path / "config.yaml").write_text(f"people:\n  file: {json.dumps(str(people))}\n  phone_region: DE\n")
    return tmp_path


def cli_keys(home, *args) -> list[str]:
    result = CliRunner().invoke(cli, ["search", "offsite", "--json", "--top", "20", "--mode", "keyword", *args],
                                env={"LOCAL_RAG_HOME": str(home)}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return sorted(h["key"] for h in json.loads(result.output)["hits"])


def test_with_finds_one_person_under_every_id_in_every_source(crowd):
    assert cli_keys(crowd, "--with", "ann") == ["c1", "e1", "m1", "s1"]  # not Joanna's ("ann" inside a word)
    assert cli_keys(crowd, "--with", "Ann Example") == ["c1", "e1", "m1", "s1"]
    assert cli_keys(crowd, "--with", "0171 555 0100") == ["c1", "e1", "m1", "s1"]  # her phone, written locally
    assert cli_keys(crowd, "--with", "ann", "--with", "bob") == ["e1", "s1"]  # both take part
    assert cli_keys(crowd, "--with", "joanna") == ["m2"]  # not in the people file: a plain substring


def test_without_a_people_file_ids_still_match_in_their_normal_form(crowd):
    (crowd / "config.yaml").unlink()
    assert cli_keys(crowd, "--with", "+49 171 5550100") == ["c1"]
    assert cli_keys(crowd, "--with", "ANN@example.com") == ["m1"]


def test_dates_select_by_the_items_own_time(crowd):
    assert cli_keys(crowd, "--with", "ann", "--after", "2026-04", "--before", "2026-04-30") == ["e1", "s1"]
    assert cli_keys(crowd, "--since", "2026-03-12T10:00:00Z", "--until", "2026-03-31") == ["c1"]
    # relative forms against today: nothing here is from the last week
    assert cli_keys(crowd, "--days", "7", "--no-undated") == []
    result = CliRunner().invoke(cli, ["search", "x", "--days", "7", "--after", "2024"],
                                env={"LOCAL_RAG_HOME": str(crowd)})
    assert result.exit_code != 0 and "--days or --after" in result.output


def test_engine_filters_resolved_once_match_author_or_participant(crowd, fake_embedder):
    store = Store.open(crowd / "rag.db")
    d = PeopleDirectory.from_settings(Settings(people={"known": {"Joanna": ["jo@example.com"]}}))
    f = resolve_filters(Filters(participants=("joanna",)), d)
    assert f.people == (("joanna", "Joanna", "jo@example.com"),)
    hits = SearchEngine(store, fake_embedder).search(SearchRequest("offsite", top_k=20, filters=f)).hits
    assert {h.key for h in hits} == {"m2"}
    store.close()


# -- relative dates --------------------------------------------------------------------------------------


def test_relative_and_named_dates():
    now = datetime(2026, 11, 23, 12, 0, tzinfo=timezone.utc)  # a Monday
    day = 86400
    assert parse_date("7d", now=now) == parse_date("7 days ago", now=now) == int(now.timestamp()) - 7 * day
    assert parse_date("12h", now=now) == int(now.timestamp()) - day // 2
    assert parse_date("2 weeks", now=now) == int(now.timestamp()) - 14 * day
    start, end = parse_date("last week", now=now), parse_date("last week", end=True, now=now)
    assert end - start == 7 * day - 1
    assert datetime.fromtimestamp(start).astimezone().weekday() == 0  # weeks start on Monday (local time)
    assert parse_date("since last week", now=now) == start
    assert parse_date("yesterday", end=True, now=now) + 1 == parse_date("today", now=now)
    assert parse_date("last month", end=True, now=now) + 1 == parse_date("this month", now=now)
    assert parse_date("last year", end=True, now=now) + 1 == parse_date("this year", now=now)
    with pytest.raises(QueryError, match="last month"):
        parse_date("the other tuesday")


# -- knowledge stats -----------------------------------------------------------------------------------


def test_knowledge_stats_per_source(crowd):
    store = Store.open(crowd / "rag.db")
    stats = {r["collection"]: r for r in reads.knowledge_stats(store)}
    store.close()
    assert set(stats) == {"calendar", "email", "imessage", "slack"}
    assert stats["email"]["items"] == 2 and stats["email"]["chunks"] == 2 and stats["email"]["failed"] == 0
    assert stats["email"]["from"] == "2026-03-12T09:30:00Z" and stats["email"]["to"] == "2026-03-12T09:30:00Z"
    assert stats["calendar"]["from"] == "2026-04-03T16:00:00Z"
    assert stats["slack"]["last_indexed"]
