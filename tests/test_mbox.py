"""Gmail Takeout mbox as a Source: the incremental table of contents, keys, labels, documents, faults, and end to
end through Dagster (a growing file syncs only its new bytes; a new export is reconciled by Message-ID)."""

from __future__ import annotations

import os

import dagster as dg
import pytest
import yaml
from click.testing import CliRunner

import mbox_fixture as fx
from fakes import HashEmbedder
from rag_pipelines.indexing import runs
from rag_pipelines.config import load_collections
from rag_pipelines.parsers.limits import Limits
from rag_pipelines.indexing.scan import open_sources
from rag_pipelines.sources import mbox
from rag_pipelines.sources.mbox import index as mbox_index
from rag_pipelines.sources.base import SourceUnavailable
from rag_pipelines.sources.mbox import GmailOptions, GmailSource
from rag_pipelines.sources.mbox.envelope import envelope_time
from rag_pipelines.wiring import resources
from rag_search.cli.main import cli
from rag_search.config import Paths, load_settings
from rag_search.retrieval import Filters, SearchEngine, SearchRequest
from rag_search.store import reads


@pytest.fixture(autouse=True)
def local_home(tmp_path, monkeypatch):
    """Sidecars go to a temp home; the process-wide tables of contents start empty."""
    monkeypatch.setenv("LOCAL_RAG_HOME", str(tmp_path / "rag-home"))
    monkeypatch.setattr(mbox, "_TOCS", {})


@pytest.fixture
def export(tmp_path):
    return fx.build(tmp_path / "export")


def source(path, limits=None, **options) -> GmailSource:
    return GmailSource(GmailOptions(type="gmail", path=path, **options), limits=limits)


def documents(src: GmailSource, keys=None) -> dict:
    keys = sorted(keys or src.scan().items)
    out = {}
    for loaded in src.load(keys):
        assert loaded.error is None and not loaded.gone, (loaded.key, loaded.error)
        out[loaded.key] = loaded.parse()
    return out


def text(doc) -> str:
    return "\n".join(s.text for s in doc.sections)


def nomid_key(keys) -> str:
    [key] = [k for k in keys if k.startswith("nomid:")]
    return key


# -- scan --------------------------------------------------------------------------------------------------


def test_scan_lists_each_message_once_without_spam_and_trash(export):
    result = source(export.all_mail).scan()
    keys = set(result.items)
    assert keys - {nomid_key(keys)} == {m.key for m in fx.KEYED} and not result.problems
    assert result.items[fx.PLAN.key].uri == "mid:offsite-plan@example.com"
    assert result.items[nomid_key(keys)].uri.endswith(f"{fx.ALL_MAIL}#{fx.NOMID.gmail_id}")
    assert all(len(k) <= 200 and k.isprintable() for k in keys)
    assert source(export.all_mail).scan().items == result.items  # stable across sources and processes


def test_excluded_labels_are_an_option(export):
    everything = source(export.all_mail, exclude_labels=[]).scan().items
    assert {"<spam-1@spam.example>", "<trash-1@example.com>"} <= set(everything)
    no_chat = source(export.all_mail, exclude_labels=["chat", "Spam", "Trash"]).scan().items
    assert fx.CHAT.key not in no_chat and fx.PLAN.key in no_chat


def test_a_folder_holds_several_mbox_files_and_copies_are_one_item(export):
    src = source(export.root)  # the unpacked archive: Takeout/Mail/*.mbox found below it, the .html ignored
    keys = set(src.scan().items)
    assert fx.ROADMAP.key in keys and fx.PLAN.key in keys and len(src.updates) == 2
    plan = documents(src, [fx.PLAN.key])[fx.PLAN.key]
    # labels of both copies; the read-state ones (Opened, IMAP_$NotJunk) are no tags
    assert plan.tags == ("Inbox", "Important", "Label, with comma", "Work/Projects", "Starred")
    assert set(source(export.label_file).scan().items) == {fx.PLAN.key, fx.ROADMAP.key}


# -- documents ----------------------------------------------------------------------------------------------


def test_documents_fields(export):
    docs = documents(source(export.all_mail))
    plan = docs[fx.PLAN.key]
    assert plan.title == "Offsite in March: venue decision" and plan.ts == fx.unix("2026-03-03T08:15:00")
    assert plan.author == "Ann Example <ann@example.com>"
    assert plan.participants == ("Ann Example <ann@example.com>", "Me Myself <me@gmail.com>",
                                 "Bob Stone <bob@example.org>", "Jürgen Müller <j.mueller@beispiel.de>")
    assert "lakeside lodge in Bavaria" in text(plan)
    assert "zebrafish" not in text(plan) and "Head of Operations" not in text(plan)  # quote and signature
    assert plan.metadata["thread"] == "1771000000000000001" and plan.metadata["message_id"] == "offsite-plan@example.com"
    assert plan.metadata["in_reply_to"] == "offsite-ask@example.org" and plan.metadata["body_source"] == "plain"
    assert plan.metadata["gmail_id"] == fx.PLAN.gmail_id and plan.metadata["mbox"] == fx.ALL_MAIL

    latin = docs[fx.LATIN.key]  # base64 ISO-8859-1 (really windows-1252: the euro sign)
    assert latin.title == "Angebot Kühlanlage für die Halle" and latin.author == "Jürgen Müller <j.mueller@beispiel.de>"
    assert "Kühlanlage der Lagerhalle in München" in text(latin) and "1.200 € im Jahr" in text(latin)
    qp = docs[fx.QP.key]
    assert qp.title == "Café meetup ☕" and "café near the station" in text(qp) and "📊 with all numbers" in text(qp)
    assert qp.participants == ("Me Myself <me@gmail.com>", "Doe, Jane <jane@x.org>") and qp.tags == ("Sent",)
    assert qp.ts == fx.unix("2026-03-05T13:30:00")
    html = docs[fx.HTML.key]
    assert "rooftop garden workshop" in text(html) and html.metadata["body_source"] == "html"
    assert "axolotl" not in text(html) and "Example News Team" not in text(html) and "color" not in text(html)
    assert html.tags == ("Inbox", "Label, with comma")  # Unread is no tag
    bogus = docs[fx.BADCHARSET.key]  # raw 8-bit Latin-1 under an unknown charset, and in the Subject
    assert bogus.title == "Réunion déplacée" and "la réunion du comité est déplacée à jeudi" in text(bogus)
    mixed = docs[fx.MIXED.key]  # a windows-1252 part; attachments named, not read
    assert "attached résumé" in text(mixed) and "rose 12 % – mostly the offsite" in text(mixed)
    assert mixed.metadata["attachments"] == ["Q1 report.pdf", "nötes.txt"] and "ferret" not in text(mixed)
    escaped = text(docs[fx.ESCAPED.key])
    assert "\nFrom the archive: ledgers from 1923" in escaped and ">From the archive" not in escaped
    assert "From the desk of Carol" in escaped and "and the message goes on after it." in escaped
    assert docs[fx.CHAT.key].tags == ("Chat",) and "noodle bar" in text(docs[fx.CHAT.key])
    invite = docs[fx.INVITE.key]
    assert invite.metadata["body_source"] == "calendar" and "When: 2026-03-18 15:00" in text(invite)
    winmail = docs[fx.WINMAIL.key]
    assert winmail.tags == ("Projekte/Kühlung", "Inbox") and winmail.metadata["attachments"] == ["winmail.dat"]
    nomid = docs[nomid_key(docs)]  # no Message-ID, no Date: the Received hop's time
    assert nomid.title == "Disk almost full on build server" and nomid.ts == fx.unix("2026-03-13T06:30:00")
    assert nomid.metadata["date_source"] == "received" and "message_id" not in nomid.metadata
    baddate = docs[fx.BADDATE.key]  # an invalid Date and no Received: the From_ line's
    assert baddate.ts == fx.unix("2026-03-14T09:00:00") and baddate.metadata["date_source"] == "envelope"
    a, b = docs[fx.DUP_A.key], docs[fx.DUP_B.key]  # one Message-ID in two threads: two messages
    assert (a.title, b.title) == ("Your parcel shipped", "Your invoice")


def test_mboxrd_unescaping_removes_one_quote_mark(export):
    [doc] = documents(source(export.all_mail, strip_quotes=False), [fx.ESCAPED.key]).values()
    assert "\n>From a quoted mbox: kept with one quote mark." in text(doc)


def test_lf_and_crlf_files_give_the_same_documents(tmp_path):
    (tmp_path / "crlf.mbox").write_bytes(fx.mbox_bytes(fx.MESSAGES, crlf=True))
    (tmp_path / "lf.mbox").write_bytes(fx.mbox_bytes(fx.MESSAGES, crlf=False))
    crlf, lf = documents(source(tmp_path / "crlf.mbox")), documents(source(tmp_path / "lf.mbox"))
    assert crlf.keys() == lf.keys() and len(crlf) == len(fx.KEYED) + 1
    for key in crlf:
        assert (crlf[key].title, text(crlf[key]), crlf[key].ts) == (lf[key].title, text(lf[key]), lf[key].ts), key


def test_content_hashes_follow_the_content_not_the_read_state(export):
    def hashes():
        src = source(export.all_mail)
        return {ld.key: ld.content_hash for ld in src.load(sorted(src.scan().items))}

    first = hashes()
    data = export.all_mail.read_bytes()
    export.all_mail.write_bytes(data.replace(b"Inbox,Important,", b"Inbox,Important,Unread,")  # read state only
                                .replace(b"Inbox,Category Updates", b"Inbox,Category Updates,Starred"))
    again = hashes()
    assert {k for k in first if again[k] != first[k]} == {fx.LATIN.key}


def test_envelope_dates():
    assert envelope_time(b"From 123@xxx Tue Mar 03 08:15:00 +0000 2026") == fx.unix("2026-03-03T08:15:00")
    assert envelope_time(b"From MAILER-DAEMON Fri Jul  8 12:08:34 2011") == fx.unix("2011-07-08T12:08:34")
    assert envelope_time(b"From 1@xxx Tue Mar 03 08:15:00 +0100 2026") == fx.unix("2026-03-03T07:15:00")
    assert envelope_time(b"From nobody Foo Bar 99 99:99:99 2026") is None


# -- the table of contents -----------------------------------------------------------------------------------


def test_block_boundaries_do_not_change_the_table_of_contents(export, monkeypatch):
    whole, _ = mbox_index.update(export.all_mail, None)
    for block in (7, 64, 1000):
        monkeypatch.setattr(mbox_index, "BLOCK", block)
        monkeypatch.setattr(mbox_index, "HEADER_MAX", 700)
        small, _ = mbox_index.update(export.all_mail, None)
        monkeypatch.setattr(mbox_index, "HEADER_MAX", 64 * 1024)
        assert [r[:2] for r in small.records] == [r[:2] for r in whole.records], block
    assert len(whole.records) == len(fx.MESSAGES)  # the From_-like body lines started no message


def test_a_grown_file_is_parsed_from_its_old_end(export):
    src = source(export.all_mail)
    before = src.scan().items
    new = fx.generated(0, 3)
    appended = fx.append(export.all_mail, new)
    after = src.scan().items
    upd = src.updates[str(export.all_mail)]
    assert (upd.mode, upd.bytes_parsed, upd.new) == ("grown", appended, 3)
    assert upd.bytes_checked == 3 * mbox_index.SAMPLE + 1  # the old first and last KB, a byte, the new last KB
    assert set(after) - set(before) == {m.key for m in new} and all(after[k] == before[k] for k in before)
    assert after == source(export.all_mail).scan().items  # the items added to equal the items built afresh
    loaded_before = src.bytes_loaded
    docs = documents(src, [m.key for m in new])
    assert src.bytes_loaded - loaded_before <= appended and docs["<gen-1@example.com>"].title == "Digest number 1"
    assert src.scan().items == after and src.updates[str(export.all_mail)].mode == "unchanged"


def test_appended_copies_and_clashing_ids_give_the_items_a_full_scan_gives(export):
    src = source(export.mail)
    src.scan()
    fx.append(export.all_mail, [fx.ROADMAP, *fx.generated(0, 1)])  # a second copy of a message of the other file
    grown = src.scan().items
    assert grown == source(export.mail).scan().items  # a new source groups every record afresh
    assert grown[fx.ROADMAP.key].value.startswith("2:") and src.updates[str(export.all_mail)].mode == "grown"
    older = fx.Msg("older", "", fx.DUP_B.raw.replace(b"1771000000000000016", b"1771000000000000001"))
    fx.append(export.all_mail, [older])  # the same Message-ID in an older thread: it takes the plain key
    again = src.scan().items
    assert again == source(export.mail).scan().items
    assert {"<same-id@broken.example>#1771000000000000015", fx.DUP_B.key} <= set(again)


def test_a_message_still_being_written_is_parsed_again_when_it_ends(tmp_path):
    path, data = tmp_path / "mail.mbox", fx.mbox_bytes(fx.MESSAGES)
    cut = data.index(b"Feed the sourdough")  # BADDATE's body is being written
    path.write_bytes(data[:cut])
    src = source(path)
    partial = {k: s.value for k, s in src.scan().items.items()}
    with path.open("ab") as fh:
        fh.write(data[cut:])
    grown = {k: s.value for k, s in src.scan().items.items()}
    upd = src.updates[str(path)]
    assert upd.mode == "grown" and upd.parsed_from < cut  # from the start of the unfinished message
    (tmp_path / "whole.mbox").write_bytes(data)
    assert grown == {k: s.value for k, s in source(tmp_path / "whole.mbox").scan().items.items()}
    assert partial[fx.BADDATE.key] != grown[fx.BADDATE.key]  # its stamp covers its length


def test_a_fresh_process_reads_the_sidecar_not_the_file(export):
    source(export.all_mail).scan()
    mbox._TOCS.clear()  # as in a new process
    src = source(export.all_mail)
    src.scan()
    assert src.updates[str(export.all_mail)].mode == "unchanged" and src.bytes_parsed == 0
    mbox._TOCS.clear()
    appended = fx.append(export.all_mail, fx.generated(0, 2))
    src = source(export.all_mail)
    assert len(src.scan().items) == len(fx.KEYED) + 1 + 2 and src.bytes_parsed == appended
    assert (Paths.from_env().home / "cache" / "mbox-toc.sqlite").exists()


def test_a_new_export_is_parsed_again_and_unchanged_messages_keep_their_stamps(export):
    src = source(export.all_mail)
    before = src.scan().items
    kept = [m for m in fx.MESSAGES if m is not fx.CHAT]
    kept.reverse()  # a new export may order messages differently
    relabelled = fx.Msg("latin", fx.LATIN.key, fx.LATIN.raw.replace(b"Inbox,Category Updates", b"Category Updates"))
    new = export.all_mail.with_name("new.mbox")
    new.write_bytes(fx.mbox_bytes([relabelled if m is fx.LATIN else m for m in kept]))
    new.replace(export.all_mail)
    after = src.scan().items
    assert src.updates[str(export.all_mail)].mode == "full"
    assert set(before) - set(after) == {fx.CHAT.key} and set(after) <= set(before)
    assert {k for k in after if after[k] != before[k]} == {fx.LATIN.key}
    # rewritten in place with the same size (another label of the same length): parsed again as well
    export.all_mail.write_bytes(export.all_mail.read_bytes().replace(b"X-Gmail-Labels: Sent", b"X-Gmail-Labels: Sant"))
    os.utime(export.all_mail, ns=(1, 1))
    assert src.scan().items[fx.QP.key] != after[fx.QP.key] and src.updates[str(export.all_mail)].mode == "full"


def test_a_file_replaced_between_scan_and_load_is_read_again(export):
    src = source(export.all_mail)
    src.scan()
    tmp = export.all_mail.with_name("tmp.mbox")
    tmp.write_bytes(fx.mbox_bytes(list(reversed([m for m in fx.MESSAGES if m is not fx.CHAT]))))
    tmp.replace(export.all_mail)
    loaded = {ld.key: ld for ld in src.load([fx.PLAN.key, fx.CHAT.key])}
    assert loaded[fx.CHAT.key].gone and loaded[fx.PLAN.key].parse().title == "Offsite in March: venue decision"


def test_missing_foreign_and_huge_inputs(export, tmp_path):
    with pytest.raises(SourceUnavailable, match="does not exist"):
        source(tmp_path / "nowhere").scan()
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceUnavailable, match="holds no mail file"):
        source(tmp_path / "empty").scan()
    (tmp_path / "empty" / "notes.mbox").write_text("Dear diary,\nnot an mbox\n")  # one failed item, not a lost source
    result = source(tmp_path / "empty").scan()
    [(kind, why)] = result.problems.values()
    assert list(result.problems) == ["file:notes.mbox"] and result.items == {} and kind == "unsupported"
    assert "is not an mbox file: it does not start with a `From ` envelope line (its first line is 'Dear diary,')" in why
    assert "move the file out of" in why
    (tmp_path / "empty" / "notes.mbox").write_bytes(b"")  # a label without mail
    assert source(tmp_path / "empty").scan() == mbox.ScanResult()
    [big] = source(export.all_mail, limits=Limits(max_file_mb=0.0001)).load([fx.PLAN.key])
    assert big.error[0] == "too_large" and "max_file_mb" in big.error[1]


def test_cli_options():
    r = CliRunner().invoke(cli, ["index", "gmail", "--help"])
    assert r.exit_code == 0 and "--path" in r.output and "--include-spam-trash" in r.output
    assert mbox._cli_source(path=None) is None
    assert mbox._cli_source(path="/x.mbox", include_all=True) == {"path": "/x.mbox", "exclude_labels": []}


# -- end to end ------------------------------------------------------------------------------------------------


@pytest.fixture
def home(tmp_path, monkeypatch, export):
    h = tmp_path / "home"
    h.mkdir()
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "garden.md").write_text("# Garden\n\nThe rooftop garden needs watering every Friday evening.\n")
    config = {"collections": {"gmail": {"kind": "system", "sources": [{"type": "gmail", "path": str(export.mail)}]},
                              "notes": {"sources": [{"type": "project", "paths": [str(notes)]}]}}}
    (h / "config.yaml").write_text(yaml.safe_dump(config))
    monkeypatch.setenv("LOCAL_RAG_HOME", str(h))
    monkeypatch.setenv("DAGSTER_HOME", str(h / "dagster"))
    monkeypatch.delenv("LOCAL_RAG_DB", raising=False)
    monkeypatch.delenv("LOCAL_RAG_CONFIG", raising=False)
    yield Paths.from_env()
    resources.close_all()


@pytest.fixture
def fake(home) -> HashEmbedder:
    """The pipeline embeds with a HashEmbedder (it records every batch it is asked for)."""
    emb = HashEmbedder()
    resources._open[("embedder", load_settings(home.config).embedder.model_dump_json(), home.ollama_host)] = emb
    return emb


def search(query: str, **filters) -> list:
    engine = SearchEngine(resources.RagResource().store(), resources.RagResource().embedder())
    return engine.search(SearchRequest(query, filters=Filters(**filters))).hits


def gmail_source(paths) -> GmailSource:
    return open_sources(load_collections(paths)["gmail"])[0]  # the object the runs of this process use


def test_index_and_search(home, export):
    before = fx.hash_tree(export.root)
    summary, _ = runs.index_collections(home, ["gmail", "notes"])
    assert fx.hash_tree(export.root) == before  # the export is never written
    keys = set(reads.item_states(resources.RagResource().store(), "gmail"))
    assert summary.outcomes == {"indexed": len(keys)} and not summary.failures and not summary.unavailable
    assert keys - {nomid_key(keys)} == {m.key for m in fx.KEYED} | {fx.ROADMAP.key}
    assert set(dg.DagsterInstance.get().get_dynamic_partitions("gmail_items")) == keys

    hit = search("where will the March offsite take place")[0]
    assert hit.key == fx.PLAN.key and hit.uri == "mid:offsite-plan@example.com" and hit.source_type == "email"
    assert {h.key for h in search("offsite", participants=("bob@example.org",))} <= {fx.PLAN.key, fx.MIXED.key, fx.CHAT.key}
    assert fx.MIXED.key in {h.key for h in search("Q1 budget travel costs", participants=("Bob@Example.org",))}
    assert {h.key for h in search("Kühlanlage Angebot", author="jürgen")} == {fx.LATIN.key}
    early_march = search("offsite Angebot café", date_from=fx.unix("2026-03-03T00:00:00"),
                         date_to=fx.unix("2026-03-04T23:59:59"), include_undated=False)
    assert {h.key for h in early_march} == {fx.PLAN.key, fx.LATIN.key}
    assert {h.key for h in search("roadmap offsite budget", tags=("work/projects",))} == {
        fx.PLAN.key, fx.MIXED.key, fx.ROADMAP.key}
    assert {h.key for h in search("Wartungsvertrag", tags=("#projekte",))} == {fx.WINMAIL.key}  # nested label
    assert {h.collection for h in search("rooftop garden", collections=("notes",))} == {"notes"}
    assert {h.key for h in search("rooftop garden workshop", collections=("gmail",))} >= {fx.HTML.key}
    for word in ("narwhal", "quokka", "ferret", "zebrafish", "axolotl"):  # spam, trash, attachment, quote
        assert not [h for h in search(word) if word in h.text.lower()], word


def test_a_growing_mbox_syncs_only_its_appended_bytes(home, export, fake):
    r = CliRunner().invoke(cli, ["index", "gmail", "--path", str(export.mail)], catch_exceptions=False)
    assert r.exit_code == 0 and f"gmail: {len(fx.KEYED) + 2} indexed" in r.output, r.output  # configured, same source
    src = gmail_source(home)
    parsed, loaded, fake.calls[:] = src.bytes_parsed, src.bytes_loaded, []
    new = fx.generated(0, 4, words=("heliotrope",))
    appended = fx.append(export.all_mail, new)
    [summary] = runs.index_collections(home, ["gmail"])
    assert summary.outcomes == {"indexed": 4} and len(summary.run_ids) == 1
    assert src.bytes_parsed - parsed == appended  # every scan of the sync (plan, run, checks) included
    assert src.bytes_loaded - loaded == sum(len(fx.mbox_bytes([m]).rstrip(b"\r\n")) for m in new)  # the new ones
    assert sum(fake.calls) == 4  # one chunk per new message; nothing else embedded again
    assert {h.key for h in search("heliotrope", collections=("gmail",)) if "heliotrope" in h.text} == {m.key for m in new}
    [again] = runs.index_collections(home, ["gmail"])
    assert again.outcomes == {} and again.run_ids == [] and src.bytes_parsed - parsed == appended


def test_a_new_export_is_reconciled_by_message_id_and_an_unreadable_one_changes_nothing(home, export, fake):
    runs.index_collections(home, ["gmail"])
    fake.calls[:] = []
    relabelled = fx.Msg("latin", fx.LATIN.key, fx.LATIN.raw.replace(b"Inbox,Category Updates", b"Category Updates"))
    kept = [relabelled if m is fx.LATIN else m for m in reversed(fx.MESSAGES) if m is not fx.CHAT]
    tmp = export.mail / "download.part"
    tmp.write_bytes(fx.mbox_bytes(kept))
    tmp.replace(export.all_mail)
    [summary] = runs.index_collections(home, ["gmail"])
    assert summary.outcomes == {"deleted": 1, "indexed": 1}  # the chat left; the relabelled message's tags changed
    assert fake.calls == []  # its text was embedded before: nothing is embedded again
    store = resources.RagResource().store()
    assert fx.CHAT.key not in reads.item_states(store, "gmail")
    assert not [h for h in search("noodle bar") if h.key == fx.CHAT.key]
    assert [h.key for h in search("Kühlanlage", tags=("inbox",)) if h.key == fx.LATIN.key] == []
    [again] = runs.index_collections(home, ["gmail"])
    assert again.outcomes == {} and again.run_ids == []

    indexed = set(reads.item_states(store, "gmail"))  # an unreadable export keeps what was indexed
    export.all_mail.write_bytes(b"garbage\n" * 100)
    [summary] = runs.index_collections(home, ["gmail"])
    assert summary.outcomes == {"failed": 1} and not summary.unavailable  # the other file is still read
    [failure] = summary.failures
    assert failure["key"] == f"file:{fx.ALL_MAIL}" and "not an mbox file" in failure["message"], failure
    assert set(reads.item_states(store, "gmail")) == indexed | {f"file:{fx.ALL_MAIL}"}
    indexed.add(f"file:{fx.ALL_MAIL}")
    export.root.rename(export.root.with_name("moved away"))
    [summary] = runs.index_collections(home, ["gmail"])
    assert "does not exist" in summary.unavailable["gmail"]
    assert set(reads.item_states(store, "gmail")) == indexed
