"""NetNewsWire as a Source: accounts, keys, stamps, documents and their fallbacks, faults, and end to end through Dagster."""

from __future__ import annotations

import sqlite3
import time

import dagster as dg
import pytest
import yaml
from click.testing import CliRunner

import netnewswire_fixture as fx
from rag_pipelines.indexing import runs
from rag_pipelines.config import load_collections
from rag_pipelines.parsers.limits import Limits
from rag_pipelines.sources import appdb
from rag_pipelines.sources.base import SourceUnavailable
from rag_pipelines.sources.netnewswire import NetNewsWireOptions, NetNewsWireSource, unix_seconds
from rag_pipelines.wiring import resources
from rag_search.cli.main import cli
from rag_search.config import Paths
from rag_search.retrieval import Filters, SearchEngine, SearchRequest
from rag_search.store import reads

LOCAL = "OnMyMac"


@pytest.fixture
def accounts(tmp_path):
    return fx.build(tmp_path / "Accounts")


def source(path, limits=None, **options) -> NetNewsWireSource:
    return NetNewsWireSource(NetNewsWireOptions(type="rss", path=path, **options), limits=limits)


def documents(src: NetNewsWireSource, keys=None) -> dict:
    out = {}
    for loaded in src.load(sorted(keys or fx.EXPECTED)):
        assert loaded.error is None and not loaded.gone, (loaded.key, loaded.error)
        out[loaded.key] = (loaded, loaded.parse())
    return out


def doc(docs: dict, art: fx.Art, account: str = LOCAL):
    return docs[fx.key(account, art)][1]


@pytest.fixture
def fast_locks(monkeypatch):
    monkeypatch.setattr(appdb, "RETRIES", (0.05, 0.05))
    monkeypatch.setattr(appdb, "BUSY_MS", 50)


# -- scan ----------------------------------------------------------------------------------------------


def test_scan_lists_every_article_of_every_account_once(accounts):
    result = source(accounts.root).scan()
    # .Trash is ignored, the status row without an article is no item, the iCloud copy of VACUUM joins OnMyMac's
    assert set(result.items) == set(fx.EXPECTED) and not result.problems
    uri = {k: s.uri for k, s in result.items.items()}
    assert uri[fx.key(LOCAL, fx.POOLING)] == "https://blog.example.com/2026/03/pgbouncer"  # relative, resolved
    assert uri[fx.key(LOCAL, fx.LINKED)] == "https://other.example.org/btree"  # externalURL only
    assert uri[fx.key(LOCAL, fx.ORPHAN)] == f"netnewswire://OnMyMac/{fx.ORPHAN.id}"  # no URL at all
    assert uri[fx.ODD_KEY] == "https://unknown.example/odd" and fx.ODD_KEY.split("/")[1].startswith("~")
    assert all(len(k.encode()) <= 512 and k.isprintable() for k in result.items)
    assert source(accounts.root).scan().items == result.items  # stamps are stable


def test_path_may_be_an_account_folder_or_its_database(accounts):
    local = {fx.key(LOCAL, a) for a in fx.LOCAL}
    assert set(source(accounts.local).scan().items) == local
    assert set(source(accounts.local / "DB.sqlite3").scan().items) == local
    assert set(source(accounts.feedbin).scan().items) == {fx.key(fx.FEEDBIN, fx.PAPERCLIP), fx.ODD_KEY}
    assert set(source(accounts.icloud).scan().items) == {fx.key("2_iCloud", fx.VACUUM)}


def test_edits_stars_and_feed_renames_change_stamps_reading_does_not(accounts):
    before = source(accounts.root).scan().items
    db, vacuum, quantum = accounts.local / "DB.sqlite3", fx.key(LOCAL, fx.VACUUM), fx.key(LOCAL, fx.QUANTUM)
    fx.update(db, fx.VACUUM, read=0)
    fx.update(db, fx.QUANTUM, read=1)
    assert source(accounts.root).scan().items == before
    fx.update(db, fx.VACUUM, starred=1)
    fx.update(db, fx.QUANTUM, contentHTML="<p>Jetzt mit vollem Text über Qubits.</p>")
    after = source(accounts.root).scan().items
    assert after[vacuum].value != before[vacuum].value and after[quantum].value != before[quantum].value
    assert {k for k in before if after[k] != before[k]} == {vacuum, quantum}
    opml = accounts.local / "Subscriptions.opml"
    opml.write_text(opml.read_text(encoding="utf-8").replace("桜ニュース", "Sakura News"), encoding="utf-8")
    renamed = source(accounts.root).scan().items
    assert {k for k in after if renamed[k] != after[k]} == {fx.key(LOCAL, fx.SAKURA)}


# -- load ----------------------------------------------------------------------------------------------


def test_documents_fields_and_body_fallbacks(accounts):
    docs = documents(source(accounts.root))  # a fresh source: load scans first
    vacuum = doc(docs, fx.VACUUM)
    assert vacuum.title == "Tuning autovacuum for busy PostgreSQL tables" and vacuum.ts == fx.unix("2026-03-02T09:00:00")
    assert vacuum.author == "Ann Lee <ann.lee@example.com>" and vacuum.participants == ("Ann Lee <ann.lee@example.com>",)
    assert [s.heading_path for s in vacuum.sections] == [("Tuning autovacuum",), ("Tuning autovacuum", "Settings we changed")]
    text = "\n".join(s.text for s in vacuum.sections)
    assert "autovacuum_vacuum_scale_factor to 0.02" in text and "the docs" in text
    assert "zebrafish" not in text and "color:red" not in text and "pixel" not in text
    assert vacuum.metadata == {"feed": "Example Engineering & Ops", "feed_url": fx.BLOG, "feed_folder": "Tech/Databases",
                               "url": "https://blog.example.com/2026/03/autovacuum", "account": LOCAL,
                               "accounts": [LOCAL, "2_iCloud"], "article_id": fx.VACUUM.id, "starred": False,
                               "body": "contentHTML"}  # no `read`: reading an article must not re-index it
    loaded = docs[fx.key(LOCAL, fx.VACUUM)][0]
    assert loaded.uri == vacuum.metadata["url"] and loaded.source_type == "article" and loaded.content_hash

    quantum = doc(docs, fx.QUANTUM)  # summary only, legacy authors only, starred
    assert quantum.metadata["body"] == "summary" and quantum.sections[0].text.startswith("Forscher in München")
    assert quantum.author == "Jürgen Müller <j.mueller@zeit.example>" and quantum.tags == ("starred",)
    assert quantum.metadata["feed"] == "Meine Zeitung" and quantum.metadata["starred"] is True  # the edited name
    assert doc(docs, fx.POOLING).author == "Bob Stone"  # JSON wins over the legacy rows
    assert doc(docs, fx.GLACIER).metadata["body"] == "contentText"
    assert doc(docs, fx.GLACIER).ts == fx.unix("2026-03-11T12:00:00")  # no datePublished: dateModified
    assert doc(docs, fx.UNDATED).ts == fx.unix("2026-03-12T07:00:00")  # neither: the status's dateArrived
    assert doc(docs, fx.FUTURE).ts == fx.unix("2030-01-01T00:00:00")
    assert doc(docs, fx.MARKDOWN).metadata["body"] == "markdown" and "Readers never block" in doc(docs, fx.MARKDOWN).sections[0].text
    episode = doc(docs, fx.EPISODE)  # an empty podcast body: the title is the text
    assert episode.metadata["body"] == "none" and [s.text for s in episode.sections] == ["Episode 42: Sourdough starters"]
    assert doc(docs, fx.RUST).title == "Rust & WebAssembly at the edge"
    assert doc(docs, fx.SAKURA).author == "山田 太郎" and "開花" in doc(docs, fx.SAKURA).sections[0].text
    assert doc(docs, fx.LINKED).metadata["external_url"] == "https://other.example.org/btree"
    orphan = doc(docs, fx.ORPHAN)
    assert orphan.metadata["feed"] == "gone.example.net" and orphan.author is None and "url" not in orphan.metadata
    long = doc(docs, fx.LONG)
    assert len(long.sections) == 10 and long.sections[-1].heading_path == ("Lessons",)
    paperclip = doc(docs, fx.PAPERCLIP, fx.FEEDBIN)  # old schema; feedID 1402 → URL via FeedSettings.db → OPML
    assert paperclip.metadata["feed"] == "Kottke Daily" and paperclip.metadata["feed_folder"] == "Reading"
    assert paperclip.author == "Jason K <jason@kottke.example>"
    odd = docs[fx.ODD_KEY][1]
    assert odd.metadata["article_id"] == "entry 7 · ü" and odd.metadata["feed"] == "1999"


def test_feed_metadata_plist_maps_sync_feed_ids_when_there_is_no_settings_database(accounts):
    import plistlib

    (accounts.feedbin / "FeedSettings.db").unlink()
    key = fx.key(fx.FEEDBIN, fx.PAPERCLIP)
    assert doc(documents(source(accounts.feedbin), [key]), fx.PAPERCLIP, fx.FEEDBIN).metadata["feed"] == fx.KOTTKE_ID
    (accounts.feedbin / "FeedMetadata.plist").write_bytes(plistlib.dumps(
        {fx.KOTTKE: {"feedID": fx.KOTTKE_ID, "editedName": "Kottke (renamed)"}}, fmt=plistlib.FMT_BINARY))
    assert doc(documents(source(accounts.feedbin), [key]), fx.PAPERCLIP, fx.FEEDBIN).metadata["feed"] == "Kottke (renamed)"


def test_content_hashes_are_stable_and_follow_the_content(accounts):
    first = {k: ld.content_hash for k, (ld, _) in documents(source(accounts.root)).items()}
    assert {k: ld.content_hash for k, (ld, _) in documents(source(accounts.root)).items()} == first
    fx.update(accounts.local / "DB.sqlite3", fx.GLACIER, contentText="Die Gletscher schmelzen: neue Zahlen.")
    again = {k: ld.content_hash for k, (ld, _) in documents(source(accounts.root)).items()}
    assert {k for k in first if again[k] != first[k]} == {fx.key(LOCAL, fx.GLACIER)}


def test_a_very_long_body_is_cut_to_the_text_limit(accounts):
    key = fx.key(LOCAL, fx.LONG)
    [loaded] = source(accounts.local, limits=Limits(max_text_mb=0.001)).load([key])
    long = loaded.parse()
    assert sum(len(s.text) for s in long.sections) < 1100 and "max_text_mb" in long.metadata["parse_warning"]


def test_dates_as_the_app_stores_them():
    assert unix_seconds(1772442000.375) == 1772442000 and unix_seconds(1772442000) == 1772442000
    assert unix_seconds("1772442000.5") == 1772442000
    assert [unix_seconds(v) for v in (None, 0, 0.0, -5.0, float("nan"), "soon", b"")] == [None] * 7


def test_only_base_tables_are_read_read_only(accounts, monkeypatch):
    seen, uris, real = [], [], appdb._connect

    def traced(path):
        conn = real(path)
        uris.append(appdb.uri(path))
        conn.set_trace_callback(seen.append)
        return conn

    monkeypatch.setattr(appdb, "_connect", traced)
    documents(source(accounts.root))
    assert uris and all(u.endswith("?mode=ro") and "immutable" not in u for u in uris)
    assert not [sql for sql in seen if "search" in sql.replace("searchRowID", "")]  # the app's FTS4 table
    assert not [sql for sql in seen if sql.split()[0].upper() in ("INSERT", "UPDATE", "DELETE", "CREATE", "VACUUM")]


def test_an_article_deleted_between_scan_and_load_is_gone(accounts):
    src = source(accounts.root)
    src.scan()
    fx.delete_article(accounts.local / "DB.sqlite3", fx.DOOMED)
    [gone, kept] = src.load([fx.key(LOCAL, fx.DOOMED), fx.key(LOCAL, fx.VACUUM)])
    assert gone.gone and kept.parse().title.startswith("Tuning autovacuum")


def test_a_database_replaced_under_the_reader_is_read_afresh(accounts, tmp_path):
    src = source(accounts.root)
    src.scan()
    rebuilt = tmp_path / "rebuilt.sqlite3"  # what a compaction tool does: a new file renamed over the old one
    fx.write_db(rebuilt, [a for a in fx.LOCAL if a is not fx.DOOMED], wal=False)
    rebuilt.replace(accounts.local / "DB.sqlite3")
    [gone, kept] = src.load([fx.key(LOCAL, fx.DOOMED), fx.key(LOCAL, fx.GLACIER)])
    assert gone.gone and kept.parse().title == "Gletscher schmelzen schneller"
    assert fx.key(LOCAL, fx.DOOMED) not in src.scan().items


def test_missing_damaged_and_foreign_databases_are_unavailable(accounts, tmp_path):
    with pytest.raises(SourceUnavailable, match="does not exist"):
        source(tmp_path / "nowhere").scan()
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceUnavailable, match="holds no NetNewsWire account"):
        source(tmp_path / "empty").scan()
    (accounts.feedbin / "DB.sqlite3").write_bytes(b"this is not a database" * 100)
    with pytest.raises(SourceUnavailable, match="DB.sqlite3 is not a readable SQLite database"):
        source(accounts.root).scan()  # one bad account: the whole source waits (nothing is deleted)
    (accounts.feedbin / "DB.sqlite3").unlink()
    with sqlite3.connect(accounts.feedbin / "DB.sqlite3") as conn:
        conn.execute("CREATE TABLE other (x)")
    conn.close()
    with pytest.raises(SourceUnavailable, match="no table articles"):
        source(accounts.root).scan()


def test_a_locked_database_makes_the_source_unavailable(accounts, fast_locks):
    holder = sqlite3.connect(accounts.feedbin / "DB.sqlite3", isolation_level=None)  # a rollback journal
    holder.execute("BEGIN EXCLUSIVE")
    try:
        t0 = time.perf_counter()
        with pytest.raises(SourceUnavailable, match="stayed locked"):
            source(accounts.root).scan()
        assert time.perf_counter() - t0 < 5
        src = source(accounts.local)
        src.scan()
        assert all(ld.error is None for ld in src.load([fx.key(LOCAL, fx.VACUUM)]))  # other accounts read fine
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_cli_and_seed_key(accounts, tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(yaml.safe_dump({"netnewswire_db_path": str(accounts.local)}))
    monkeypatch.setenv("LOCAL_RAG_HOME", str(home))
    monkeypatch.delenv("LOCAL_RAG_CONFIG", raising=False)
    [src] = load_collections(Paths.from_env())["rss"].sources
    assert src.type == "rss" and src.path == accounts.local
    r = CliRunner().invoke(cli, ["index", "rss", "--help"])
    assert r.exit_code == 0 and "--path" in r.output


# -- end to end ------------------------------------------------------------------------------------------


@pytest.fixture
def home(tmp_path, monkeypatch, accounts):
    h = tmp_path / "home"
    h.mkdir()
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "garden.md").write_text("# Garden\n\nThe rooftop garden needs watering every Friday evening.\n")
    config = {"collections": {"rss": {"kind": "system", "sources": [{"type": "rss", "path": str(accounts.root)}]},
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


def test_index_and_search_while_the_app_writes(home, accounts):
    app = fx.AppWriter(accounts.local / "DB.sqlite3")  # a row only in the -wal, and an open write transaction
    try:
        before = fx.hash_tree(accounts.root)
        summary, _ = runs.index_collections(home, ["rss", "notes"])
        assert fx.hash_tree(accounts.root) == before  # every file byte for byte, -wal and -shm included
    finally:
        app.close()
    assert summary.outcomes == {"indexed": len(fx.EXPECTED) + 1} and not summary.failures and not summary.unavailable
    keys = set(reads.item_states(resources.RagResource().store(), "rss"))
    assert keys == set(fx.EXPECTED) | {fx.key(LOCAL, fx.LATE)}  # committed in the WAL: yes; uncommitted: no
    assert set(dg.DagsterInstance.get().get_dynamic_partitions("rss_items")) == keys

    vacuum = fx.key(LOCAL, fx.VACUUM)
    hit = search("how to tune autovacuum scale factor for dead tuples")[0]
    assert hit.key == vacuum and hit.uri == "https://blog.example.com/2026/03/autovacuum"
    assert hit.metadata["feed"] == "Example Engineering & Ops" and hit.source_type == "article"
    assert {h.key for h in search("autovacuum telemetry", author="ann lee")} == {vacuum, fx.key(LOCAL, fx.LONG)}
    assert {h.key for h in search("Quantenprozessor", author="müller")} == {fx.key(LOCAL, fx.QUANTUM)}
    assert {h.key for h in search("paperclip", author="jason@kottke.example")} == {fx.key(fx.FEEDBIN, fx.PAPERCLIP)}
    march_10 = search("Qubits Gletscher Alpen", date_from=fx.unix("2026-03-10T00:00:00"),
                      date_to=fx.unix("2026-03-11T23:59:59"), include_undated=False)
    assert {h.key for h in march_10} == {fx.key(LOCAL, fx.QUANTUM), fx.key(LOCAL, fx.GLACIER)}
    assert [h.key for h in search("rooftop garden sensors", collections=("rss",))][:1] == [fx.key(LOCAL, fx.LATE)]
    assert {h.collection for h in search("rooftop garden", collections=("notes",))} == {"notes"}
    assert {h.key for h in search("Kühlung Qubits", metadata={"feed": "Meine Zeitung"})} <= \
        {fx.key(LOCAL, a) for a in (fx.QUANTUM, fx.GLACIER, fx.UNDATED)}
    assert [h.key for h in search("Qubits", tags=("starred",))] == [fx.key(LOCAL, fx.QUANTUM)]
    assert search("東京の桜")[0].key == fx.key(LOCAL, fx.SAKURA)
    for word in ("zebrafish", "ferret"):  # a script's text; the uncommitted article
        assert not [h for h in search(word) if word in h.text.lower()], word


def test_a_deleted_article_leaves_the_index_on_the_next_sync(home, accounts):
    runs.index_collections(home, ["rss"])
    fx.delete_article(accounts.local / "DB.sqlite3", fx.DOOMED)
    fx.update(accounts.local / "DB.sqlite3", fx.SAKURA, read=1)  # reading is no change
    [summary] = runs.index_collections(home, ["rss"])
    assert summary.outcomes == {"deleted": 1}
    assert fx.key(LOCAL, fx.DOOMED) not in reads.item_states(resources.RagResource().store(), "rss")
    assert not [h for h in search("staging cluster marmoset") if h.key == fx.key(LOCAL, fx.DOOMED)]
    [again] = runs.index_collections(home, ["rss"])
    assert again.outcomes == {} and again.run_ids == []


def test_an_unreadable_source_keeps_what_was_indexed(home, accounts):
    runs.index_collections(home, ["rss"])
    (accounts.local / "DB.sqlite3").write_bytes(b"garbage" * 1000)
    [summary] = runs.index_collections(home, ["rss"])
    assert "not a readable SQLite database" in summary.unavailable["rss"] and summary.outcomes == {}
    accounts.root.rename(accounts.root.with_name("moved away"))
    [summary] = runs.index_collections(home, ["rss"])
    assert "does not exist" in summary.unavailable["rss"]
    assert set(reads.item_states(resources.RagResource().store(), "rss")) == set(fx.EXPECTED)


def test_cli_registers_and_indexes_an_account(home, accounts):
    r = CliRunner().invoke(cli, ["index", "rss", "--path", str(accounts.feedbin / "DB.sqlite3"), "--name", "Feedbin"],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert set(reads.item_states(resources.RagResource().store(), "Feedbin")) == {
        fx.key(fx.FEEDBIN, fx.PAPERCLIP), fx.ODD_KEY}
