"""The MCP server against a hostile client: rag_index path policy, a bounded tools/list, HTTP Host/Origin checks.

In-process servers (real MCP client sessions over memory streams, a real uvicorn on loopback) on a temp
index with the fake embedder; Dagster runs are replaced by a recorder (test_mcp.py runs the real ones).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import yaml
from conftest import add_doc
from mcp.client import Client

from rag_search import mcp_server
from rag_search.config import Paths, Settings
from rag_search.errors import RootRefused
from rag_search.mcp_server import RagContext, build_server
from rag_search.retrieval import SearchEngine
from rag_search.roots import check_new_root
from rag_search.store import Store


@pytest.fixture
def user(tmp_path, monkeypatch):
    """A fake $HOME with a notes folder, a hidden ~/.ssh, and a folder outside it."""
    home = tmp_path / "user"
    for d in ("Notes/Work", ".ssh", "Other", ".config/app"):
        (home / d).mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def rag(tmp_path, user, fake_embedder, monkeypatch):
    """The server's process context, on a local-rag home inside $HOME; Dagster runs are recorded, not run."""
    paths = Paths.from_env({"LOCAL_RAG_HOME": str(user / "rag-home")})
    paths.home.mkdir()
    paths.config.write_text(yaml.safe_dump({"mcp": {"allowed_roots": [str(tmp_path / "elsewhere")]}}))
    settings = Settings()
    store = Store.open(paths.db)
    monkeypatch.setattr(mcp_server, "_context", RagContext(paths, settings, store, fake_embedder,
                                                           SearchEngine(store, fake_embedder, settings.search)))
    from rag_pipelines.indexing import runs

    ran: list[list[str]] = []
    monkeypatch.setattr(runs, "index_collections", lambda p, names, **kw: ran.append(names) or [
        runs.RunSummary(names[0], files=1, outcomes={"indexed": 1}, run_ids=["r1"])])
    yield paths, store, ran
    store.close()


def call(tool: str, args: dict):
    async def go():
        async with Client(build_server()) as client:
            result = await client.call_tool(tool, args)
            return result.is_error, result.content[0].text

    return asyncio.run(go())


def registry(paths: Paths) -> dict:
    reg = paths.home / "registry.yaml"
    return (yaml.safe_load(reg.read_text()) or {}).get("collections", {}) if reg.exists() else {}


# -- rag_index: new roots -------------------------------------------------------------------------

def test_rag_index_refuses_folders_an_assistant_should_not_add(rag, user, tmp_path):
    paths, _, ran = rag
    (user / "Notes" / "to-etc").symlink_to("/etc")
    refused = {"/": "outside your home", "/etc": "outside your home", str(user): "whole home folder",
               "~/.ssh": "hidden folder", str(user / ".config" / "app"): "hidden folder",
               str(user / "Notes" / "to-etc"): "outside your home", str(paths.home): "local-rag's own data",
               str(tmp_path / "nowhere"): "outside your home", "Notes": "not an absolute path"}
    for path, why in refused.items():
        is_error, msg = call("rag_index", {"collection": "grab", "path": path})
        assert is_error and why in msg, (path, msg)
        assert "\n" not in msg
    _, msg = call("rag_index", {"collection": "grab", "path": "/etc"})
    assert "mcp.allowed_roots" in msg and str(paths.config) in msg and "local-rag index project" in msg
    assert registry(paths) == {} and ran == []


def test_rag_index_accepts_folders_under_home_and_allowed_roots(rag, user, tmp_path):
    paths, _, ran = rag
    (user / "notes-link").symlink_to(user / "Notes" / "Work")
    for name, path in [("work", "~/notes-link"), ("else", str(tmp_path / "elsewhere"))]:
        is_error, msg = call("rag_index", {"collection": name, "path": path})
        assert not is_error, msg
    reg = registry(paths)
    assert reg["work"]["sources"][0]["paths"] == [str(user / "Notes" / "Work")]  # the link's target is registered
    assert reg["else"]["sources"][0]["paths"] == [str(tmp_path / "elsewhere")]
    assert ran == [["work"], ["else"]]


def test_rag_index_never_repoints_an_existing_collection(rag, user):
    paths, _, ran = rag
    assert not call("rag_index", {"collection": "Project Alpha", "path": str(user / "Notes")})[0]
    before = (paths.home / "registry.yaml").read_text()
    is_error, msg = call("rag_index", {"collection": "Project Alpha", "path": str(user / "Other")})
    assert is_error and str(user / "Notes") in msg and "--replace" in msg and "local-rag index project" in msg
    assert not call("rag_index", {"collection": "Project Alpha", "path": "~/Notes/"})[0]  # same folder: re-index
    assert not call("rag_index", {"collection": "Project Alpha"})[0]
    assert (paths.home / "registry.yaml").read_text() == before
    assert ran == [["Project Alpha"]] * 3


def test_rag_index_refuses_to_repoint_a_collection_of_the_config_file(rag, user):
    paths, _, ran = rag
    paths.config.write_text(yaml.safe_dump({"collections": {"notes": {"sources": [
        {"type": "obsidian", "paths": [str(user / "Notes")]}]}}, "disabled_collections": ["notes"]}))
    is_error, msg = call("rag_index", {"collection": "notes", "path": str(user / "Other")})
    assert is_error and str(paths.config) in msg and str(user / "Notes") in msg
    assert registry(paths) == {} and ran == []


def test_rag_index_bad_name_is_one_line_and_annotated_as_a_write(rag, user):
    is_error, msg = call("rag_index", {"collection": "a/b", "path": str(user / "Notes")})
    assert is_error and "cannot be a collection name" in msg and "'/'" in msg and "\n" not in msg
    assert "validation error" not in msg and "pydantic" not in msg

    async def annotations():
        async with Client(build_server()) as client:
            return next(t for t in (await client.list_tools()).tools if t.name == "rag_index").annotations

    a = asyncio.run(annotations())
    assert (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint) == (False, True, True, False)


def test_check_new_root_refuses_system_folders_even_under_an_allowed_root(user, tmp_path):
    for path in ["/etc", "/usr/lib", "/var/log", "/proc", "/dev", "/bin"]:
        with pytest.raises(RootRefused, match="system folder"):
            check_new_root(path, ["/"])
    with pytest.raises(RootRefused, match="hidden"):
        check_new_root(tmp_path / "elsewhere" / ".git", [str(tmp_path)])
    assert check_new_root("~/Notes") == user / "Notes"
    with pytest.raises(RootRefused, match="not a folder"):
        check_new_root("~/Notes/missing")


# -- tools/list and ingestion://metadata stay small ----------------------------------------------

def test_tools_list_and_metadata_resource_stay_small_with_100k_metadata_keys(rag, fake_embedder):
    _, store, _ = rag
    for i in range(30):
        add_doc(store, fake_embedder, "notes", f"n{i}.md", f"note {i}",
                metadata={"area": ["Work", "Home"][i % 2], "status": "draft", "summary": f"{i} " + "x" * 60})
    flood = {f"k{i:06d}": f"value {i}" for i in range(100_000)}
    add_doc(store, fake_embedder, "notes", "flood.md", "a note with a huge frontmatter", metadata=flood)
    [(chunk_id,)] = store.conn.execute("SELECT c.id FROM chunks c JOIN items i ON i.id = c.item_id "
                                       "WHERE i.key = 'flood.md'").fetchall()
    with store.transaction() as conn:  # an index written before facets were bounded per item
        conn.executemany("INSERT INTO chunk_facets(chunk_id, name, value) VALUES (?, ?, ?)",
                         [(chunk_id, f"meta.{k}", v) for k, v in flood.items()])

    async def go():
        async with Client(build_server()) as client:
            listed = await client.list_tools()
            resource = (await client.read_resource("ingestion://metadata")).contents[0].text
            return listed, resource

    listed, resource = asyncio.run(go())
    assert len(listed.model_dump_json(by_alias=True, exclude_none=True)) < 8_000  # 6.9 KB (8.8 KB before)
    schema = next(t for t in listed.tools if t.name == "rag_search").input_schema["properties"]["metadata"]
    props = schema["properties"]
    assert set(props) == {"area", "status"} and set(props["area"]["anyOf"][0]["enum"]) == {"Work", "Home"}
    assert "summary" in schema["description"] and len(schema["description"]) < 600  # long values: named, no enum
    assert schema["additionalProperties"]["anyOf"][0] == {"type": "string"}
    assert len(resource) < 16_000 and json.loads(resource)["notes"]["area"] == ["Home", "Work"]


# -- HTTP: Host and Origin ------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def http_server(**app_args):
    """mcp_server.http_app(**app_args) served by uvicorn on 127.0.0.1 in a thread; yields post(headers)."""
    import uvicorn

    port = free_port()
    app = mcp_server.http_app(port=port, **app_args)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not server.started:
        assert time.time() < deadline and thread.is_alive()
        time.sleep(0.05)
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    base = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

    def post(**headers) -> httpx.Response:
        return httpx.post(f"http://127.0.0.1:{port}/mcp", json=init, timeout=30,
                          headers={**base, **{k.replace("_", "-"): v for k, v in headers.items()}})

    try:
        yield port, post
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def test_http_trusts_only_its_own_and_configured_origins(rag):
    with http_server(allow_origins=["http://localhost:5173/"]) as (port, post):
        assert post(Origin=f"http://127.0.0.1:{free_port()}").status_code == 403
        assert "--allow-origin" in post(Origin="http://127.0.0.1:1").json()["error"]
        for origin in [f"http://127.0.0.1:{port}", f"http://localhost:{port}", f"http://[::1]:{port}",
                       "http://localhost:5173"]:
            assert post(Origin=origin).status_code == 200, origin
        assert post().status_code == 200  # no Origin: not a browser


def test_http_host_names_lan_clients_and_the_refusal_says_how_to_allow(rag):
    with http_server(host="127.0.0.1") as (_, post):
        refused = post(Host="notes.lan:8765")
        assert refused.status_code == 421
        assert "notes.lan" in refused.json()["error"] and "--allow-host notes.lan" in refused.json()["error"]
        assert post(Host="localhost:1234").status_code == 200
    with http_server(host="0.0.0.0", token="s3cret", allow_hosts=["notes.lan"]) as (port, post):
        auth = "Bearer s3cret"
        for name in [socket.gethostname(), socket.getfqdn(), "notes.lan", "NOTES.LAN"]:
            assert post(Host=f"{name}:{port}", Authorization=auth).status_code == 200, name
        assert post(Host=f"notes.lan:{port}").status_code == 401  # the token is still required
        assert post(Host=f"evil.example:{port}", Authorization=auth).status_code == 421
        own = f"http://{socket.gethostname()}:{port}"
        assert post(Host=f"notes.lan:{port}", Origin=own, Authorization=auth).status_code == 200
        assert post(Host=f"notes.lan:{port}", Origin="http://evil.example", Authorization=auth).status_code == 403
