"""`local-rag index` as a user runs it (click's CliRunner, the real model, real Dagster runs in a temp home):
moving a vault with --replace, exit statuses a script can read, and file names that are not plain."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner
from pipeline_env import VAULT, point_at_home

from rag_pipelines.wiring import resources
from rag_search.cli.main import cli
from rag_search.store import Store, reads


@pytest.fixture
def env(tmp_path, monkeypatch):
    home = tmp_path / "home"
    point_at_home(home, monkeypatch)
    yield home
    resources.close_all()


def run(*args, code=0, stdout=False):
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result.stdout if stdout else result.output


def test_a_moved_vault_moves_its_items(env, tmp_path):
    """--replace to a copy of the vault: unchanged items kept their old paths (search, MCP uri, get_document)."""
    old, new = tmp_path / "Vault", tmp_path / "Moved" / "Vault"
    shutil.copytree(VAULT, old)
    run("index", "obsidian", "--vault", str(old))
    shutil.copytree(old, new)  # copy2: the same mtimes, so the same stamps
    shutil.rmtree(old)
    out = run("index", "obsidian", "--vault", str(new), "--replace")
    store = Store.open(env / "rag.db")
    states = reads.item_states(store, "notes")
    assert states and all(s.uri.startswith(str(new) + "/") for s in states.values()), states
    assert "now point to their new location" in out and "0 indexed" in out  # nothing re-read or re-embedded
    doc = reads.get_document(store, str(new / "Projects" / "Runbook.md"))
    assert doc["uri"] == str(new / "Projects" / "Runbook.md")
    hits = json.loads(run("search", "rollback kube-proxy", "--json", stdout=True))["hits"]
    assert hits and all(h["uri"].startswith(str(new)) for h in hits)


def test_a_touched_copy_is_moved_too(env, tmp_path):
    """A copy without its mtimes: the stamps differ, the content hash is the same: moved, not re-indexed."""
    old, new = tmp_path / "A", tmp_path / "B"
    shutil.copytree(VAULT, old)
    run("index", "project", "docs", str(old))
    shutil.copytree(old, new, copy_function=shutil.copyfile)
    out = run("index", "project", "docs", str(new), "--replace")
    store = Store.open(env / "rag.db")
    assert all(s.uri.startswith(str(new) + "/") for s in reads.item_states(store, "docs").values())
    assert "0 indexed" in out


def test_exit_status_says_whether_everything_was_indexed(env, tmp_path):
    """A script could not tell: `index` exited 0 with failed items and with a skipped source."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "ok.md").write_text("# Fine\n\nA note that indexes.\n")
    run("index", "project", "docs", str(folder))
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 not a pdf")
    out = run("index", "project", "docs", str(folder), code=6)
    assert "failed: " in out and "broken.pdf" in out
    summary = json.loads(run("index", "all", "--json", code=6, stdout=True))  # --json too
    assert summary[0]["failures"][0]["key"] == "broken.pdf"
    shutil.rmtree(folder)  # unmounted: skipped, nothing removed
    out = run("index", "all", code=7)
    assert "skipped source" in out


def test_names_with_percent_and_bytes_that_are_not_utf8_index_and_are_found(env, tmp_path):
    """`100% done.md` got the key `100%25 done.md` and its real relative path found nothing; one name with a
    Latin-1 byte (an old archive) crashed the whole scan with UnicodeEncodeError: nothing indexed."""
    import os

    folder = tmp_path / "archive"
    (folder / "2009").mkdir(parents=True)
    (folder / "100% done.md").write_text("# Done\n\nThe migration is complete.\n")
    latin1 = os.path.join(os.fsencode(folder / "2009"), b"caf\xe9 cr\xe8me.md")  # not UTF-8: 0xE9, 0xE8
    with open(latin1, "wb") as fh:
        fh.write("# Café crème\n\nNotes on the espresso machine descaling.\n".encode())
    out = run("index", "project", "archive", str(folder))
    assert "2 indexed" in out and "0 failed" in out, out
    store = Store.open(env / "rag.db")
    assert set(reads.item_states(store, "archive")) == {"100%25 done.md", "2009/caf%E9 cr%E8me.md"}  # faithful keys
    assert reads.get_document(store, "100% done.md")["key"] == "100%25 done.md"  # the real relative path finds it
    [hit] = json.loads(run("search", "espresso descaling", "--json", "--top", "1", stdout=True))["hits"]
    assert hit["uri"] == str(folder / "2009" / "café crème.md")  # shown readably (the byte read as Windows-1252)
    assert reads.get_document(store, hit["uri"])["key"] == hit["key"]


def test_a_fifo_or_a_dangling_link_is_reported_not_skipped(env, tmp_path):
    """A FIFO named note.md was skipped without a word (reading it would block)."""
    import os

    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "real.md").write_text("# Real\n\nA real note.\n")
    os.mkfifo(folder / "note.md")
    (folder / "gone.md").symlink_to(folder / "nowhere.md")
    out = run("index", "project", "notes", str(folder), code=6)
    assert "1 indexed" in out
    failures = {f.key: f.to_dict() for f in reads.failures(Store.open(env / "rag.db"), collection="notes")}
    assert failures["note.md"]["error_kind"] == "not_a_file" and "named pipe" in failures["note.md"]["message"]
    assert failures["gone.md"]["error_kind"] == "broken_link" and "does not exist" in failures["gone.md"]["message"]


def test_one_index_run_per_collection_at_a_time(env, tmp_path):
    """Two `index` runs of one collection (CLI and MCP) ran at once: both STARTED, items written twice. The second
    waits for the first, says whom it waits for, and then finds nothing left to do."""
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    from rag_pipelines.indexing.lock import CollectionBusy, collection_lock, lock_path

    folder = tmp_path / "notes"
    folder.mkdir()
    for i in range(120):
        (folder / f"n{i:03d}.md").write_text(f"# Note {i}\n\n" + f"Paragraph {i} about rivers and herons. " * 30)
    exe = str(Path(sys.executable).with_name("local-rag"))
    first = subprocess.Popen([exe, "index", "project", "notes", str(folder), "--json"], env=dict(os.environ),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lock = lock_path(env / "rag.db", "notes")
    deadline = time.time() + 120
    while not (lock.exists() and '"pid"' in lock.read_text()):
        assert first.poll() is None and time.time() < deadline
        time.sleep(0.1)
    with pytest.raises(CollectionBusy, match=f"pid {first.pid}"):  # what MCP's rag_index answers meanwhile
        with collection_lock(env / "rag.db", "notes", "mcp", wait=False):
            pass
    second = subprocess.run([exe, "index", "all", "--json"], env=dict(os.environ), capture_output=True, text=True,
                            timeout=300)
    out, _ = first.communicate(timeout=300)
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    assert f"waiting for pid {first.pid}" in second.stderr
    assert json.loads(out)[0]["outcomes"] == {"indexed": 120}
    assert json.loads(second.stdout)[0]["outcomes"] == {}  # everything was done: nothing written twice


def test_a_run_started_anywhere_never_reads_an_assistants_folder_that_now_leads_outside(env, tmp_path, monkeypatch):
    """The root policy was checked when rag_index registered a folder; later runs (CLI, sensor, watcher) read
    whatever it led to after a symlink swap. Every run now checks, and skips such a source with the reason."""
    from rag_pipelines.config import register_collection, validate_collection
    from rag_search.mcp import guard as mcp_guard
    from rag_search.config import Paths

    user = tmp_path / "user"
    (user / "swapme").mkdir(parents=True)
    (user / "swapme" / "plan.md").write_text("# Plan\n\nA harmless plan.\n")
    monkeypatch.setenv("HOME", str(user))
    paths = Paths.from_env()
    paths.home.mkdir(parents=True, exist_ok=True)
    mcp_guard.remember(paths, "swapme", user / "swapme")  # what rag_index records and registers
    register_collection(paths, validate_collection(
        {"name": "swapme", "kind": "project", "sources": [{"type": "project", "paths": [str(user / "swapme")]}]}))
    run("index", "all")
    secret = tmp_path / "outside"
    secret.mkdir()
    (secret / "secret.md").write_text("# Secret\n\nThe launch code is swordfish.\n")
    shutil.rmtree(user / "swapme")
    (user / "swapme").symlink_to(secret)
    out = run("index", "all", code=7)
    assert "which now leads to" in out and "Nothing was read from it" in out
    keys = set(reads.item_states(Store.open(env / "rag.db"), "swapme"))
    assert keys == {"plan.md"}  # kept (not deleted), and nothing of the target read
