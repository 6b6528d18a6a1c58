"""Slack export: mrkdwn, users and conversations, threads across day files, windows, faults, and end to end
through a Dagster materialisation (with the fake embedder)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import slack_fixture as fx
from fakes import HashEmbedder
from pipeline_env import make_home
from rag_pipelines.indexing import runs
from rag_pipelines.indexing import scan as scan_module
from rag_pipelines.parsers.mrkdwn import blocks_text, to_text
from rag_pipelines.sources.base import SourceUnavailable
from rag_pipelines.sources import slack as slack_module
from rag_pipelines.sources.slack import SlackOptions, SlackSource
from rag_pipelines.wiring import resources
from rag_search.cli.main import cli
from rag_search.config import load_settings
from rag_search.people import PeopleDirectory, resolve_filters
from rag_search.retrieval import Filters, SearchEngine, SearchRequest
from rag_search.store import reads

GENERAL_1 = fx.key("channel", fx.GENERAL, fx.KICKOFF)
THREAD = fx.key("channel", fx.GENERAL, fx.THREAD_ROOT, fx.ROOT)
DM = fx.key("dm", fx.DM, fx.DAYS[fx.DM]["2026-03-02"][0])


@pytest.fixture
def export(tmp_path):
    return fx.build_zip(tmp_path / "in" / "Acme Slack export Mar 1 2026 - Mar 7 2026.zip", prefix="Acme export/")


def source(path, **options) -> SlackSource:
    return SlackSource(SlackOptions(type="slack", path=path, **{"timezone": "UTC", **options}))


def documents(src: SlackSource, keys=None) -> dict:
    out = {}
    for loaded in src.load(sorted(keys or fx.EXPECTED)):
        assert loaded.error is None and not loaded.gone, (loaded.key, loaded.error)
        out[loaded.key] = (loaded, loaded.parse())
    return out


def test_mrkdwn_to_text():
    users = {"U1": "Ann Example"}
    assert to_text("hi <@U1> and <@U9>, see <#C1|general> <!here> <!subteam^S1|@design>", users) == \
        "hi @Ann Example and @U9, see #general @here @design"
    assert to_text("<https://x.example/a?b=1&amp;c=2|the docs> <https://y.example> <mailto:a@b.example|a@b.example>",
                   users) == "the docs (https://x.example/a?b=1&c=2) https://y.example a@b.example"
    assert to_text("2 &lt; 3 &amp;&amp; 5 &gt; 4", users) == "2 < 3 && 5 > 4"
    assert to_text("plain text, no markup", users) == "plain text, no markup"
    blocks = [{"type": "rich_text", "elements": [{"type": "rich_text_section", "elements": [
        {"type": "text", "text": "ping "}, {"type": "user", "user_id": "U1"}, {"type": "link", "url": "https://z"}]}]}]
    assert blocks_text(blocks, users) == "ping @Ann Examplehttps://z"


def test_scan_lists_one_item_per_window_from_a_zip_under_a_top_folder(export):
    before = sorted(p.name for p in export.parent.iterdir())
    result = source(export).scan()
    assert set(result.items) == set(fx.EXPECTED) and not result.problems
    assert result.items[GENERAL_1].uri == f"slack://channel?team={fx.TEAM}&id={fx.GENERAL}"
    assert result.items[THREAD].uri.endswith(f"&message={fx.ROOT}")
    assert sorted(p.name for p in export.parent.iterdir()) == before  # read in place, nothing extracted


def test_a_folder_export_gives_the_same_items(tmp_path, export):
    folder = fx.build_folder(tmp_path / "unpacked")
    assert source(folder).scan().items.keys() == source(export).scan().items.keys()


def test_documents(export):
    docs = documents(source(export))
    for key, msgs in fx.EXPECTED.items():
        assert docs[key][1].metadata["messages"] == len(msgs), key
    general = docs[GENERAL_1][1]
    text = general.sections[0].text
    assert general.title == "#general · 2026-03-02 09:05–12:00" and general.ts == fx.unix("2026-03-02T09:05:00")
    assert ("[09:05] Ann Example: Kickoff for the #dachgärten-🌱 project: @bobby owns the budget, see the offsite "
            "wiki (https://wiki.example.com/offsite) & ping me if 2 < 3") in text
    assert "[11:00] bobby: Budget is 12k EUR for the offsite [edited]" in text
    assert "[11:30] deploybot: Deploy succeeded\napi v2.3.1 is live on the capybara cluster" in text
    assert "[12:00] Ann Example: Here is the plan for the offsite [file: offsite-plan.pdf]" in text
    assert "has joined" not in text and general.metadata["files"] == ["offsite-plan.pdf"]
    assert general.participants == ("Ann Example <slack:U024ANN>", "Bob Baker <slack:U024BOB>",
                                    "bobby <slack:U024BOB>", "deploybot <slack:B024DEPLOY>")
    assert general.metadata["authors"] == list(general.participants)  # all of them wrote in it
    assert general.metadata["channel"] == "#general" and general.metadata["channel_type"] == "channel"
    thread = docs[THREAD][1]  # the last reply sits in the next day's file
    assert thread.title.startswith("#general › thread: Where should the offsite be? · 2026-03-02 23:00 – 2026-03-03")
    assert [ln.split("] ", 1)[1].split(":")[0] for ln in thread.sections[0].text.split("\n\n")] == \
        ["Ann Example", "bobby", "Sam"]
    assert thread.metadata["thread_ts"] == fx.ROOT
    root_window = docs[fx.key("channel", fx.GENERAL, fx.THREAD_ROOT)][1].sections[0].text
    assert "[thread: 2 replies]" in root_window and "Agreed, booking" in root_window  # the broadcast
    assert "best sauna" not in root_window  # a plain reply stays in its thread
    dm = docs[DM][1]
    assert dm.title.startswith("DM: Ann Example, Sam") and dm.participants == ("Ann Example <slack:U024ANN>",
                                                                              "Sam <slack:U024SAM>",
                                                                              "Sam Me <slack:U024SAM>")
    mpim = docs[fx.key("mpim", fx.MPIM, fx.DAYS["mpdm-ann--bobby--sam-1"]["2026-03-07"][0])][1]
    assert "Lunch at the ramen place, @bobby? :ramen:" in mpim.sections[0].text  # rich_text blocks only
    assert "bobby <slack:U024BOB>" in mpim.participants  # a group DM's members, not only who spoke
    assert mpim.metadata["authors"] == ["Sam <slack:U024SAM>", "Sam Me <slack:U024SAM>"]  # who wrote
    roof = docs[fx.key("channel", fx.ROOF, fx.DAYS[fx.ROOF_NAME]["2026-03-05"][0])][1]
    assert roof.title.startswith("#dachgärten-🌱") and roof.participants == ("Carol Gone <slack:U024CAROL>",)
    everything = json.dumps([[ld.uri, d.title, d.sections[0].text, d.metadata] for ld, d in docs.values()])
    assert fx.TOKEN not in everything and "files.slack.com" not in everything  # file URLs carry tokens


BOT = "B024GHUB"
LINK = "https://github.com/acme/api/commit/0c48c288736881fb827e528f50fd56f53af0bf6f"
BOT_DAY = [  # the shapes of a real export (tests/fixtures/slack-export-viewer) and of Block Kit apps
    fx.msg("2026-03-02T09:00:00", fx.ANN, f"added an integration to this channel: <https://acme.slack.com/services/{BOT}"
           "|github>", subtype="bot_add", bot_id=BOT),
    fx.msg("2026-03-02T09:01:00", None, "", subtype="bot_message", bot_id=BOT, attachments=[{
        "fallback": f"[api:main] <{LINK}|1 new commit> by Ann Example", "pretext": "[api:main] 1 new commit by Ann:",
        "text": f"<{LINK}|0c48c28>: Retry uploads &amp; log them - Ann Example", "mrkdwn_in": ["text", "pretext"],
        "fields": [{"title": "Branch", "value": "<https://github.com/acme/api/tree/main|main>", "short": True}]}]),
    fx.msg("2026-03-02T09:02:00", None, "Release 2.4 deployed", subtype="bot_message", bot_id="B024CI",
           bot_profile={"id": "B024CI", "name": "Release Bot"}, blocks=[
               {"type": "header", "text": {"type": "plain_text", "text": "Release 2.4"}},
               {"type": "section", "text": {"type": "mrkdwn", "text": f"*Deployed* <https://ci.example.com/42|run 42> "
                                                                      f"for <@{fx.ANN}> in <#{fx.GENERAL}>"},
                "fields": [{"type": "mrkdwn", "text": "*Cluster:*\ncapybara-eu"}],
                "accessory": {"type": "button", "text": {"type": "plain_text", "text": "View run"}}},
               {"type": "context", "elements": [{"type": "mrkdwn", "text": "Triggered by <!subteam^S1|@sre>"}]},
               {"type": "actions", "elements": [{"type": "button", "text": {"type": "plain_text", "text": "Roll back"}}]}]),
    fx.msg("2026-03-02T09:03:00", None, "", subtype="bot_message", bot_id="B024ANON",
           attachments=[{"fallback": "Nightly backup <https://backup.example.com/7|finished>"}]),
    fx.msg("2026-03-02T09:04:00", "USLACKBOT", "Reminder: offsite survey closes today"),
]


def test_bots_attachments_and_blocks_read_as_text(tmp_path):
    path = fx.build_zip(tmp_path / "bots.zip", days={"general": {"2026-03-02": BOT_DAY}})
    src = source(path)
    [doc] = [d for _, d in documents(src, src.scan().items).values()]
    text = doc.sections[0].text
    assert (f"[09:01] github: [api:main] 1 new commit by Ann:\n0c48c28 ({LINK}): Retry uploads & log them - Ann "
            "Example\nBranch: main (https://github.com/acme/api/tree/main)") in text
    assert ("[09:02] Release Bot: Release 2.4 deployed\nRelease 2.4\n*Deployed* run 42 (https://ci.example.com/42) "
            "for @Ann Example in #general\n*Cluster:*\ncapybara-eu\nTriggered by @sre") in text
    assert "[09:03] bot: Nightly backup finished (https://backup.example.com/7)" in text  # a bot nothing names
    assert "[09:04] Slackbot: Reminder" in text
    assert "<http" not in text and "Roll back" not in text and "View run" not in text  # markup and buttons
    assert "added an integration" not in text and BOT not in text
    assert set(doc.participants) == {"Slackbot <slack:USLACKBOT>", "Release Bot <slack:B024CI>", "bot <slack:B024ANON>",
                                     f"github <slack:{BOT}>"}


def test_a_real_export_reads_without_markup_and_finds_people_by_real_name():
    """hfaran/slack-export-viewer's test export (MIT, tests/fixtures/slack-export-viewer): GitHub bots known only by
    bot_id, attachments in mrkdwn, display names ("doubledeez") that are not the real names ("Hermione Granger")."""
    src = source(Path(__file__).parent / "fixtures" / "slack-export-viewer" / "testarchive.zip")
    docs = [d for _, d in documents(src, src.scan().items).values()]
    texts = "\n".join(d.sections[0].text for d in docs)
    assert len(docs) == 42 and "<http" not in texts and "|github>" not in texts
    assert "B0JL6RASU" not in texts and "] github: [enrique:master] 1 new commit by Anthony Bilinski:\ned1acbe (" \
        "https://github.com/mesos-magellan/enrique/commit/ed1acbe9837b5ddf91e93606b604df3c2b4e128f): executor with " \
        "simulated annealing rough draft" in texts
    hermione = [d for d in docs if "Hermione Granger <slack:U0BMS113R>" in d.participants]
    assert hermione and all("doubledeez <slack:U0BMS113R>" in d.participants for d in hermione)
    wrote = [d for d in docs if "Hermione Granger <slack:U0BMS113R>" in d.metadata["authors"]]
    assert wrote and all("] doubledeez: " in d.sections[0].text for d in wrote)


def test_new_messages_change_only_the_last_window_and_renames_change_the_text(tmp_path, export):
    before = source(export).scan().items
    days = json.loads(json.dumps(fx.DAYS))
    days["general"]["2026-03-04"].append(fx.msg("2026-03-04T10:30:00", fx.BOB, "Great, 14 it is"))
    grown = source(fx.build_zip(tmp_path / "next.zip", days=days)).scan().items
    assert set(grown) == set(before)
    assert {k for k in before if grown[k] != before[k]} == {fx.key("channel", fx.GENERAL, fx.HEADCOUNT)}
    fx.USERS[1]["profile"]["display_name"] = "Bob B."
    try:
        src = source(fx.build_zip(tmp_path / "renamed.zip"))
        text = documents(src, [GENERAL_1])[GENERAL_1][1].sections[0].text
    finally:
        fx.USERS[1]["profile"]["display_name"] = "bobby"
    assert "@Bob B. owns the budget" in text and "[11:00] Bob B.: Budget" in text


def test_a_broken_day_file_is_a_failed_item_and_the_rest_indexes(tmp_path):
    path = fx.build_zip(tmp_path / "x.zip", extra={"general/2026-03-05.json": b"[{\"type\": \"message\", \"ts\": "})
    src = source(path)
    result = src.scan()
    problem = f"channel/{fx.GENERAL}/file~2026-03-05"
    assert set(result.items) == set(fx.EXPECTED) and result.problems[problem][0] == "corrupt"
    [loaded] = src.load([problem])
    assert loaded.error[0] == "corrupt" and "2026-03-05.json is not valid JSON" in loaded.error[1]


def test_missing_damaged_and_foreign_exports_are_unavailable(tmp_path):
    with pytest.raises(SourceUnavailable, match="does not exist"):
        source(tmp_path / "nowhere.zip").scan()
    (tmp_path / "bad.zip").write_bytes(b"PK\x03\x04 but not really a zip" * 20)
    with pytest.raises(SourceUnavailable, match="not a readable Slack export"):
        source(tmp_path / "bad.zip").scan()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.json").write_text("[]")
    with pytest.raises(SourceUnavailable, match="no users.json"):
        source(tmp_path / "other").scan()


def test_cli_help():
    r = CliRunner().invoke(cli, ["index", "slack", "--help"])
    assert r.exit_code == 0 and "--path" in r.output


# -- end to end ------------------------------------------------------------------------------------------------


def search(query: str, **filters) -> list:
    engine = SearchEngine(resources.RagResource().store(), resources.RagResource().embedder())
    return engine.search(SearchRequest(query, filters=resolve_filters(Filters(**filters), PeopleDirectory()))).hits


def test_index_search_and_resync_through_dagster(tmp_path, monkeypatch, export):
    paths, _ = make_home(tmp_path, monkeypatch)
    settings = load_settings(paths.config).embedder
    resources._open[("embedder", settings.model_dump_json(), paths.ollama_host)] = HashEmbedder()
    try:
        r = CliRunner().invoke(cli, ["index", "slack", "--path", str(export), "--json"], catch_exceptions=False)
        assert r.exit_code == 0, r.output
        [summary] = json.loads(r.stdout)  # progress goes to stderr
        assert summary["outcomes"] == {"indexed": len(fx.EXPECTED)}
        assert set(reads.item_states(resources.RagResource().store(), "slack")) == set(fx.EXPECTED)

        assert search("capybara cluster deploy")[0].key == GENERAL_1
        assert {h.key for h in search("offsite", participants=("slack:U024ANN",), collections=("slack",))} == {
            GENERAL_1, THREAD, fx.key("channel", fx.GENERAL, fx.THREAD_ROOT), fx.key("channel", fx.GENERAL, fx.HEADCOUNT),
            DM, fx.key("mpim", fx.MPIM, fx.DAYS["mpdm-ann--bobby--sam-1"]["2026-03-07"][0])}
        assert {h.key for h in search("sauna", participants=("bobby",))} == {THREAD, fx.key(
            "mpim", fx.MPIM, fx.DAYS["mpdm-ann--bobby--sam-1"]["2026-03-07"][0]), GENERAL_1}
        march_4 = search("offsite headcount", date_from=fx.unix("2026-03-04T00:00:00"),
                         date_to=fx.unix("2026-03-04T23:59:59"), include_undated=False)
        assert {h.key for h in march_4} == {fx.key("channel", fx.GENERAL, fx.HEADCOUNT)}
        # --from: the windows Bob wrote in, by the name shown or his real name; --with: also where he was present
        wrote = {GENERAL_1, THREAD}
        assert {h.key for h in search("offsite budget sauna lunch", author="bobby")} == wrote
        assert {h.key for h in search("offsite budget sauna lunch", author="Bob Baker")} == wrote
        mpim = fx.key("mpim", fx.MPIM, fx.DAYS["mpdm-ann--bobby--sam-1"]["2026-03-07"][0])
        assert {h.key for h in search("offsite budget sauna lunch", participants=("Bob Baker",))} == \
            wrote | {mpim}
        assert {h.key for h in search("salary", metadata={"channel_type": "private"})} == {
            fx.key("private", fx.PRIV, fx.DAYS["leadership"]["2026-03-06"][0])}

        days = {k: v for k, v in fx.DAYS.items() if k != fx.DM}  # a newer export without the DM
        fx.build_zip(export, prefix="Acme export/", days=days)
        [again] = runs.index_collections(paths, ["slack"])
        assert again.outcomes == {"deleted": 1} and DM not in reads.item_states(resources.RagResource().store(), "slack")
        [noop] = runs.index_collections(paths, ["slack"])
        assert noop.outcomes == {} and noop.run_ids == []
        # an index made by an earlier format (windows without authors) is re-read once by the next run (of a new
        # process: no source kept from this one)
        monkeypatch.setattr(slack_module, "VERSION", "slack-next")
        monkeypatch.setattr(scan_module, "_opened", {})
        [upgraded] = runs.index_collections(paths, ["slack"])
        assert upgraded.outcomes == {"indexed": len(fx.EXPECTED) - 1}
    finally:
        resources.close_all()
