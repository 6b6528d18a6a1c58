"""SuperWhisper recordings as a Source: scan, documents, incomplete records retried until complete, faults, and end
to end through Dagster."""

from __future__ import annotations

import shutil
import sys

import pytest
import yaml
from click.testing import CliRunner

import superwhisper_fixture as fx
from fakes import HashEmbedder
from rag_pipelines.indexing import runs
from rag_pipelines.config import load_collections
from rag_pipelines.sources import superwhisper as sw
from rag_pipelines.sources.base import SourceUnavailable
from rag_pipelines.sources.superwhisper import SuperWhisperOptions, SuperWhisperSource, classify, recording_time
from rag_pipelines.indexing.plan import plan_sync
from rag_pipelines.wiring import resources
from rag_search.cli.main import cli
from rag_search.config import Paths, load_settings
from rag_search.retrieval import Filters, SearchEngine, SearchRequest
from rag_search.store import reads


@pytest.fixture
def folder(tmp_path):
    return fx.build(tmp_path)


def source(path=None) -> SuperWhisperSource:
    return SuperWhisperSource(SuperWhisperOptions(type="superwhisper", path=path))


def load(src: SuperWhisperSource, recs) -> dict:
    return {ld.key: ld for ld in src.load([r.name for r in recs])}


def text(doc) -> str:
    return "\n".join(s.text for s in doc.sections)


OPENED: list[str] = []


def _audit(event, args):  # installed once per process; records only while a test asks for it
    if OPENED and event == "open" and isinstance(args[0], (str, bytes)):
        OPENED.append(str(args[0]))


sys.addaudithook(_audit)


# -- scan --------------------------------------------------------------------------------------------------


def test_scan_lists_each_folder_with_a_meta_json(folder):
    result = source(folder.base).scan()  # the superwhisper folder: its recordings/ is used
    assert set(result.items) == {r.name for r in fx.ITEMS} and not result.problems
    assert result.items[fx.DICTATION.name].uri == str(folder.recordings / fx.DICTATION.name)
    assert all(result.items[r.name].value.endswith(":fresh") == r.fresh for r in fx.ITEMS)
    assert source(folder.recordings).scan().items == result.items


def test_stamps_change_when_meta_json_is_rewritten_or_settles(folder):
    before = source(folder.recordings).scan().items
    fx.finish(folder.recordings, fx.PLACEHOLDER)
    fx.age(folder.recordings, fx.TRUNCATED, sw.SETTLE_SECONDS + 60)
    after = source(folder.recordings).scan().items
    assert {k for k in before if after[k] != before[k]} == {fx.PLACEHOLDER.name, fx.TRUNCATED.name}
    assert not after[fx.TRUNCATED.name].value.endswith(":fresh")


# -- load --------------------------------------------------------------------------------------------------


def test_documents_keep_transcript_and_derived_text(folder):
    loaded = load(source(folder.recordings), fx.INDEXED)
    docs = {k: ld.parse() for k, ld in loaded.items()}
    dictation = docs[fx.DICTATION.name]  # result = rawResult (but for a space): one section
    assert [s.heading_path for s in dictation.sections] == [("Transcript",)]
    assert dictation.title == "Remind me to order the lakeside lodge catering for the March offsite and to…"
    assert dictation.ts == 1772533910 and dictation.author is None and dictation.participants == ()
    assert dictation.metadata == {"recording": "1772533910", "time_source": "folder", "audio": ["output.wav"],
                                  "duration_s": 8.2, "mode": "Default", "model": "Ultra (Cloud)", "language": "en",
                                  "system_audio": False, "app_version": "2.9.0", "device": "MacBook Pro Microphone",
                                  "processing_ms": 912}
    meeting = docs[fx.MEETING.name]  # summary ≠ transcript; llmResult = result: not twice
    assert [s.heading_path for s in meeting.sections] == [("Result",), ("Transcript",)]
    assert meeting.sections[0].text.startswith("Decisions: offsite budget 40,000 EUR")
    assert "forty thousand euros" in meeting.sections[1].text and meeting.metadata["system_audio"] is True
    assert meeting.metadata["duration_s"] == 1834.0 and meeting.metadata["language_model"] == "GPT-5 mini"
    assert "audio" not in meeting.metadata  # no audio file in its folder
    summary = docs[fx.SUMMARY.name]
    assert summary.title == "Move the raised bed to the south wall next spring for more sun."
    assert "tomatoes need more sun" in text(summary)
    assert "資料を準備してください 🎉" in text(docs[fx.CJK.name]) and docs[fx.CJK.name].metadata["language"] == "ja"
    assert docs[fx.IMPORTED.name].ts == fx.unix("2026-03-10T08:00:00")  # no epoch folder: `datetime` as UTC
    assert docs[fx.IMPORTED.name].metadata["time_source"] == "datetime"
    assert docs[fx.MILLIS.name].ts == 1773225110 and [s.heading_path for s in docs[fx.MILLIS.name].sections] == [("Result",)]
    assert all(ld.content_hash and ld.source_type == "recording" for ld in loaded.values())


def test_incomplete_records_fail_as_incomplete_with_their_current_stamp(folder):
    src = source(folder.recordings)
    stamps = src.scan().items
    loaded = load(src, fx.INCOMPLETE)
    for rec in fx.INCOMPLETE:
        ld = loaded[rec.name]
        assert ld.error[0] == "incomplete" and ld.stamp == stamps[rec.name].value and ld.parse is None, rec.name
    for rec in fx.NO_TEXT:
        [ld] = src.load([rec.name])
        with pytest.raises(sw.ParseError) as err:
            ld.parse()
        assert err.value.kind == "no_text"


def test_settled_records_are_judged_for_good():
    assert classify(b'{"datetime": "2026-03-05T10:31:50"}', fresh=False)[0] == "incomplete"  # never finished
    assert classify(b'{"datetime": "2026-03-05T10:31:', fresh=False)[0] == "corrupt"
    assert classify(b'{"datetime": "2026-03-05T10:31:', fresh=True)[0] == "incomplete"
    assert classify(b"[1, 2]", fresh=False)[0] == "corrupt"
    raw_only = b'{"duration": 4000, "rawResult": " call the plumber"}'
    assert classify(raw_only, fresh=True)[0] == "incomplete" and classify(raw_only, fresh=False)["rawResult"]
    assert isinstance(classify(b'{"result": "", "rawResult": "", "duration": 0}', fresh=True), dict)  # finished


def test_recording_times():
    assert recording_time("1770978710", None) == (1770978710, "folder")
    assert recording_time("1770978710123", None) == (1770978710, "folder")
    assert recording_time("12", "2026-02-13T10:31:50") == (fx.unix("2026-02-13T10:31:50"), "datetime")
    assert recording_time("x", "2026-02-13T10:31:50+01:00") == (fx.unix("2026-02-13T09:31:50"), "datetime")
    assert recording_time("x", "yesterday") == (None, "none") and recording_time("x", None) == (None, "none")


def test_audio_files_are_never_opened(folder):
    OPENED.append("<recording>")
    try:
        src = source(folder.recordings)
        list(src.load(sorted(src.scan().items)))
    finally:
        opened, OPENED[:] = OPENED[1:], []
    assert any(p.endswith("meta.json") for p in opened)
    assert not [p for p in opened if p.endswith(sw.AUDIO)]


def test_missing_and_empty_folders_are_unavailable(tmp_path, monkeypatch):
    with pytest.raises(SourceUnavailable, match="does not exist"):
        source(tmp_path / "nowhere").scan()
    (tmp_path / "empty" / "recordings").mkdir(parents=True)
    with pytest.raises(SourceUnavailable, match="holds no recording folders"):
        source(tmp_path / "empty").scan()
    monkeypatch.setenv("HOME", str(tmp_path / "nobody"))
    with pytest.raises(SourceUnavailable, match="no SuperWhisper folder found"):
        source().scan()


def test_default_folders_are_probed(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    fx.write(tmp_path / "superwhisper" / "recordings", fx.DICTATION)
    assert set(source().scan().items) == {fx.DICTATION.name}


def test_cli_options(tmp_path):
    r = CliRunner().invoke(cli, ["index", "superwhisper", "--help"])
    assert r.exit_code == 0 and "--path" in r.output
    assert sw._cli_source(path=None) is None and sw._cli_source(path=tmp_path) == {"path": str(tmp_path)}


# -- end to end ------------------------------------------------------------------------------------------------


@pytest.fixture
def home(tmp_path, monkeypatch, folder):
    h = tmp_path / "home"
    h.mkdir()
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "garden.md").write_text("# Garden\n\nThe rooftop garden needs watering every Friday evening.\n")
    config = {"collections": {"voice": {"kind": "system", "sources": [{"type": "superwhisper", "path": str(folder.base)}]},
                              "notes": {"sources": [{"type": "project", "paths": [str(notes)]}]}}}
    (h / "config.yaml").write_text(yaml.safe_dump(config))
    monkeypatch.setenv("LOCAL_RAG_HOME", str(h))
    monkeypatch.setenv("DAGSTER_HOME", str(h / "dagster"))
    monkeypatch.delenv("LOCAL_RAG_DB", raising=False)
    monkeypatch.delenv("LOCAL_RAG_CONFIG", raising=False)
    yield Paths.from_env()
    resources.close_all()


def search(query: str, **filters) -> list:
    engine = SearchEngine(resources.RagResource().store(), resources.RagResource().embedder())
    return engine.search(SearchRequest(query, filters=Filters(**filters))).hits


def failures(collection: str = "voice") -> dict[str, str]:
    return {f.key: f.error_kind for f in reads.failures(resources.RagResource().store(), collection=collection, limit=50)}


def test_index_and_search(home, folder):
    before = {p: p.stat().st_mtime_ns for p in folder.base.rglob("*")}
    summary, _ = runs.index_collections(home, ["voice", "notes"])
    assert {p: p.stat().st_mtime_ns for p in folder.base.rglob("*")} == before  # nothing written there
    assert summary.outcomes == {"indexed": len(fx.INDEXED), "failed": len(fx.INCOMPLETE) + len(fx.NO_TEXT)}
    assert failures() == {**{r.name: "incomplete" for r in fx.INCOMPLETE}, **{r.name: "no_text" for r in fx.NO_TEXT}}
    hit = search("order catering for the offsite and confirm train tickets")[0]
    assert hit.key == fx.DICTATION.name and hit.uri == str(folder.recordings / fx.DICTATION.name)
    assert hit.source_type == "recording" and hit.metadata["mode"] == "Default"
    assert {h.key for h in search("who books the venue", metadata={"mode": "Meeting"})} == {fx.MEETING.name}
    week = search("garden meeting", date_from=fx.unix("2026-03-07T00:00:00"), date_to=fx.unix("2026-03-08T23:59:59"),
                  include_undated=False)
    assert {h.key for h in week} == {fx.CJK.name, fx.SUMMARY.name}
    assert search("明日の会議の資料")[0].key == fx.CJK.name
    assert {h.collection for h in search("rooftop garden watering", collections=("notes",))} == {"notes"}
    assert search("rooftop garden watering", collections=("voice",))[0].key == fx.MILLIS.name


def test_incomplete_records_are_retried_until_complete(home, folder):
    emb = HashEmbedder()
    resources._open[("embedder", load_settings(home.config).embedder.model_dump_json(), home.ollama_host)] = emb
    r = CliRunner().invoke(cli, ["index", "superwhisper", "--path", str(folder.base)], catch_exceptions=False)
    assert r.exit_code == 6 and f"voice: {len(fx.INDEXED)} indexed" in r.output, r.output  # configured, same source
    assert "[incomplete] the recording is still running" in r.output
    cfg, store = load_collections(home)["voice"], resources.RagResource().store()
    assert plan_sync(store, cfg).empty  # the sensor's view: failed items wait for a change

    fx.finish(folder.recordings, fx.PLACEHOLDER)  # the meeting ended
    fx.finish(folder.recordings, fx.TRUNCATED, result="The quarterly numbers look fine.")  # the rewrite completed
    fx.age(folder.recordings, fx.PROCESSING, sw.SETTLE_SECONDS + 60)  # never got a result: its transcript will do
    plan = plan_sync(store, cfg)
    assert sorted(plan.changed) == sorted(r.name for r in fx.INCOMPLETE) and not plan.new and not plan.deleted
    [summary] = runs.index_collections(home, ["voice"])
    assert summary.outcomes == {"indexed": 3, "failed": 2}  # the no_text ones are retried by the CLI, and fail again
    assert failures() == {r.name: "no_text" for r in fx.NO_TEXT}  # 'incomplete' did not stick
    assert {h.key for h in search("auditors arrive on Monday") if "auditors" in h.text} == {
        fx.PLACEHOLDER.name, fx.TRUNCATED.name}
    assert [h.key for h in search("landlord heating broken") if "landlord" in h.text] == [fx.PROCESSING.name]

    shutil.rmtree(folder.recordings / fx.DICTATION.name)  # a recording deleted in the app
    [summary] = runs.index_collections(home, ["voice"])
    assert summary.outcomes == {"deleted": 1, "failed": 2}
    assert fx.DICTATION.name not in reads.item_states(store, "voice")
    assert plan_sync(store, cfg).empty
    [again] = runs.index_collections(home, ["voice"])
    assert "indexed" not in again.outcomes and "deleted" not in again.outcomes
