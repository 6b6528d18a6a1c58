"""The MCP server through a real MCP client: stdio (spawned `local-rag serve`) and streamable HTTP on loopback."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from pipeline_env import make_home

from rag_search.mcp.reads import budget_hits

SNAPSHOT = Path(__file__).parent / "fixtures" / "mcp_tools.json"
EXE = str(Path(sys.executable).with_name("local-rag"))


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """The fixture vault indexed through the pipelines, in its own LOCAL_RAG_HOME."""
    mp = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp("mcp")
    paths, vault = make_home(tmp, mp)
    with paths.config.open("a") as f:  # tmp is outside $HOME: let rag_index create collections in it
        f.write(f"mcp:\n  allowed_roots: [{json.dumps(str(tmp))}]\n  allowed_hosts: [config.lan]\n")
    from rag_pipelines.indexing import runs
    from rag_pipelines.wiring import resources

    runs.index_collections(paths, ["notes"])
    (vault / "broken.pdf").write_bytes(b"%PDF-1.7 not really")
    runs.index_collections(paths, ["notes"])
    resources.close_all()
    env = {"LOCAL_RAG_HOME": str(paths.home), "DAGSTER_HOME": str(paths.dagster_home)}
    mp.undo()
    return env, vault, tmp


@asynccontextmanager
async def session(env, errlog_path: str = os.devnull):
    params = StdioServerParameters(command=EXE, args=["serve"], env={**os.environ, **env})
    with open(errlog_path, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                yield s


def payload(result) -> object:
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


def error(result) -> str:
    assert result.is_error
    return result.content[0].text


def tool_contract(tools) -> list[dict]:
    return [{"name": t.name,
             "parameters": sorted(t.input_schema.get("properties", {})),
             "required": sorted(t.input_schema.get("required", [])),
             "read_only": bool(t.annotations and t.annotations.read_only_hint),
             "destructive": bool(t.annotations and t.annotations.destructive_hint)} for t in tools]


def test_tools_contract_and_every_tool_over_stdio(home, tmp_path):
    env, vault, tmp = home
    stderr = tmp_path / "server.log"  # over stdio, the server's stderr is the client's log
    newdir = tmp / "newproject"
    newdir.mkdir()
    (newdir / "plan.md").write_text("# Plan\nThe migration to PostgreSQL happens in June.\n")

    async def go():
        async with session(env, str(stderr)) as s:
            listed = await s.list_tools()
            assert len(listed.model_dump_json(by_alias=True, exclude_none=True)) < 10_500  # 9.9 KB: 12 tools, every parameter described
            tools = listed.tools
            contract = tool_contract(tools)
            if not SNAPSHOT.exists():
                SNAPSHOT.write_text(json.dumps(contract, indent=1) + "\n")
            assert contract == json.loads(SNAPSHOT.read_text())
            schema = next(t for t in tools if t.name == "rag_search").input_schema["properties"]["metadata"]
            assert schema["properties"] == {"owner": {"anyOf": [{"enum": ["me"]}, {"type": "array", "items": {"enum": ["me"]}}]}}
            assert "area" in schema["description"] and "status" in schema["description"]  # one item each: no enum

            found = payload(await s.call_tool("rag_search", {"query": "kube-proxy iptables rollback"}))
            top = found["hits"][0]
            assert top["title"] == "Kube Upgrade" and top["collection"] == "notes"
            assert {"content", "source", "chunk_index", "timestamp", "score"} <= set(top)
            assert "page" not in top  # compact: what is unknown is left out
            filtered = payload(await s.call_tool("rag_search", {"query": "runbook", "metadata": {"area": "Work"}}))
            assert {h["key"] for h in filtered["hits"]} == {"Projects/Work/Kube Upgrade.md"}

            cols = payload(await s.call_tool("rag_list_collections", {}))["collections"]
            assert [c["name"] for c in cols] == ["notes"] and cols[0]["items"] == 12
            info = payload(await s.call_tool("rag_collection_info", {"collection": "notes"}))
            assert info["failed"] == 1 and info["failures"][0]["key"] == "broken.pdf"

            doc = payload(await s.call_tool("rag_get_document", {"path_or_id": top["source"]}))
            assert "Keep the old DaemonSet manifest." in doc["text"] and doc["key"] == "Projects/Work/Kube Upgrade.md"
            assert "See [[Runbook|the runbook]]" in doc["text"] and "\n## Risks\n" in doc["text"]  # as written
            written = (vault / "Help/Formatting help.md").read_text().split("---\n", 2)[2]
            note = payload(await s.call_tool("rag_get_document", {"path_or_id": "Help/Formatting help.md"}))
            assert note["chunks"] > 1 and note["text"] == written.strip("\n")  # the note, not its chunks joined
            assert note["tags"] == ["help", "formatting", "project/alpha"]
            same = payload(await s.call_tool("rag_get_document", {"path_or_id": str(top["item_id"])}))
            assert same["text"] == doc["text"]

            related = payload(await s.call_tool("rag_related", {"path_or_id": "Projects/Runbook.md"}))
            assert "Projects/Work/Kube Upgrade.md" in [b["key"] for b in related["backlinks"]]
            assert related["similar"] and all(r["key"] != "Projects/Runbook.md" for r in related["similar"])

            tagged = payload(await s.call_tool("rag_search_by_tag", {"tag": "infra"}))
            assert [i["key"] for i in tagged["items"]] == ["Projects/Work/Kube Upgrade.md"]
            assert payload(await s.call_tool("rag_search_by_tag", {"tag": "Keyboard"}))["items"] == []  # a heading link
            ranked = payload(await s.call_tool("rag_search_by_tag", {"tag": "ops", "query": "steps"}))
            assert {h["key"] for h in ranked["hits"]} <= {"Projects/Runbook.md", "Projects/Work/Kube Upgrade.md"}
            recent = payload(await s.call_tool("rag_list_recent", {"days": 100_000, "limit": 3}))["items"]
            assert len(recent) == 3
            status = payload(await s.call_tool("rag_status", {}))
            assert status["totals"]["items"] == 12 and status["embedder"]["dimensions"] == 384

            indexed = payload(await s.call_tool("rag_index", {"collection": "newproject", "path": str(newdir)}))
            assert (indexed["indexed"], indexed["failed"]) == (1, 0) and indexed["runs"]
            hit = payload(await s.call_tool("rag_search", {"query": "PostgreSQL migration", "collection": "newproject"}))
            assert hit["hits"][0]["key"] == "plan.md"
            again = payload(await s.call_tool("rag_index", {"collection": "newproject", "path": str(newdir) + "/"}))
            assert (again["indexed"], again["skipped"]) == (0, 1)
            moved = error(await s.call_tool("rag_index", {"collection": "newproject", "path": str(vault)}))
            assert str(newdir) in moved and "--replace" in moved

            resources = {str(r.uri) for r in (await s.list_resources()).resources}
            assert resources == {"rag://stats", "ingestion://status", "ingestion://failures", "ingestion://metadata",
                                 "ingestion://stats", "ingestion://watch-stats", "knowledge://stats"}
            knowledge = json.loads((await s.read_resource("knowledge://stats")).contents[0].text)["sources"]
            by_name = {x["collection"]: x for x in knowledge}
            assert by_name["notes"]["failed"] == 1 and by_name["notes"]["from"] <= by_name["notes"]["to"]
            stats_tool = payload(await s.call_tool("rag_knowledge_stats", {}))
            assert stats_tool["sources"] == knowledge
            recent = payload(await s.call_tool("rag_search", {"query": "kube-proxy", "days": 36500}))
            assert recent["hits"]
            assert "days must be at least 1" in error(await s.call_tool("rag_search", {"query": "kube-proxy", "days": 0}))
            per_source = json.loads((await s.read_resource("ingestion://stats")).contents[0].text)["sources"]
            notes = next(x for x in per_source if x["collection"] == "notes")
            assert (notes["type"], notes["failed"], notes["error"]) == ("obsidian", 1, None)
            assert notes["matched"] == notes["indexed"] + notes["failed"] and notes["chunks"] >= notes["indexed"]
            watch = json.loads((await s.read_resource("ingestion://watch-stats")).contents[0].text)
            assert watch["running"] is False and "local-rag watch" in watch["note"]
            failures = json.loads((await s.read_resource("ingestion://failures")).contents[0].text)
            assert failures[0]["key"] == "broken.pdf" and failures[0]["error_kind"] == "corrupt"
            meta = json.loads((await s.read_resource("ingestion://metadata")).contents[0].text)
            assert "Work" in meta["notes"]["area"]
            st = json.loads((await s.read_resource("ingestion://status")).contents[0].text)
            assert st["totals"]["collections"] == 2 and st["last_indexed"]
            assert json.loads((await s.read_resource("rag://stats")).contents[0].text)["totals"]["items"] == 13

    asyncio.run(go())
    logged = stderr.read_text()
    assert "alembic" not in logged and "Context impl" not in logged, logged  # rag_index's Dagster storage stamps


def test_errors_tell_the_model_what_to_do(home, tmp_path):
    env, vault, _ = home
    (vault.parent / "outside.md").write_text("secret")
    (vault / "link-out.md").symlink_to(vault.parent / "outside.md")

    async def go():
        async with session(env) as s:
            msg = error(await s.call_tool("rag_search", {"query": "x", "collection": "nope"}))
            assert "No collection named 'nope'" in msg and "notes" in msg
            for bad in ["../../../../etc/passwd", "/etc/passwd", str(vault / "link-out.md"), str(vault.parent / "outside.md")]:
                assert "is not an indexed item" in error(await s.call_tool("rag_get_document", {"path_or_id": bad}))
            assert "Cannot read the date" in error(await s.call_tool("rag_search", {"query": "x", "date_from": "soon"}))

    asyncio.run(go())
    empty = {"LOCAL_RAG_HOME": str(tmp_path / "empty")}

    async def empty_index():
        async with session(empty) as s:
            msg = error(await s.call_tool("rag_search", {"query": "anything"}))
            assert "The index is empty" in msg and "rag_index" in msg
            assert str(tmp_path / "empty" / "rag.db") in msg and '"env": {"LOCAL_RAG_HOME"' in msg

    asyncio.run(empty_index())
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.yaml").write_text("embedder:\n  provider: ollama\n")
    import shutil

    shutil.copy(Path(env["LOCAL_RAG_HOME"]) / "rag.db", other / "rag.db")

    async def mismatch():
        async with session({"LOCAL_RAG_HOME": str(other)}) as s:
            assert "local-rag reembed" in error(await s.call_tool("rag_search", {"query": "runbook"}))

    asyncio.run(mismatch())


def test_links_to_outside_never_reach_the_client(home, tmp_path):
    """Real runs: a link inside a folder rag_index added is not followed out of it, and once the folder itself is
    swapped for a link to somewhere outside the allowed roots, rag_index refuses to index it again."""
    env, _, tmp = home
    folder, outside = tmp / "swapme", tmp_path / "outside"
    folder.mkdir()
    outside.mkdir()
    (folder / "passport.md").write_text("# Passport\nRenew the passport in May.\n")
    (outside / "secret.md").write_text("# Secret\nThe safe combination is 31-41-59.\n")
    (folder / "link.md").symlink_to(outside / "secret.md")
    (folder / "linked").symlink_to(outside)

    async def go():
        async with session(env) as s:
            indexed = payload(await s.call_tool("rag_index", {"collection": "swapme", "path": str(folder)}))
            assert (indexed["indexed"], indexed["failed"]) == (1, 0)
            found = payload(await s.call_tool("rag_search", {"query": "safe combination", "collection": "swapme"}))
            assert [h["key"] for h in found["hits"]] == ["passport.md"]
            import shutil

            shutil.rmtree(folder)
            folder.symlink_to(outside)
            msg = error(await s.call_tool("rag_index", {"collection": "swapme"}))
            assert f"which now leads to {outside}" in msg and "Nothing was indexed" in msg
            found = payload(await s.call_tool("rag_search", {"query": "safe combination"}))
            assert "31-41-59" not in json.dumps(found) and "Left out: Collection 'swapme'" in found["note"]

    asyncio.run(go())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_http_transport_checks_origin_and_token(home):
    env, _, _ = home
    port = free_port()
    proc = subprocess.Popen([EXE, "serve", "--port", str(port), "--token", "s3cret", "--allow-host", "notes.lan",
                             "--allow-origin", "http://localhost:5173"], env={**os.environ, **env},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/mcp"
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    try:
        deadline = time.time() + 60
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
                break
            except httpx.TransportError:
                assert time.time() < deadline and proc.poll() is None
                time.sleep(0.2)
        assert httpx.post(url, json=init, headers=headers).status_code == 403  # not 401: see http_keys
        auth = {**headers, "Authorization": "Bearer s3cret"}
        assert httpx.post(url, json=init, headers={**auth, "Origin": "http://evil.example"}).status_code == 403
        refused = httpx.post(url, json=init, headers={**auth, "Host": "evil.example"})
        assert refused.status_code == 421 and "--allow-host evil.example" in refused.text
        for name in ["notes.lan", "config.lan"]:  # --allow-host and mcp.allowed_hosts
            assert httpx.post(url, json=init, headers={**auth, "Host": f"{name}:{port}"}).status_code == 200
        for origin, status in [(f"http://127.0.0.1:{free_port()}", 403), ("http://localhost:5173", 200)]:
            assert httpx.post(url, json=init, headers={**auth, "Origin": origin}).status_code == status

        async def go():
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            async with httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret"}, timeout=60) as client:
                async with streamable_http_client(url, http_client=client) as (read, write):
                    async with ClientSession(read, write) as s:
                        await s.initialize()
                        names = {t.name for t in (await s.list_tools()).tools}
                        assert "rag_search" in names
                        t0 = time.perf_counter()
                        found = payload(await s.call_tool("rag_search", {"query": "tomatoes garden"}))
                        assert found["hits"][0]["key"] == "Daily/2024-03-15.md"
                        assert time.perf_counter() - t0 < 5

        asyncio.run(go())
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_serving_off_loopback_requires_a_token(home):
    env, _, _ = home
    out = subprocess.run([EXE, "serve", "--port", str(free_port()), "--host", "0.0.0.0"],
                         env={**os.environ, **env, "LOCAL_RAG_MCP_TOKEN": ""}, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "--token" in out.stderr


def test_output_budget_trims_long_results():
    from rag_search.records import Hit

    hits = [Hit(chunk_id=i, item_id=i, collection="c", source_type="markdown", key=f"k{i}", uri=f"/k{i}", title="t",
                text="word " * 2000, snippet="short snippet", chunk_index=0, heading_path=(), page=None, ts=None,
                author=None, tags=(), metadata={}, score=1.0 / (i + 1)) for i in range(50)]
    out, note = budget_hits(hits)
    assert len(json.dumps(out)) <= 8_000 * 4 and "rag_get_document" in note
    assert out[0]["content"].startswith("word") and any(o.get("content") == "short snippet" for o in out)
    assert len(out) == 50 and out[-1]["content"] == "short snippet"


def test_a_large_top_k_lists_every_hit_within_the_budget():
    """top_k=100 of long chunks: the best in full, then snippets, then references only — never cut to ~30."""
    from rag_search.records import Hit

    hits = [Hit(chunk_id=i, item_id=i, collection="notes", source_type="markdown", key=f"Projects/note {i}.md",
                uri=f"/Users/me/vault/Projects/note {i}.md", title=f"Note {i}", text="word " * 400,
                snippet="a snippet of about two hundred characters " * 5, chunk_index=0, heading_path=("Plans",),
                page=None, ts=1_700_000_000, author=None, tags=("work",), metadata={}, score=1.0 / (i + 1))
            for i in range(100)]
    out, note = budget_hits(hits)
    assert len(out) == 100 and len(json.dumps(out, separators=(",", ":"))) <= 8_000 * 4
    assert out[0]["content"].startswith("word") and "content" not in out[-1]
    assert out[-1]["source"] == hits[-1].uri and out[-1]["item_id"] == 99
    assert [o["item_id"] for o in out] == list(range(100))
    assert "only where to look" in note


def test_a_server_that_stops_closes_the_index(home):
    """A client ending the session stops the server, which closes rag.db: the WAL is folded in and removed (the CLI
    skips the interpreter's last garbage collection, so nothing may rely on it to close files)."""
    env, _, _ = home
    db = Path(env["LOCAL_RAG_HOME"]) / "rag.db"

    async def go():
        async with session(env) as s:
            assert payload(await s.call_tool("rag_search", {"query": "kube-proxy iptables rollback"}))["hits"]
            assert db.with_name("rag.db-wal").exists()  # open while serving

    asyncio.run(go())
    assert not db.with_name("rag.db-wal").exists()
