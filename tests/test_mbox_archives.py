"""mbox files that are not Takeout's (issue 23): mailing list archives and other writers' envelope lines, a bad file
among good ones, broken base64 in headers and attachments, a message the email package cannot parse.

Real samples: `fixtures/mail/bigbang-dev-test.txt` is a Mailman pipermail archive kept as it was published in
datactive/bigbang (tests/data/bigbang-dev-test.txt; MIT licence). The generated files reproduce the shapes of:
datactive/bigbang tests/data/2001-November.txt (pipermail, numpy-discussion; MIT),
markov2/perl5-Mail-Box t/folders/mbox.src (`From x Wed Feb  9 22:02 MET 2000`; Perl licence),
Perl-Email-Project/Email-Folder t/mboxes/mboxcl2 and mboxcl3 (an RFC 5322 date in the envelope, Content-Length,
an unescaped `From perl5-porters:` body line; Perl licence), mozilla/releases-comm-central
mailnews/base/src/MboxMsgOutputStream.cpp (Thunderbird: `From - <asctime>`, CRLF, nested `>From` quoting; MPL 2.0).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

import mbox_fixture as fx
from fakes import HashEmbedder
from hostile import mail as hostile
from rag_pipelines.indexing import runs
from rag_pipelines.parsers.mail_headers import decode_header_value
from rag_pipelines.parsers.rfc822 import mail_record
from rag_pipelines.sources import mbox
from rag_pipelines.sources.mbox import index as mbox_index
from rag_pipelines.sources.mbox import GmailOptions, GmailSource
from rag_pipelines.sources.mbox.envelope import envelope_time, parse
from rag_pipelines.wiring import resources
from rag_search.cli.main import cli
from rag_search.config import Paths
from rag_search.store import reads

BIGBANG = Path(__file__).parent / "fixtures" / "mail" / "bigbang-dev-test.txt"


@pytest.fixture(autouse=True)
def local_home(tmp_path, monkeypatch):
    monkeypatch.setenv("LOCAL_RAG_HOME", str(tmp_path / "rag-home"))
    monkeypatch.setattr(mbox, "_TOCS", {})
    monkeypatch.setattr(mbox, "_BROKEN", {})


def source(path, **options) -> GmailSource:
    return GmailSource(GmailOptions(type="gmail", path=path, **options))


def documents(src: GmailSource) -> dict:
    out = {}
    for loaded in src.load(sorted(src.scan().items)):
        assert loaded.error is None and not loaded.gone, (loaded.key, loaded.error)
        out[loaded.key] = loaded.parse()
    return out


# -- envelope lines ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("line, when", [
    (b"From 1771000000000000011@xxx Tue Mar 03 08:15:00 +0000 2026", "2026-03-03T08:15:00"),  # Takeout
    (b"From goran at domain.com  Wed Dec  1 08:26:40 2010", "2010-12-01T08:26:40"),  # pipermail
    (b"From jjl at pobox.com  Thu Nov  1 11:19:12 2001", "2001-11-01T11:19:12"),  # bigbang 2001-November.txt
    (b"From MAILER-DAEMON Mon Jan  1 00:00:00 2024", "2024-01-01T00:00:00"),  # Python's mailbox, mutt
    (b"From - Sat Jan 03 01:05:34 1996", "1996-01-03T01:05:34"),  # Thunderbird
    (b"From magick-owner@unca-don.wizards.dupont.com Wed Feb  9 22:02 MET 2000", "2000-02-09T22:02:00"),  # Mail::Box
    (b"From daemon@orphan.zombinet Sun, 11 Nov 2007 06:58:35 +0200", "2007-11-11T04:58:35"),  # Email-Folder mboxcl3
    ('From "Jörg Müller" <jm@beispiel.de> Mon Jan  1 09:30:00 2024'.encode(), "2024-01-01T09:30:00"),  # quoted UTF-8
    ("From J\xf6rg.M\xfcller@beispiel.de Mon Jan  1 09:30:00 2024".encode("latin-1"), "2024-01-01T09:30:00"),  # 8-bit
    (b"From ann@example.com Mon Jan  1 09:30:00 2024 +0100", "2024-01-01T08:30:00"),  # a zone after the year
    (b"From ann@example.com Mon Jan  1 09:30:00 MET DST 2024", "2024-01-01T09:30:00"),
    (b"From uucp!ann Mon Jan  1 09:30 2024 remote from uunet", "2024-01-01T09:30:00"),
])
def test_envelope_lines_as_their_writers_write_them(line, when, tmp_path):
    assert parse(line) is not None and envelope_time(line + b"\r\n") == fx.unix(when)
    path = tmp_path / "two.mbox"
    first = line + b"\nSubject: one\n\nFirst body.\n\n"
    path.write_bytes(first + line + b"\nSubject: two\n\nSecond body.\n")
    assert [r.offset for r in mbox_index.update(path, None)[0].records] == [0, len(first)]


@pytest.mark.parametrize("line", [
    b"From the desk of Carol: please scan the ledger pages.", b"From perl5-porters:", b"From here",
    b"From: Ann <ann@example.com>", b">From the archive: ledgers from 1923", b"From 2002 on it is the default.",
    b"From x Mon Jan 41 09:30:00 2024", b"From x Mon Jan  1 25:30:00 2024", b"From x Mon Jan  1 09:30:00 1066",
    b"From " + b"x" * 1200 + b" Mon Jan  1 09:30:00 2024",
])
def test_body_lines_are_no_envelopes(line):
    assert parse(line) is None


def test_an_envelope_starts_a_message_only_after_an_empty_line_and_before_a_header(tmp_path):
    path = tmp_path / "list.mbox"
    path.write_bytes(b"From ann at example.com  Mon Jan  1 09:30:00 2024\nFrom: ann at example.com (Ann)\n"
                     b"Subject: one\n\nBody.\nFrom bob Mon Jan  1 10:00:00 2024\nnot after an empty line\n\n"
                     b"From bob Mon Jan  1 10:00:00 2024\nnot before a header\n\n"
                     b"From bob at example.com  Mon Jan  1 11:00:00 2024\nFrom: bob at example.com (Bob)\n"
                     b"Subject: two\n\nBody two.\n")
    toc, _ = mbox_index.update(path, None)
    assert len(toc.records) == 2 and toc.records[0].gmail_id == "ann at example.com"


# -- archives -----------------------------------------------------------------------------------------------------


def test_a_real_pipermail_archive_indexes_every_post_with_its_author(tmp_path):
    folder = tmp_path / "bigbang-dev"
    folder.mkdir()
    shutil.copy(BIGBANG, folder / "2014-November.txt")
    (folder / "README.txt").write_text("Downloaded from the list's archive page.\n")  # a .txt that is no mail
    src = source(folder)
    result = src.scan()
    assert len(result.items) == 6 and not result.problems
    docs = documents(src)
    first = docs["<CAEYE9Ofmt3TJu2sFOUspRW4v5tx7aY6fbEVnFPvheEbf6iVekA@mail.gmail.com>"]
    assert first.title == "[Bigbang-dev] test" and first.author == "Sebastian Benthall <sb@ischool.berkeley.edu>"
    assert first.ts == fx.unix("2014-11-08T19:37:32") and first.metadata["mbox"] == "2014-November.txt"
    assert "gmail_id" not in first.metadata and first.participants == (first.author,)
    reply = docs["<CAEYE9Ofr7xoECKDga8vL40fm02S7pH=Byj5P=NFhaEzbtQq6WQ@mail.gmail.com>"]
    assert reply.metadata["in_reply_to"] == "CAEYE9Ofmt3TJu2sFOUspRW4v5tx7aY6fbEVnFPvheEbf6iVekA@mail.gmail.com"
    assert "this is a reply to the earlier test message" in reply.sections[0].text


def other_writers() -> list[tuple[str, bytes]]:
    """Files as other writers make them (shapes from the repositories named in the module docstring)."""
    mail_box = (b"From magick-owner@unca-don.wizards.dupont.com Wed Feb  9 22:02 MET 2000\n"
                b"From: magick-owner@unca-don.wizards.dupont.com\nSubject: ImageMagick 5.1.1 released\n\n"
                b"Version 5.1.1 fixes the GIF encoder.\n\n"
                b"From magick-owner@unca-don.wizards.dupont.com Wed Feb 23 17:28 MET 2000\n"
                b"From: magick-owner@unca-don.wizards.dupont.com\nSubject: mailing list moved\n\n"
                b"The list moves to a new host.\n")
    mboxcl = (b"From daemon@orphan.zombinet Sun, 11 Nov 2007 06:58:35 +0200\nFrom: <daemon@orphan.zombinet>\n"
              b"Subject: [Samhain at orphan.zombinet] CRIT\nMessage-Id: <E1Ir4u3@orphan.zombinet>\n"
              b"Content-Length: 86\n\nThe policy check found a changed resolv.conf.\n"
              b"From perl5-porters:\nthe line above is body text\n")
    thunderbird = (b"From - Sat Jan 03 01:05:34 1996\r\nFrom: Ann <ann@example.com>\r\nSubject: Quoting\r\n"
                   b"Date: Sat, 03 Jan 1996 01:05:34 +0000\r\nMessage-ID: <tb-1@example.com>\r\n\r\n"
                   b"The next lines were escaped:\r\n>From here on it is body.\r\n>>From here too.\r\n\r\n")
    senders = ('From "Jörg Müller" <jm@beispiel.de> Mon Jan  1 09:30:00 2024\n'.encode() +
               b"From: =?utf-8?q?J=C3=B6rg_M=C3=BCller?= <jm@beispiel.de>\nSubject: Angebot\n\nDas Angebot steht.\n\n" +
               "From J\xf6rg Mon Jan  1 10:30:00 2024\n".encode("latin-1") +
               b"From: jm@beispiel.de\nSubject: Nachtrag\n\nNoch ein Punkt.\n\n"
               b"From MAILER-DAEMON Mon Jan  1 11:30 2024\nFrom: Mail Delivery System <MAILER-DAEMON@example.com>\n"
               b"Subject: Undelivered Mail Returned to Sender\n\nThe mail could not be delivered.\n")
    return [("2001-November.txt", hostile.pipermail_archive()), ("mbox-src", mail_box), ("mboxcl3.mbox", mboxcl),
            ("Local Folders/Inbox", thunderbird), ("Apple Mail/Senders.mbox/mbox", senders)]


def test_other_writers_files_in_one_folder(tmp_path):
    for name, data in other_writers():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    (tmp_path / "Local Folders" / "Inbox.msf").write_text("// <!-- <mdb:mork:z v=\"1.4\"/> -->")  # Thunderbird's index
    (tmp_path / "notes.txt").write_text("From time to time I write notes.\n")
    src = source(tmp_path)
    result = src.scan()
    counts = {str(Path(t.path).relative_to(tmp_path)): len(t.records) for t in src._tocs}
    assert counts == {"2001-November.txt": 3, "Local Folders/Inbox": 1, "mbox-src": 2, "mboxcl3.mbox": 1,
                      "Apple Mail/Senders.mbox/mbox": 3} and not result.problems
    docs = {d.title: d for d in documents(src).values()}
    assert len(docs) == 10
    numpy = docs["[Numpy-discussion] Re: Numeric2"]  # unescaped `From ` body lines stay in their message
    assert numpy.author == "Hung Jung Lu <hungjunglu@yahoo.com>" and numpy.ts == fx.unix("2001-11-02T10:24:10")
    assert "From my experience the rewrite is worth it.\n\nFrom 2002 on" in numpy.sections[0].text
    moved = docs["mailing list moved"]  # no Date header: the envelope's (minutes only, a zone name)
    assert moved.ts == fx.unix("2000-02-23T17:28:00") and moved.metadata["date_source"] == "envelope"
    assert "From perl5-porters:" in docs["[Samhain at orphan.zombinet] CRIT"].sections[0].text
    assert "From here on it is body." in docs["Quoting"].sections[0].text  # its `>From` unquoted (exactly: below)
    assert docs["Angebot"].author == "Jörg Müller <jm@beispiel.de>"
    assert docs["Nachtrag"].ts == fx.unix("2024-01-01T10:30:00")  # a raw Latin-1 sender
    assert docs["Undelivered Mail Returned to Sender"].ts == fx.unix("2024-01-01T11:30:00")


def test_thunderbird_quoting_is_undone_once(tmp_path):
    (tmp_path / "Inbox").write_bytes(dict(other_writers())["Local Folders/Inbox"])
    [doc] = documents(source(tmp_path, strip_quotes=False)).values()
    assert doc.sections[0].text.endswith("The next lines were escaped:\nFrom here on it is body.\n>From here too.")


def test_linked_folders_are_read_once_and_pipes_not_at_all(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    hostile.write(elsewhere, "Archive.mbox", [hostile.plain(1), hostile.plain(2)])
    mail = tmp_path / "mail"
    hostile.write(mail, "Inbox.mbox", [hostile.plain(3)])
    (mail / "archive").symlink_to(elsewhere)
    (mail / "again").symlink_to(elsewhere)
    (mail / "loop").symlink_to(mail)
    os.mkfifo(mail / "pipe.mbox")  # opening it would wait for a writer forever
    src = source(mail)
    assert len(src.scan().items) == 3 and len(src._files) == 2


def test_compressed_archives_say_how_to_unpack_them(tmp_path):
    (tmp_path / "2001-November.txt.gz").write_bytes(gzip.compress(hostile.pipermail_archive()))
    (tmp_path / "2001-October.txt.gz").write_bytes(gzip.compress(b"packed"))
    (tmp_path / "2001-October.txt").write_bytes(hostile.pipermail_archive())  # unpacked beside it: the .gz is ignored
    result = source(tmp_path).scan()
    assert len(result.items) == 3 and list(result.problems) == ["file:2001-November.txt.gz"]
    kind, why = result.problems["file:2001-November.txt.gz"]
    assert kind == "unsupported" and "gunzip -k" in why
    (tmp_path / "given.mbox").write_bytes(gzip.compress(hostile.pipermail_archive()))  # a gzip file given by name
    [(kind, why)] = source(tmp_path / "given.mbox").scan().problems.values()
    assert "is gzip-compressed; unpack it (`gunzip -k" in why


# -- one bad file, one bad message ------------------------------------------------------------------------------------


def test_one_unrecognised_file_is_one_failed_item_and_is_not_read_again(tmp_path):
    args = hostile.SHAPES[0].build(tmp_path / "mail")
    src = source(Path(args[-1]))
    result = src.scan()
    assert len(result.items) == 3 and list(result.problems) == ["file:Archive.mbox"]
    kind, why = result.problems["file:Archive.mbox"]
    assert kind == "unsupported" and "not an mbox file: it does not start with a `From ` envelope line" in why
    assert "offset" not in why and "move the file out of" in why and "the other files are indexed" in why
    parsed = src.bytes_parsed
    assert src.scan().problems == result.problems and src.bytes_parsed == parsed  # an unchanged bad file: not read
    [loaded] = src.load(["file:Archive.mbox"])
    assert loaded.error == (kind, why) and loaded.stamp == "problem:unsupported"


def test_broken_encoded_words_keep_what_was_written():
    assert decode_header_value("=?utf-8?B?a?=") == "=?utf-8?B?a?="  # not base64 at all: Python raises
    assert decode_header_value("=?utf-8?B?!!!?=") == "=?utf-8?B?!!!?="  # decodes to nothing
    assert decode_header_value("Re: =?utf-8?B?a?= und =?utf-8?q?Gr=C3=BC=C3=9Fe?=") == "Re: =?utf-8?B?a?= und Grüße"
    assert decode_header_value("=?x-unknown?q?abc?=") == "=?x-unknown?q?abc?="
    record = mail_record(hostile.BROKEN_SUBJECT.raw, max_text=1 << 20)
    assert record.subject == "=?utf-8?B?a?= Budget for the orchard" and "orchard budget" in record.body
    record = mail_record(hostile.BROKEN_ATTACHMENT.raw, max_text=1 << 20)  # the broken attachment costs nothing
    assert record.body.startswith("The quarterly figures") and record.attachments == ("=?utf-8?B?a?=",)


def test_a_message_that_cannot_be_parsed_is_one_failed_item(tmp_path):
    hostile.write(tmp_path, "All mail.mbox", [hostile.plain(1), hostile.nested(12), hostile.plain(2)])
    src = source(tmp_path)
    loaded = {ld.key: ld for ld in src.load(sorted(src.scan().items))}
    bad = loaded.pop("<hostile-12@example.org>")
    assert bad.error[0] == "corrupt" and "nested too deeply" in bad.error[1]
    assert "other messages are indexed" in bad.error[1]
    assert [ld.parse().title for ld in loaded.values()] == ["Plain message 1", "Plain message 2"]


# -- end to end: the hostile shapes through the CLI and Dagster --------------------------------------------------------


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = tmp_path / "home"
    h.mkdir()
    (h / "config.yaml").write_text(yaml.safe_dump({"collections": {}}))
    monkeypatch.setenv("LOCAL_RAG_HOME", str(h))
    monkeypatch.setenv("DAGSTER_HOME", str(h / "dagster"))
    monkeypatch.delenv("LOCAL_RAG_DB", raising=False)
    monkeypatch.delenv("LOCAL_RAG_CONFIG", raising=False)
    embedder = HashEmbedder()
    monkeypatch.setattr(resources, "load_embedder", lambda settings, paths=None: embedder)
    yield Paths.from_env()
    resources.close_all()


@pytest.mark.parametrize("shape", hostile.SHAPES, ids=lambda s: s.name)
def test_hostile_mail_shapes(home, tmp_path, shape):
    args = shape.build(tmp_path / "input")
    r = CliRunner().invoke(cli, ["index", *args, "--json"], catch_exceptions=False)
    assert r.exit_code == (6 if shape.expect.get("failed") else 0), r.output  # 6: finished, items failed
    [summary] = json.loads(r.output[r.output.index("[\n"):])
    assert summary["outcomes"] == shape.expect and not summary["unavailable"], summary
    store = resources.RagResource().store()
    failed = {k for k, s in reads.item_states(store, "gmail").items() if s.status == "failed"}
    assert len(failed) == shape.expect.get("failed", 0)


def test_a_bad_file_leaves_the_failures_when_it_is_fixed(home, tmp_path):
    folder = tmp_path / "mail"
    hostile.SHAPES[0].build(folder)
    (home.home / "config.yaml").write_text(yaml.safe_dump({"collections": {"gmail": {
        "kind": "system", "sources": [{"type": "gmail", "path": str(folder)}]}}}))
    [summary] = runs.index_collections(home, ["gmail"])
    assert summary.outcomes == {"indexed": 3, "failed": 1}
    assert [f["key"] for f in summary.failures] == ["file:Archive.mbox"]
    hostile.write(folder, "Archive.mbox", [hostile.plain(4)])  # exported again, properly
    [fixed] = runs.index_collections(home, ["gmail"])
    assert fixed.outcomes == {"indexed": 1, "deleted": 1} and not fixed.failures
    store = resources.RagResource().store()
    assert {k: s.status for k, s in reads.item_states(store, "gmail").items()} == {
        f"<hostile-{n}@example.org>": "indexed" for n in (1, 2, 3, 4)}
