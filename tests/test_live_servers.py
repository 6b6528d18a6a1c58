"""Running MCP servers (real `local-rag serve` processes over stdio): config.yaml edits are taken in without a
restart, and several servers on one home index each collection once, the others handing over when it dies."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import yaml
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from pipeline_env import make_home

EXE = str(Path(sys.executable).with_name("local-rag"))


@asynccontextmanager
async def session(env: dict, errlog):
    params = StdioServerParameters(command=EXE, args=["serve"], env={**os.environ, **env})
    async with stdio_client(params, errlog=errlog) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            yield s


def payload(result) -> dict:
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


def home_env(tmp_path, monkeypatch) -> tuple[dict, object, Path]:
    paths, vault = make_home(tmp_path, monkeypatch)
    return {"LOCAL_RAG_HOME": str(paths.home), "DAGSTER_HOME": str(paths.dagster_home)}, paths, vault


def test_a_collection_added_to_config_yaml_is_searchable_without_a_restart(tmp_path, monkeypatch):
    """The server started with `notes` only; `papers` and a changed top_k are written into config.yaml while it runs."""
    env, paths, _ = home_env(tmp_path, monkeypatch)
    papers = tmp_path / "papers"
    papers.mkdir()
    (papers / "wal.md").write_text("Write-ahead logging lets readers proceed while one writer appends.\n")
    (papers / "mvcc.md").write_text("Readers of a snapshot never block the writer.\n")

    async def go():
        with open(tmp_path / "server.log", "w") as errlog:
            async with session(env, errlog) as s:
                before = payload(await s.call_tool("rag_status", {}))["config"]
                config = yaml.safe_load(paths.config.read_text())
                config["collections"]["papers"] = {"sources": [{"type": "project", "paths": [str(papers)]}]}
                config["search"] = {"top_k": 1}
                paths.config.write_text(yaml.safe_dump(config))
                indexed = payload(await s.call_tool("rag_index", {"collection": "papers"}))
                assert (indexed["indexed"], indexed["failed"]) == (2, 0)
                found = payload(await s.call_tool("rag_search", {"query": "readers writer", "mode": "keyword"}))
                assert [h["collection"] for h in found["hits"]] == ["papers"]  # top_k 1: the edited settings
                both = payload(await s.call_tool("rag_search", {"query": "readers writer", "top_k": 5}))
                assert {h["key"] for h in both["hits"]} == {"wal.md", "mvcc.md"}
                after = payload(await s.call_tool("rag_status", {}))["config"]
                assert after["loaded"] >= before["loaded"] and "error" not in after
                paths.config.write_text("search: {top_k: many}\n")  # a broken edit: the last good settings stay
                broken = {}
                while "error" not in broken:  # the file's stamp is looked at once a second
                    broken = payload(await s.call_tool("rag_status", {}))["config"]
                assert "search.top_k" in broken["error"] and "stay in use" in broken["error"]
                found = payload(await s.call_tool("rag_search", {"query": "readers writer", "mode": "keyword"}))
                assert len(found["hits"]) == 1

    asyncio.run(go())


def lock_record(paths) -> dict:
    try:
        return json.loads((paths.db.parent / "locks" / "notes.lock").read_text() or "{}")
    except (OSError, ValueError):
        return {}


async def until(condition, what: str, seconds: float = 120) -> None:
    deadline = time.time() + seconds
    while not condition():
        assert time.time() < deadline, what
        await asyncio.sleep(0.05)


def test_two_servers_index_a_collection_once_and_the_second_takes_over_when_the_first_is_killed(tmp_path, monkeypatch):
    """Two servers on one home are both asked to index `notes`: the first indexes, the second says who does; the first
    is killed (SIGKILL) mid-run and the second indexes the collection."""
    env, paths, _ = home_env(tmp_path, monkeypatch)
    paths.config.write_text(paths.config.read_text() + f"mcp:\n  allowed_roots: [{json.dumps(str(tmp_path))}]\n")
    warm = tmp_path / "warm"
    warm.mkdir()
    (warm / "a.md").write_text("warm up\n")

    async def go():
        async with AsyncExitStack() as stack:
            first = await stack.enter_async_context(session(env, stack.enter_context(open(tmp_path / "1.log", "w"))))
            second = await stack.enter_async_context(session(env, stack.enter_context(open(tmp_path / "2.log", "w"))))
            # the second imports the pipelines now, so that its answer below is not slower than the first's run
            await second.call_tool("rag_index", {"collection": "warm", "path": str(warm)})
            running = asyncio.create_task(first.call_tool("rag_index", {"collection": "notes"}))
            await until(lambda: lock_record(paths).get("trigger") == "mcp", "the first server took the lock")
            indexer = lock_record(paths)["pid"]
            busy = await second.call_tool("rag_index", {"collection": "notes"})
            assert busy.is_error and f"being indexed now by pid {indexer} (mcp" in busy.content[0].text
            assert "this process indexes the rest" in busy.content[0].text
            assert "finished" not in lock_record(paths)  # the first run is still going
            os.kill(indexer, signal.SIGKILL)
            running.cancel()
            await until(lambda: "finished" in lock_record(paths), "the second server finished the run")
            record = lock_record(paths)
            assert record["trigger"] == "mcp" and record["pid"] not in (indexer, os.getpid())  # the second server
            again = payload(await second.call_tool("rag_index", {"collection": "notes"}))
            assert again["indexed"] == 0 and again["skipped"] >= 11  # the take-over indexed every item
            hits = payload(await second.call_tool("rag_search", {"query": "kube-proxy iptables rollback"}))["hits"]
            assert hits[0]["title"] == "Kube Upgrade"
        assert f"notes: the run of pid {indexer} stopped" in (tmp_path / "2.log").read_text()  # said in its log
        assert "Traceback" not in (tmp_path / "1.log").read_text()  # the second one's look at the search socket

    asyncio.run(go())
