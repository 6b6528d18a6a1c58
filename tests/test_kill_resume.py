"""SIGKILL during `local-rag index`: nothing corrupt, finished items kept, the next run redoes only the rest
and is not blocked by the dead run (which is marked failed)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from rag_search.store import Store, reads
from rag_search.store.connection import connect

NOTES = 150  # ~3 chunks each: several groups of ItemWriter.group_chunks


def make_notes(folder: Path, n: int = NOTES) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        body = "\n\n".join(f"Note {i} paragraph {j}: the heron waited by pool {i * 7 + j} while the river rose "
                           f"past marker {j} and the village planned levee number {i}." * 3 for j in range(6))
        (folder / f"note-{i:03d}.md").write_text(f"# Note {i}\n\n{body}\n")


def integrity(db: Path) -> dict:
    conn = connect(db)
    q = lambda sql: conn.execute(sql).fetchone()[0]  # noqa: E731
    out = {
        "integrity": q("PRAGMA integrity_check"),
        "chunks": q("SELECT count(*) FROM chunks"),
        "fts": q("SELECT count(*) FROM chunks_fts_docsize"),
        "vectors": q("SELECT count(*) FROM chunk_vec"),
        "orphan_chunks": q("SELECT count(*) FROM chunks WHERE item_id NOT IN (SELECT id FROM items)"),
        "indexed_without_chunks": q("SELECT count(*) FROM items i WHERE status = 'indexed' AND NOT EXISTS "
                                    "(SELECT 1 FROM chunks c WHERE c.item_id = i.id)"),
        "cache": q("SELECT count(*) FROM embedding_cache"),
    }
    conn.close()
    return out


def indexed_count(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        conn = connect(db, readonly=True)
        n = conn.execute("SELECT count(*) FROM items WHERE status = 'indexed'").fetchone()[0]
        conn.close()
        return n
    except Exception:
        return 0


@pytest.mark.slow
def test_kill_mid_index_then_resume(tmp_path):
    notes, home = tmp_path / "notes", tmp_path / "home"
    make_notes(notes)
    env = {**os.environ, "LOCAL_RAG_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")}
    env.pop("LOCAL_RAG_DB", None)
    env.pop("LOCAL_RAG_CONFIG", None)
    exe = str(Path(sys.executable).with_name("local-rag"))
    proc = subprocess.Popen([exe, "index", "project", "notes", str(notes)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    db = home / "rag.db"
    deadline = time.time() + 120
    while indexed_count(db) < 3:
        assert proc.poll() is None, "indexing finished before it could be killed; make the corpus bigger"
        assert time.time() < deadline
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    saved = indexed_count(db)
    after_kill = integrity(db)
    assert after_kill["integrity"] == "ok"
    assert after_kill["chunks"] == after_kill["fts"] == after_kill["vectors"]
    assert after_kill["orphan_chunks"] == 0 and after_kill["indexed_without_chunks"] == 0
    assert 3 <= saved < NOTES  # items were written group by group as their vectors came, not at the end

    # `status` marks the dead run failed first: the next index must still log what it wrote but never logged
    status = subprocess.run([exe, "status", "--json"], env=env, capture_output=True, text=True, timeout=120)
    assert status.returncode == 0, status.stderr
    assert len(json.loads(status.stdout)["runs_reaped"]) == 1
    out = subprocess.run([exe, "index", "all", "--json"], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr

    [summary] = json.loads(out.stdout)
    assert summary["outcomes"].get("indexed", 0) == NOTES - saved  # only the rest was redone
    final = integrity(db)
    assert final["integrity"] == "ok" and final["chunks"] == final["fts"] == final["vectors"]
    store = Store.open(db)
    assert sum(1 for s in reads.item_states(store, "notes").values() if s.status == "indexed") == NOTES
    store.close()

    os.environ["DAGSTER_HOME"], old = str(home / "dagster"), os.environ.get("DAGSTER_HOME")
    try:
        instance = dg.DagsterInstance.get()
        statuses = [r.status for r in instance.get_runs()]
        assert dg.DagsterRunStatus.STARTED not in statuses  # the killed run was marked failed
        assert dg.DagsterRunStatus.FAILURE in statuses
        # every indexed item is a materialised partition, also those the killed run wrote but had not logged yet
        assert instance.get_materialized_partitions(dg.AssetKey(["notes", "items"])) == {
            f"note-{i:03d}.md" for i in range(NOTES)}
    finally:
        if old is None:
            os.environ.pop("DAGSTER_HOME", None)
        else:
            os.environ["DAGSTER_HOME"] = old
