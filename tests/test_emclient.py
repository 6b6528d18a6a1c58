"""eM Client mail as a Source: stores, keys, stamps, bodies and their fallbacks, faults, and end to end through Dagster."""

from __future__ import annotations

import os
import sqlite3
import time

import dagster as dg
import pytest
import yaml
from click.testing import CliRunner

import emclient_fixture as fx
from rag_pipelines.indexing import runs
from rag_pipelines.config import load_collections
from rag_pipelines.sources import appdb, emclient_db
from rag_pipelines.sources.base import SourceUnavailable
from rag_pipelines.sources.emclient import EmClientOptions, EmClientSource
from rag_pipelines.wiring import resources
from rag_search.cli.main import cli
from rag_search.config import Paths
from rag_search.retrieval import Filters, SearchEngine, SearchRequest
from rag_search.store import reads

K8S, ANGEBOT, SSD = "<k8s-plan@example.com>", "<angebot-kx500@beispiel.de>", "<ssd-order@contoso.com>"


@pytest.fixture
def mail(tmp_path):
    return fx.build(tmp_path / "eM Client")


def source(path, **options) -> EmClientSource:
    return EmClientSource(EmClientOptions(type="email", path=path, **options))


def documents(src: EmClientSource, keys=None) -> dict:
    keys = sorted(keys or fx.EXPECTED)
    out = {}
    for loaded in src.load(keys):
        assert loaded.error is None and not loaded.gone, (loaded.key, loaded.error)
        out[loaded.key] = (loaded, loaded.parse())
    return out


@pytest.fixture
def fast_locks(monkeypatch):
    monkeypatch.setattr(appdb, "RETRIES", (0.05, 0.05))
    monkeypatch.setattr(appdb, "BUSY_MS", 50)


# -- scan ----------------------------------------------------------------------------------------------


def test_scan_lists_each_message_once_across_folders_and_stores(mail):
    result = source(mail.root).scan()
    assert {k: s.uri for k, s in result.items.items() if k.startswith("<")}[K8S] == "mid:k8s-plan@example.com"
    # accounts.dat, settings.dat, the folder without mail_index.dat, the deleted-flag row, Spam and Deleted Items:
    assert set(result.items) == set(fx.EXPECTED) and not result.problems
    assert result.items[K8S].value.startswith("3:")  # INBOX + All Mail rows of one store, Inbox of the other
    assert result.items[f"row:{fx.GMAIL[0]}/{fx.GMAIL[1]}/11"].uri.startswith("emclient://")
    assert source(mail.root).scan().items == result.items  # stamps are stable
    everything = source(mail.root, exclude_folders=()).scan().items
    assert set(everything) - set(result.items) == {"<spam-1@spam.example>", "<trash-1@contoso.com>"}


def test_path_may_be_a_store_folder_or_a_file_in_it(mail):
    o365 = {k for k in fx.EXPECTED if k in (SSD, K8S, "<incident-77@contoso.com>", "<lunch-42@example.com>")}
    assert set(source(mail.o365).scan().items) == o365
    assert set(source(mail.o365 / "mail_data.dat").scan().items) == o365


def test_moves_change_the_stamp_read_flags_do_not(mail):
    before = source(mail.root).scan().items
    with sqlite3.connect(mail.o365 / "mail_index.dat") as conn:
        conn.execute("UPDATE MailItems SET flags = flags | 6")  # read + flagged
    conn.close()
    assert source(mail.root).scan().items == before
    fx.move_mail(mail.o365, 102, 2)  # RE: SSD order → Sent Items
    after = source(mail.root).scan().items
    assert after[SSD].value != before[SSD].value and after[K8S] == before[K8S]
    fx.move_mail(mail.o365, 102, 3)  # → Deleted Items: excluded, so gone
    assert SSD not in source(mail.root).scan().items


# -- load ----------------------------------------------------------------------------------------------


def test_documents_fields_and_body_fallbacks(mail):
    docs = documents(source(mail.root))  # a fresh source: load scans first
    loaded, k8s = docs[K8S]
    assert k8s.title == "Kubernetes upgrade plan" and k8s.ts == fx.unix("2026-03-02T09:00:00")
    assert k8s.author == "Ann Lee <ann.lee@example.com>"
    assert k8s.participants == ("Ann Lee <ann.lee@example.com>", "Sam Taylor <sam@example.com>",
                                "Bob Stone <bob@example.com>", "Carol Díaz <carol@example.com>", "dan@example.com")
    assert k8s.metadata["folders"] == ["INBOX", "Inbox", "[Gmail]/All Mail"] and k8s.tags == ("Work",)
    assert k8s.metadata["message_id"] == "k8s-plan@example.com" and k8s.metadata["thread"] == "conv-k8s"
    assert k8s.metadata["accounts"] == ["Gmail me"] and "Best regards" not in k8s.sections[0].text
    assert loaded.uri == "mid:k8s-plan@example.com" and loaded.source_type == "email" and loaded.content_hash
    body = {key: (doc.metadata["body_source"], doc.sections[0].text if doc.sections else "") for key, (_, doc) in docs.items()}
    assert body[ANGEBOT] == ("fti", "Sehr geehrter Herr Taylor,\nanbei unser Angebot für die Kühlanlage KX-500 mit "
                             "Wartungsvertrag. Details und Preise: https://beispiel.de/angebot/kx500?ref=mail")
    assert body["<re-k8s-bob@example.com>"] == ("fti", "Works for me, but let's take a fresh etcd snapshot right "
                                                "before draining the first node.")
    assert body["<aw-angebot@example.com>"][1].endswith("an das Lager in Leipzig.")  # German quote + sign-off gone
    assert body["<reunion@exemple.fr>"] == ("mime", "Bonjour Sam,\n\nla réunion du comité aura lieu au café Procope, "
                                            "salle de l'étage, jeudi à 18 h. Apportez le plan de la crèche.")
    assert body["<incident-77@contoso.com>"][1].endswith("Runbook: https://beispiel.de/angebot/kx500?ref=mail")
    assert body[SSD] == ("mime", "Approved: we order the two replacement SSDs for the backup server today.")
    assert body["<lunch-42@example.com>"] == ("raw", "Two falafel wraps and a lemonade for the Friday lunch, please.")
    assert body["<invite-qr@example.com>"][0] == "calendar" and "Room Aurora, 4th floor" in body["<invite-qr@example.com>"][1]
    assert body[f"row:{fx.GMAIL[0]}/{fx.GMAIL[1]}/11"] == ("preview", "Your parcel tracking number is 4711.")
    assert all(w not in text for _, text in body.values() for w in ("quoted", "Sent from my iPhone", "safelinks"))
    assert docs[SSD][1].ts == fx.unix("2026-03-10T09:30:00")  # date 0: the received date
    assert docs[f"row:{fx.GMAIL[0]}/{fx.GMAIL[1]}/11"][1].ts is None  # both dates 0
    assert docs["<reunion@exemple.fr>"][1].metadata["attachments"] == ["crèche plan.png"]
    assert docs[ANGEBOT][1].metadata["folders"] == ["INBOX", "Projekte/Kühlung"] and docs[ANGEBOT][1].tags == ("Einkauf",)


def test_small_batches_give_the_same_documents(mail, monkeypatch):
    whole = {k: (ld.content_hash, doc) for k, (ld, doc) in documents(source(mail.root)).items()}
    monkeypatch.setattr(emclient_db, "BATCH", 2)
    assert {k: (ld.content_hash, doc) for k, (ld, doc) in documents(source(mail.root)).items()} == whole


def test_only_base_and_shadow_tables_are_read_read_only(mail, monkeypatch):
    seen, uris, real = [], [], appdb._connect

    def traced(path):
        conn = real(path)
        uris.append(appdb.uri(path))
        conn.set_trace_callback(seen.append)
        return conn

    monkeypatch.setattr(appdb, "_connect", traced)
    documents(source(mail.root))
    assert uris and all(u.endswith("?mode=ro") and "immutable" not in u for u in uris)
    fts = [sql for sql in seen if "LocalMailsIndex3" in sql or "MailSubjectIndex" in sql]
    assert fts and all("LocalMailsIndex3_content" in sql for sql in fts)
    assert not [sql for sql in seen if sql.split()[0].upper() in ("INSERT", "UPDATE", "DELETE", "CREATE", "VACUUM")]


def test_a_store_rebuilt_between_scan_and_load_is_mapped_again(mail):
    src = source(mail.root)
    src.scan()
    rebuilt = mail.o365.parent / "rebuilt"
    shuffled = [fx.Mail(**{**m.__dict__, "id": 300 - m.id}) for m in fx.O365_MAILS]  # same mail, new ids
    fx.write_store(rebuilt, fx.O365_FOLDERS, shuffled, fx.O365_VARIANT, fti=False, data_index=False, wal=False)
    for name in ("mail_index.dat", "mail_data.dat"):
        os.replace(rebuilt / name, mail.o365 / name)  # renamed over the old files, as compaction does
    docs = documents(src, [SSD, "<incident-77@contoso.com>"])
    assert docs[SSD][1].title == "RE: SSD order" and docs[SSD][1].metadata["body_source"] == "mime"
    fx.delete_mail(mail.o365, 300 - 102)
    [gone] = src.load([SSD])
    assert gone.gone


def test_missing_damaged_and_empty_folders_are_unavailable(mail, tmp_path):
    with pytest.raises(SourceUnavailable, match="does not exist"):
        source(tmp_path / "nowhere").scan()
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceUnavailable, match="no eM Client mail store"):
        source(tmp_path / "empty").scan()
    (mail.o365 / "mail_index.dat").write_bytes(b"this is not a database" * 100)
    with pytest.raises(SourceUnavailable, match="mail_index.dat is not an SQLite database"):
        source(mail.root).scan()
    (mail.o365 / "mail_index.dat").unlink()
    with sqlite3.connect(mail.o365 / "mail_index.dat") as conn:
        conn.execute("CREATE TABLE Other (x)")
    conn.close()
    with pytest.raises(SourceUnavailable, match="no table MailItems"):
        source(mail.root).scan()


@pytest.mark.parametrize("store", ["o365", "gmail"])
def test_a_locked_store_makes_the_source_unavailable(mail, fast_locks, store):
    holder = sqlite3.connect(getattr(mail, store) / "mail_index.dat", isolation_level=None)
    if store == "o365":  # a rollback journal: the app commits under an EXCLUSIVE lock
        holder.execute("BEGIN EXCLUSIVE")
    else:  # WAL: the app switched to exclusive locking (maintenance) and wrote once
        holder.execute("PRAGMA locking_mode=EXCLUSIVE")
        holder.execute("BEGIN")
        holder.execute("UPDATE MailItems SET flags = flags")
        holder.execute("COMMIT")
        holder.execute("BEGIN")
    try:
        t0 = time.perf_counter()
        with pytest.raises(SourceUnavailable, match="stayed locked"):
            source(mail.root).scan()
        assert time.perf_counter() - t0 < 5
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_a_locked_body_file_gives_retryable_errors(mail, fast_locks):
    src = source(mail.root)
    src.scan()
    holder = sqlite3.connect(mail.gmail / "mail_fti.dat", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        results = {ld.key: ld for ld in src.load([K8S, SSD])}
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert results[K8S].error[0] == "unavailable" and "mail_fti.dat" in results[K8S].error[1]
    assert results[K8S].stamp == "unavailable"  # differs from the scan's: the next sync retries it
    assert results[SSD].error is None  # the other store is fine


def test_cli_and_seed_key(mail, tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(yaml.safe_dump({"emclient_db_path": str(mail.root)}))
    monkeypatch.setenv("LOCAL_RAG_HOME", str(home))
    monkeypatch.delenv("LOCAL_RAG_CONFIG", raising=False)
    [src] = load_collections(Paths.from_env())["email"].sources
    assert src.type == "email" and src.path == mail.root
    r = CliRunner().invoke(cli, ["index", "email", "--help"])
    assert r.exit_code == 0 and "--path" in r.output and "--exclude-folder" in r.output


# -- end to end ------------------------------------------------------------------------------------------


@pytest.fixture
def home(tmp_path, monkeypatch, mail):
    h = tmp_path / "home"
    h.mkdir()
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "garden.md").write_text("# Garden\n\nThe rooftop garden needs watering every Friday evening.\n")
    config = {"collections": {"email": {"kind": "system", "sources": [{"type": "email", "path": str(mail.root)}]},
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


def test_index_and_search_while_the_app_writes(home, mail):
    app = fx.AppWriter(mail.gmail)  # rows only in the -wal, and an open write transaction
    try:
        before = fx.hash_tree(mail.root)
        summary, _ = runs.index_collections(home, ["email", "notes"])
        assert fx.hash_tree(mail.root) == before  # every file byte for byte, -wal and -shm included
    finally:
        app.close()
    assert summary.outcomes == {"indexed": len(fx.EXPECTED) + 1} and not summary.failures and not summary.unavailable
    keys = set(reads.item_states(resources.RagResource().store(), "email"))
    assert keys == set(fx.EXPECTED) | {"<rooftop@example.com>"}  # committed in the WAL: yes; uncommitted: no
    instance = dg.DagsterInstance.get()
    assert set(instance.get_dynamic_partitions("email_items")) == keys
    checks = {e.dagster_event.event_specific_data.check_name: e.dagster_event.event_specific_data.passed
              for e in instance.all_logs(summary.run_ids[0])
              if e.dagster_event and e.dagster_event.event_type_value == "ASSET_CHECK_EVALUATION"}
    assert checks and all(checks.values()), checks

    assert search("etcd snapshot before draining the nodes")[0].key in (K8S, "<re-k8s-bob@example.com>")
    assert {h.key for h in search("Angebot Kühlanlage", author="jürgen")} == {ANGEBOT}
    assert {h.key for h in search("offer", author="juergen.mueller@beispiel.de")} == {ANGEBOT}
    assert {h.key for h in search("upgrade", participants=("carol@example.com",))} == {K8S}
    march_10 = search("database failover replication", date_from=fx.unix("2026-03-10T00:00:00"),
                      date_to=fx.unix("2026-03-10T23:59:59"), include_undated=False)
    assert {h.key for h in march_10} == {"<incident-77@contoso.com>", SSD}
    assert [h.key for h in search("rooftop party", collections=("email",))][:1] == ["<rooftop@example.com>"]
    assert {h.collection for h in search("rooftop", collections=("notes",))} == {"notes"}
    for quoted in ("zebrafish", "axolotl", "kangaroo", "wombat", "ferret", "platypus", "narwhal", "quokka"):
        assert not [h for h in search(quoted) if quoted in h.text.lower()], quoted
    hit = search("Kubernetes upgrade weekend", metadata={"folders": "[Gmail]/All Mail"})[0]
    assert hit.key == K8S and hit.uri == "mid:k8s-plan@example.com" and hit.metadata["message_id"] == "k8s-plan@example.com"


def test_cli_registers_and_indexes_a_data_folder(home, mail):
    r = CliRunner().invoke(cli, ["index", "email", "--path", str(mail.o365 / "mail_data.dat"), "--name", "Work mail"],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert set(reads.item_states(resources.RagResource().store(), "Work mail")) == {
        SSD, K8S, "<incident-77@contoso.com>", "<lunch-42@example.com>"}


def test_deleted_and_moved_mail_follow_on_the_next_sync(home, mail):
    runs.index_collections(home, ["email"])
    fx.delete_mail(mail.o365, 102)
    fx.move_mail(mail.gmail, 3, 6)  # the INBOX copy of the Angebot goes to Spam; the Kühlung copy stays
    [summary] = runs.index_collections(home, ["email"])
    assert summary.outcomes == {"deleted": 1, "indexed": 1}
    store = resources.RagResource().store()
    assert SSD not in reads.item_states(store, "email")
    [hit] = search("Kühlanlage Wartungsvertrag", metadata={"folders": "Projekte/Kühlung"})[:1]
    assert hit.key == ANGEBOT and hit.metadata["folders"] == ["Projekte/Kühlung"]
    [again] = runs.index_collections(home, ["email"])
    assert again.outcomes == {} and again.run_ids == []


def test_an_unreadable_source_keeps_what_was_indexed(home, mail):
    runs.index_collections(home, ["email"])
    (mail.o365 / "mail_index.dat").write_bytes(b"garbage" * 1000)
    [summary] = runs.index_collections(home, ["email"])
    assert "not an SQLite database" in summary.unavailable["email"] and summary.outcomes == {}
    moved = mail.root.with_name("moved away")
    mail.root.rename(moved)
    [summary] = runs.index_collections(home, ["email"])
    assert "does not exist" in summary.unavailable["email"]
    assert set(reads.item_states(resources.RagResource().store(), "email")) == set(fx.EXPECTED)
