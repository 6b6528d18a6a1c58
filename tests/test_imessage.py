"""iMessage: attributedBody decoding, chat.db reading (WAL, locks, schema drift), conversations and windows, and
end to end through a Dagster materialisation with the bundled embedder."""

from __future__ import annotations

import sqlite3
import time

import dagster as dg
import pytest
from click.testing import CliRunner

import imessage_fixture as fx
from fakes import HashEmbedder
from pipeline_env import make_home
from rag_pipelines.indexing import runs
from rag_pipelines.config import load_collections
from rag_pipelines.parsers import typedstream
from rag_pipelines.parsers.typedstream import TypedStreamError, attributed_text, text_or_none
from rag_pipelines.sources import appdb, imessage_db
from rag_pipelines.sources.base import SourceUnavailable
from rag_pipelines.sources.imessage import IMessageOptions, IMessageSource
from rag_pipelines.sources.imessage_db import unix_time
from rag_pipelines.indexing.plan import plan_sync
from rag_pipelines.wiring import resources
from rag_search.cli.main import cli
from rag_search.config import load_settings
from rag_search.people import PeopleDirectory, resolve_filters
from rag_search.retrieval import Filters, SearchEngine, SearchRequest
from rag_search.store import reads


@pytest.fixture
def chat_db(tmp_path):
    return fx.build(tmp_path / "Messages" / "chat.db")


def source(path, **options) -> IMessageSource:
    return IMessageSource(IMessageOptions(type="imessage", path=path, **{"timezone": "UTC", **options}))


def documents(src: IMessageSource, keys=None) -> dict:
    out = {}
    for loaded in src.load(sorted(keys or fx.EXPECTED)):
        assert loaded.error is None and not loaded.gone, (loaded.key, loaded.error)
        out[loaded.key] = loaded.parse()
    return out


@pytest.fixture
def fast_locks(monkeypatch):
    monkeypatch.setattr(appdb, "RETRIES", (0.05, 0.05))
    monkeypatch.setattr(appdb, "BUSY_MS", 50)


# -- attributedBody ------------------------------------------------------------------------------------------


def test_a_blob_follows_the_documented_layout_and_decodes():
    blob = fx.attributed_body("Hello, world")
    assert blob.startswith(b"\x04\x0bstreamtyped\x81\xe8\x03\x84\x01@\x84\x84\x84\x12NSAttributedString\x00"
                           b"\x84\x84\x08NSObject\x00\x85\x92\x84\x84\x84\x08NSString\x01\x94\x84\x01+\x0cHello, world")
    assert attributed_text(blob) == "Hello, world"


@pytest.mark.parametrize("text, prefix", [
    ("Y", b"\x01"),  # one byte
    ("x" * 127, b"\x7f"),
    ("x" * 128, b"\x81\x80\x00"),  # 0x81 + uint16 LE
    ("ü" * 64, b"\x81\x80\x00"),  # 64 characters, 128 UTF-8 bytes: the length counts bytes
    ("a" * 40_000, b"\x82\x40\x9c\x00\x00"),  # 0x82 + uint32 LE
])
def test_every_length_form(text, prefix, monkeypatch):
    for mutable in (False, True):
        blob = fx.attributed_body(text, mutable=mutable)
        assert b"\x84\x01+" + prefix + text.encode()[:4] in blob
        assert attributed_text(blob) == text
        with monkeypatch.context() as m:  # the general reader (class chains, references) agrees with the fast path
            m.setattr(typedstream, "PREFIXES", ())
            assert attributed_text(blob) == text


def test_multi_byte_text_and_placeholders():
    for text in (fx.JAPANESE, "Ελληνικά 👩‍👩‍👧 и русский", "\ufffc", "\ufffcSee the photo", ""):
        assert attributed_text(fx.attributed_body(text, mutable=True)) == text


def test_a_hand_made_stream_with_references_and_the_0x82_form_for_a_short_text():
    # the same message written with a 4-byte length (legal, if unusual) and the NSString class by reference
    head = b"\x04\x0bstreamtyped\x81\xe8\x03\x84\x01@\x84\x84\x84\x12NSAttributedString\x00\x84\x84\x08NSObject\x00\x85"
    blob = head + b"\x92\x84\x84\x84\x08NSString\x01\x94\x84\x01+\x82\x05\x00\x00\x00Hallo\x86\x86"
    assert attributed_text(blob) == "Hallo"


@pytest.mark.parametrize("blob, why", [
    (fx.attributed_body("this message was cut off in transit")[:80], "runs past the end"),
    (b"bplist00\xd4\x01\x02\x03\x04", "not a typedstream"),
    (b"\x04\x0bstreamtyped\x81\xe8\x03\x84\x01@\x84\x84\x84\x07NSArray\x00\x84\x84\x08NSObject\x00\x85",
     "not an attributed string"),
    (fx.attributed_body("ok").replace(b"\x02ok", b"\x02\xff\xfe"), "not valid UTF-8"),
    (fx.attributed_body("text")[:30], "runs past the end"),
    (fx.attributed_body("text")[:22], "cut off"),
    (b"\x04", "not a typedstream"),
])
def test_undecodable_blobs_raise_and_give_none(blob, why):
    with pytest.raises(TypedStreamError, match=why):
        attributed_text(blob)
    assert text_or_none(blob) is None


def test_apple_dates_in_seconds_and_nanoseconds():
    assert unix_time(fx.apple_ns("2026-03-02T09:00:00")) == pytest.approx(fx.unix("2026-03-02T09:00:00") + 0.123456789)
    assert unix_time(fx.apple_s("2012-06-01T12:00:00")) == fx.unix("2012-06-01T12:00:00")
    assert unix_time(0) is None and unix_time(None) is None and unix_time("x") is None


# -- scan ----------------------------------------------------------------------------------------------------


def test_scan_lists_one_item_per_window_and_counts_undecodable_blobs(chat_db):
    result = source(chat_db).scan()
    assert set(result.items) == set(fx.EXPECTED)
    assert set(result.problems) == {fx.UNDECODABLE} and result.problems[fx.UNDECODABLE][0] == "undecodable"
    assert result.items[fx.window(fx.ANN, fx.by_n(1))].uri == "sms:+15555550142"
    assert source(chat_db).scan().items == result.items  # stamps are stable


def test_windows_hold_the_right_messages(chat_db):
    docs = documents(source(chat_db))
    for key, rowids in fx.EXPECTED.items():
        assert docs[key].metadata["messages"] == len(rowids), key
    ann = docs[fx.window(fx.ANN, fx.by_n(1))]
    text = ann.sections[0].text
    # iMessage and SMS with the number and iMessage with the address (same person) are one conversation
    assert "[09:01] Me: Yes — shall we book the lake hotel" in text  # NULL text, decoded attributedBody
    assert "[09:02] +15555550142: Lake hotel sounds great" in text  # the SMS chat
    assert "[09:08] ann@example.com: Here is the full agenda" in text and fx.AGENDA in text  # the 0x81 form
    assert "[09:05] Me: Booked two rooms at the Seehotel [edited]" in text
    for absent in ("Liked", "Removed a like", "pineapple"):  # tapbacks, "Recently Deleted"
        assert absent not in text
    assert text.count("\n\n") == 5  # six messages: the unsent and the errored rows are not there
    assert ann.title == "+15555550142, ann@example.com · 2026-03-02 09:00–09:10"
    assert ann.participants == ("+15555550142", "ann@example.com") and ann.ts == fx.unix("2026-03-02T09:00:00")
    assert ann.metadata | {} == {"start": "2026-03-02T09:00:00+00:00", "end": "2026-03-02T09:10:00+00:00",
                                 "start_ts": fx.unix("2026-03-02T09:00:00"), "end_ts": fx.unix("2026-03-02T09:10:00"),
                                 "messages": 6, "conversation": "+15555550142, ann@example.com", "group": False,
                                 "service": ["SMS", "iMessage"], "authors": ["+15555550142", "Me", "ann@example.com"]}
    crew = docs[fx.window(fx.CREW_KEY, fx.by_n(21))]
    assert crew.title.startswith("Climbing crew · ") and crew.metadata["group"] is True
    assert crew.participants == ("+447700900123", "+4915112345678", "carol@example.org")
    assert fx.JAPANESE in crew.sections[0].text and "rename" not in crew.sections[0].text.lower()
    assert "[19:02] carol@example.org: [attachment: route-map.jpg]" in crew.sections[0].text  # named, not read
    assert crew.metadata["attachments"] == ["route-map.jpg"] and "Loved" not in crew.sections[0].text
    assert docs[fx.window(fx.CREW_KEY, fx.by_n(25))].sections[0].text.endswith(fx.TRAINING.split("\n")[-1])
    eve = docs[fx.window(fx.EVE_KEY, fx.by_n(30))]  # dates in seconds next to one in nanoseconds
    assert eve.ts == fx.unix("2012-06-01T12:00:00") and eve.metadata["end_ts"] == fx.unix("2012-06-01T12:05:00")


def test_times_show_in_the_configured_zone(chat_db):
    key = fx.window(fx.ANN, fx.by_n(1))
    doc = documents(source(chat_db, timezone="Europe/Berlin"), [key])[key]
    assert doc.title.endswith("2026-03-02 10:00–10:10") and "[10:01] Me:" in doc.sections[0].text
    assert doc.metadata["start"] == "2026-03-02T10:00:00+01:00" and doc.ts == fx.unix("2026-03-02T09:00:00")


def test_new_messages_change_only_the_last_window(chat_db):
    before = source(chat_db).scan().items
    fx.append(chat_db, fx.Msg(50, 1, fx.apple_ns(fx.ANN_S2 + "40:00"), 1, text="See you at the lake"))
    after = source(chat_db).scan().items
    last = fx.window(fx.ANN, fx.by_n(13))
    assert set(after) == set(before) and {k for k in before if after[k] != before[k]} == {last}
    next_day = fx.Msg(51, 3, fx.apple_ns("2026-03-06T09:00:00"), 3, text="Morning, the next day")
    fx.append(chat_db, next_day)
    later = source(chat_db).scan().items
    assert set(later) - set(after) == {fx.window(fx.ANN, next_day)}
    assert all(later[k] == after[k] for k in after)


def test_a_new_format_changes_every_stamp_so_an_old_index_is_read_again(chat_db, monkeypatch):
    """Windows indexed before they had authors (imessage-1) are re-read by the next run: stamps hold the version."""
    from rag_pipelines.sources import imessage as module

    before = source(chat_db).scan().items
    monkeypatch.setattr(module, "VERSION", "imessage-next")
    after = source(chat_db).scan().items
    assert set(after) == set(before) and all(after[k] != before[k] for k in before)


def test_an_unchanged_database_is_not_read_again(chat_db, monkeypatch):
    src = source(chat_db)
    first = src.scan().items
    calls = []
    real = imessage_db.read_scan
    monkeypatch.setattr(imessage_db, "read_scan", lambda path: calls.append(path) or real(path))
    assert src.scan().items == first and calls == []  # neither chat.db nor its -wal changed
    fx.append(chat_db, fx.Msg(53, 1, fx.apple_ns(fx.ANN_S2 + "45:00"), 1, text="one more"))
    assert src.scan().items != first and calls == [chat_db]


def test_a_database_replaced_under_the_reader_is_read_afresh(chat_db, tmp_path):
    src = source(chat_db)
    src.scan()
    rebuilt = fx.build(tmp_path / "rebuilt" / "chat.db", [m for m in fx.MESSAGES if m.chat != 5])
    rebuilt.replace(chat_db)  # a restore from a backup: a new file renamed over the old one
    [gone] = src.load([fx.window(fx.EVE_KEY, fx.by_n(30))])
    assert gone.gone and set(src.scan().items) == {k for k in fx.EXPECTED if not k.startswith(fx.EVE_KEY)}


def test_a_national_number_joins_its_e164_handle_with_a_region(chat_db):
    fx.execute(chat_db, "INSERT INTO handle (ROWID, id, service) VALUES (9, '(555) 555-0142', 'SMS')")
    fx.execute(chat_db, "INSERT INTO chat (ROWID, guid, style, chat_identifier, service_name) "
                        "VALUES (9, 'SMS;-;(555) 555-0142', 45, '(555) 555-0142', 'SMS')")
    fx.execute(chat_db, "INSERT INTO chat_handle_join VALUES (9, 9)")
    fx.append(chat_db, fx.Msg(52, 9, fx.apple_ns(fx.ANN_S1 + "10:30"), 9, service="SMS", text="old-phone SMS"))
    keys = set(source(chat_db, phone_region="US").scan().items)
    assert keys == set(fx.EXPECTED)  # merged into Ann's first window
    assert any(k.startswith("with/5555550142/") for k in source(chat_db).scan().items)  # no region: its digits


def test_the_apps_open_transaction_is_not_read_and_nothing_is_written(chat_db):
    before = fx.hash_tree(chat_db.parent)
    app = fx.AppWriter(chat_db)
    try:
        during = fx.hash_tree(chat_db.parent)
        src = source(chat_db)
        docs = documents(src, src.scan().items)
        assert fx.hash_tree(chat_db.parent) == during  # -wal and -shm included
    finally:
        app.close()
    assert before.keys() == {"chat.db"}
    session = docs[fx.window(fx.ANN, fx.by_n(13))].sections[0].text
    assert "The sauna opens at 7" in session and "ferret" not in session  # committed in the WAL: yes


def test_schema_drift_missing_optional_columns(chat_db, tmp_path):
    old = tmp_path / "old.db"
    conn = sqlite3.connect(old)
    conn.executescript(f"""
        CREATE TABLE handle (ROWID INTEGER PRIMARY KEY, id TEXT, service TEXT);
        CREATE TABLE chat (ROWID INTEGER PRIMARY KEY, guid TEXT, chat_identifier TEXT);
        CREATE TABLE message (ROWID INTEGER PRIMARY KEY, guid TEXT, text TEXT, handle_id INTEGER, date INTEGER,
                              is_from_me INTEGER);
        CREATE TABLE chat_message_join (chat_id INTEGER, message_id INTEGER);
        INSERT INTO handle VALUES (1, 'bob@example.net', 'iMessage');
        INSERT INTO chat VALUES (1, 'iMessage;-;bob@example.net', 'bob@example.net');
        INSERT INTO message VALUES (1, 'G1', 'An old-schema message from 2011', 1, {fx.apple_s('2011-06-17T10:40:00')}, 0);
        INSERT INTO chat_message_join VALUES (1, 1);
    """)
    conn.commit()
    conn.close()
    src = source(old)
    [key] = src.scan().items
    assert key == "with/bob@example.net/20110617T104000Z~G1" and "old-schema" in documents(src, [key])[key].sections[0].text


def test_missing_damaged_foreign_and_locked_databases_are_unavailable(chat_db, tmp_path, fast_locks):
    with pytest.raises(SourceUnavailable, match="does not exist"):
        source(tmp_path / "nowhere.db").scan()
    (tmp_path / "garbage.db").write_bytes(b"not a database" * 100)
    with pytest.raises(SourceUnavailable, match="not a readable SQLite database"):
        source(tmp_path / "garbage.db").scan()
    foreign = tmp_path / "foreign.db"
    sqlite3.connect(foreign).execute("CREATE TABLE other (x)").connection.close()
    with pytest.raises(SourceUnavailable, match="no table message"):
        source(foreign).scan()
    holder = sqlite3.connect(chat_db, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        t0 = time.perf_counter()
        with pytest.raises(SourceUnavailable, match="stayed locked"):
            source(chat_db).scan()
        assert time.perf_counter() - t0 < 5
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_cli_help_names_the_path_option():
    r = CliRunner().invoke(cli, ["index", "imessage", "--help"])
    assert r.exit_code == 0 and "--path" in r.output and "chat.db" in r.output


# -- end to end ------------------------------------------------------------------------------------------------


def search(query: str, **filters) -> list:
    engine = SearchEngine(resources.RagResource().store(), resources.RagResource().embedder())
    f = resolve_filters(Filters(**filters), PeopleDirectory(region="US"))
    return engine.search(SearchRequest(query, filters=f)).hits


def test_index_search_delete_and_resync_through_dagster(tmp_path, monkeypatch, chat_db):
    paths, _ = make_home(tmp_path, monkeypatch, extra_collections={"imessage": {"kind": "system", "sources": [
        {"type": "imessage", "path": str(chat_db), "timezone": "UTC"}]}})
    app = fx.AppWriter(chat_db)
    try:
        before = fx.hash_tree(chat_db.parent)
        [summary] = runs.index_collections(paths, ["imessage"])
        assert fx.hash_tree(chat_db.parent) == before
    finally:
        app.close()
    try:
        assert summary.outcomes == {"indexed": len(fx.EXPECTED), "failed": 1} and not summary.unavailable
        assert [f["key"] for f in summary.failures] == [fx.UNDECODABLE]  # counted by status as a failed item
        states = reads.item_states(resources.RagResource().store(), "imessage")
        assert set(states) == set(fx.EXPECTED) | {fx.UNDECODABLE}
        assert set(dg.DagsterInstance.get().get_dynamic_partitions("imessage_items")) == set(states)

        ann1, ann2 = fx.window(fx.ANN, fx.by_n(1)), fx.window(fx.ANN, fx.by_n(13))
        hit = search("which hotel did we book for the offsite")[0]
        assert hit.key == ann1 and hit.uri == "sms:+15555550142" and hit.source_type == "chat"
        # a number in another format is the same person; so is her e-mail handle
        assert {h.key for h in search("lake", participants=("(555) 555-0142",))} == {ann1, ann2}
        assert {h.key for h in search("agenda", participants=("ANN@example.com",))} >= {ann1}
        eve = fx.window(fx.EVE_KEY, fx.by_n(30))
        assert {h.key for h in search("lake", participants=("+33 6 12 34 56 78",))} == {eve}
        assert [h.key for h in search("sauna towels", collections=("imessage",))][:1] == [ann2]  # the -wal row
        in_2012 = search("train Lyon", date_from=fx.unix("2012-01-01T00:00:00"), date_to=fx.unix("2012-12-31T00:00:00"),
                         include_undated=False)
        assert {h.key for h in in_2012} == {eve}
        assert search("クライミング 東京")[0].key == fx.window(fx.CREW_KEY, fx.by_n(21))
        assert not [h for h in search("ferret plans") if "ferret" in h.text]  # never committed

        fx.execute(chat_db, "DELETE FROM chat_message_join WHERE chat_id = 5")  # Eve's chat deleted
        [again] = runs.index_collections(paths, ["imessage"])  # `index` retries failed items: the undecodable one
        assert again.outcomes == {"deleted": 1, "failed": 1}
        assert eve not in reads.item_states(resources.RagResource().store(), "imessage")
        [noop] = runs.index_collections(paths, ["imessage"])
        assert noop.outcomes == {"failed": 1}
        cfg = load_collections(paths)["imessage"]
        assert plan_sync(resources.RagResource().store(), cfg).empty  # what the sensor sees: nothing to do
    finally:
        resources.close_all()


def test_cli_indexes_a_chat_db(tmp_path, monkeypatch, chat_db):
    paths, _ = make_home(tmp_path, monkeypatch)
    settings = load_settings(paths.config).embedder
    resources._open[("embedder", settings.model_dump_json(), paths.ollama_host)] = HashEmbedder()  # no model here
    try:
        r = CliRunner().invoke(cli, ["index", "imessage", "--path", str(chat_db), "--name", "Texts", "--json"],
                               catch_exceptions=False)
        assert r.exit_code == 6, r.output  # indexed, with the undecodable message failed (exit status 6)
        assert set(reads.item_states(resources.RagResource().store(), "Texts")) == set(fx.EXPECTED) | {fx.UNDECODABLE}
    finally:
        resources.close_all()
