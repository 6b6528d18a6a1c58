"""Conversation windows: cutting by silence and size, keys that stay put while messages arrive, the window as a
Document, and through Dagster: a new message re-indexes only its window and embeds only what changed."""

from __future__ import annotations

import random
from datetime import timezone
from zoneinfo import ZoneInfo

import pytest

import imessage_fixture as fx
from fakes import HashEmbedder
from pipeline_env import make_home
from rag_pipelines.indexing import runs
from rag_pipelines.parsers.conversation import (Line, Stub, WindowSpec, key_part, local_zone, split, window_document,
                                                window_key)
from rag_pipelines.wiring import resources
from rag_search.config import load_settings
from rag_search.store import reads

H = 3600
T0 = 1_772_442_000  # 2026-03-02 09:00 UTC


def stubs(*times: float, size: int = 10) -> list[Stub]:
    return [Stub(f"m{i}", T0 + t, size) for i, t in enumerate(times)]


def ids(windows) -> list[list[str]]:
    return [[s.id for s in w] for w in windows]


def test_a_silence_longer_than_the_gap_starts_a_window():
    msgs = stubs(0, 60, 4 * H + 60, 8 * H + 61, 8 * H + 62)
    assert ids(split(msgs)) == [["m0", "m1", "m2"], ["m3", "m4"]]  # 4 h exactly is no silence; 4 h 1 s is
    assert ids(split(msgs, WindowSpec(gap_seconds=30 * 60))) == [["m0", "m1"], ["m2"], ["m3", "m4"]]


def test_size_bounds_a_busy_session():
    msgs = stubs(*range(0, 100 * 60, 60), size=100)  # 100 messages a minute apart
    by_chars = split(msgs, WindowSpec(max_chars=1000))
    assert [len(w) for w in by_chars] == [10] * 10
    assert [len(w) for w in split(msgs, WindowSpec(max_chars=10**6, max_messages=30))] == [30, 30, 30, 10]
    huge = [Stub("big", T0, 50_000), Stub("after", T0 + 60, 10)]
    assert ids(split(huge, WindowSpec(max_chars=1000))) == [["big"], ["after"]]  # never split, alone


def test_order_is_by_time_then_id_whatever_the_input_order():
    msgs = [Stub("b", T0, 5), Stub("a", T0, 5), Stub("c", T0 - 60, 5)]
    assert ids(split(msgs)) == [["c", "a", "b"]]


@pytest.mark.parametrize("seed", range(5))
def test_appending_messages_never_moves_an_earlier_window(seed):
    rnd = random.Random(seed)
    t, msgs = 0.0, []
    for i in range(400):
        t += rnd.choice([5, 30, 120, 600, 3 * H, 5 * H, 30 * H])
        msgs.append(Stub(f"g{i:04d}", T0 + t, rnd.randint(1, 600)))
    spec = WindowSpec(max_chars=1500, max_messages=20)
    full = split(msgs, spec)
    for n in rnd.sample(range(1, 400), 25):
        prefix = split(msgs[:n], spec)
        assert prefix[:-1] == full[: len(prefix) - 1]  # every window but the last is final
        assert full[len(prefix) - 1][: len(prefix[-1])] == prefix[-1]  # the last one only grows (or is closed)
        keys = [window_key("with/x", w[0]) for w in prefix]
        assert keys == [window_key("with/x", w[0]) for w in full[: len(prefix)]]


def test_keys_and_key_parts():
    assert window_key("group/chat1", Stub("5F2B-AA", T0, 1)) == "group/chat1/20260302T090000Z~5F2B-AA"
    assert window_key("channel/C1", Stub("1772442000.000100", T0 + 0.0001, 1)) == \
        "channel/C1/20260302T090000Z~1772442000.000100"
    assert key_part("+15555550142") == "+15555550142" and key_part("ann@example.com") == "ann@example.com"
    for odd in ("dachgärten", "a/b", "50%", "x...y", "two words", "x" * 200):
        part = key_part(odd)
        assert part.startswith("~") and len(part) == 21 and part == key_part(odd)


def test_a_window_as_a_document():
    berlin = ZoneInfo("Europe/Berlin")
    lines = [Line(T0 + 60, "Me", "Booked the lake hotel", ("edited",)),
             Line(T0, "+15555550142", "Did you book it?"),
             Line(T0 + 120, "+15555550142", "", ("attachment: map.jpg",))]
    doc = window_document("Ann", lines, berlin, ("+15555550142", "+15555550142", ""), {"group": False})
    assert doc.title == "Ann · 2026-03-02 10:00–10:02" and doc.ts == T0
    assert doc.sections[0].text == ("[10:00] +15555550142: Did you book it?\n\n"
                                    "[10:01] Me: Booked the lake hotel [edited]\n\n"
                                    "[10:02] +15555550142: [attachment: map.jpg]")
    assert doc.participants == ("+15555550142",)
    assert doc.metadata == {"start": "2026-03-02T10:00:00+01:00", "end": "2026-03-02T10:02:00+01:00",
                            "start_ts": T0, "end_ts": T0 + 120, "messages": 3, "group": False}
    night = window_document("Ann", [Line(T0 + 14 * H, "A", "late"), Line(T0 + 16 * H, "B", "later")], timezone.utc)
    assert night.title == "Ann · 2026-03-02 23:00 – 2026-03-03 01:00"


def test_local_zone(monkeypatch):
    assert local_zone("Asia/Tokyo") == ZoneInfo("Asia/Tokyo")
    monkeypatch.setenv("TZ", "America/New_York")
    assert local_zone() == ZoneInfo("America/New_York")
    monkeypatch.setenv("TZ", "Not/AZone")
    assert local_zone() is not None  # falls back to the machine's zone (or UTC)


# -- end to end ------------------------------------------------------------------------------------------------


def test_a_new_message_reindexes_only_its_window_through_dagster(tmp_path, monkeypatch):
    db = fx.build(tmp_path / "Messages" / "chat.db")
    paths, _ = make_home(tmp_path, monkeypatch, extra_collections={"texts": {"sources": [
        {"type": "imessage", "path": str(db), "timezone": "UTC", "window_chars": 400}]}})
    emb = HashEmbedder()
    settings = load_settings(paths.config).embedder
    resources._open[("embedder", settings.model_dump_json(), paths.ollama_host)] = emb
    try:
        [first] = runs.index_collections(paths, ["texts"])
        store = resources.RagResource().store()
        before = reads.item_states(store, "texts")
        assert first.outcomes["indexed"] == len(before) - 1 > len(fx.EXPECTED)  # 400 characters: more windows

        def chunk_ids() -> dict[str, list[int]]:
            rows = store.conn.execute("SELECT i.key, c.id FROM chunks c JOIN items i ON i.id = c.item_id "
                                      "ORDER BY c.id").fetchall()
            out: dict[str, list[int]] = {}
            for key, cid in rows:
                out.setdefault(key, []).append(cid)
            return out

        chunks_before, calls = chunk_ids(), len(emb.calls)
        last = max(k for k in before if k.startswith(fx.ANN + "/2026"))  # Ann's latest window (keys start by time)
        fx.append(db, fx.Msg(60, 1, fx.apple_ns(fx.ANN_S2 + "20:00"), 1, text="Shall I bring the kayak?"))
        [grown] = runs.index_collections(paths, ["texts"])
        after = reads.item_states(store, "texts")
        assert grown.outcomes == {"indexed": 1, "failed": 1} and set(after) == set(before)  # failed: the retried
        changed = {k for k in before if after[k].sha256 != before[k].sha256}  # undecodable blob
        assert changed == {last}
        assert sum(emb.calls[calls:]) == 1  # one new chunk text embedded; the rest came from the cache
        chunks_after = chunk_ids()
        assert all(chunks_after[k] == v for k, v in chunks_before.items() if k != last)  # untouched rows

        fx.append(db, fx.Msg(61, 2, fx.apple_ns("2026-03-09T08:00:00"), 2, service="SMS", text="Back home"))
        [later] = runs.index_collections(paths, ["texts"])
        assert later.outcomes == {"indexed": 1, "failed": 1}
        assert set(reads.item_states(store, "texts")) - set(after) == {f"{fx.ANN}/20260309T080000Z~{fx.guid(61)}"}
    finally:
        resources.close_all()
