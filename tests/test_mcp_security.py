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

from rag_search.mcp import server as mcp_server
from rag_search.config import Paths, Settings
from rag_search.errors import RootRefused
from rag_search.mcp.server import RagContext, build_server
from rag_search.retrieval import SearchEngine
from rag_search.access.roots import check_new_root
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
    assert len(listed.model_dump_json(by_alias=True, exclude_none=True)) < 10_500  # 10 KB with rag_batch_search, rag_context and query plans (6.9 KB without)
    schema = next(t for t in listed.tools if t.name == "rag_search").input_schema["properties"]["metadata"]
    props = schema["properties"]
    assert set(props) == {"area", "status"} and set(props["area"]["anyOf"][0]["enum"]) == {"Work", "Home"}
    assert "summary" in schema["description"] and len(schema["description"]) < 600  # long values: named, no enum
    assert schema["additionalProperties"]["anyOf"][0] == {"type": "string", "maxLength": 200}
    assert schema["maxProperties"] == 50
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
        assert post(Host=f"notes.lan:{port}").status_code == 403  # the token is still required (403: see http_keys)
        assert post(Host=f"evil.example:{port}", Authorization=auth).status_code == 421
        own = f"http://{socket.gethostname()}:{port}"
        assert post(Host=f"notes.lan:{port}", Origin=own, Authorization=auth).status_code == 200
        assert post(Host=f"notes.lan:{port}", Origin="http://evil.example", Authorization=auth).status_code == 403


# -- a folder rag_index added that now leads elsewhere -------------------------------------------

def swap_for_link(folder: Path, target: Path) -> None:
    """The folder replaced by a symlink to `target` (what a user, a sync tool or another program may do)."""
    import shutil

    shutil.rmtree(folder)
    folder.symlink_to(target)


def test_a_folder_that_now_leads_outside_is_not_indexed_again(rag, user, tmp_path):
    paths, _, ran = rag
    (user / "swapme").mkdir()
    secret = tmp_path / "outside"
    secret.mkdir()
    assert not call("rag_index", {"collection": "swapme", "path": "~/swapme"})[0]
    assert "follow_symlinks_outside" not in registry(paths)["swapme"]["sources"][0]  # links inside stay inside
    swap_for_link(user / "swapme", secret)
    for args in ({"collection": "swapme"}, {"collection": "swapme", "path": "~/swapme"}):
        is_error, msg = call("rag_index", args)
        assert is_error and "\n" not in msg, msg
        assert f"for {user / 'swapme'}, which now leads to {secret}" in msg and "outside your home folder" in msg
        assert "mcp.allowed_roots" in msg and str(paths.config) in msg and "Nothing was indexed" in msg
    (user / "swapme").unlink()
    (user / "swapme").symlink_to(user / ".ssh")
    assert "hidden folder" in call("rag_index", {"collection": "swapme"})[1]
    assert ran == [["swapme"]]  # only the first run, before the swap


def test_collections_the_user_made_are_trusted_as_before(rag, user, tmp_path):
    from rag_pipelines.config import register_collection, validate_collection

    paths, _, ran = rag
    (tmp_path / "outside").mkdir()
    (user / "mine").symlink_to(tmp_path / "outside")
    register_collection(paths, validate_collection(  # what `local-rag index project mine ~/mine` writes
        {"name": "mine", "kind": "project", "sources": [{"type": "project", "paths": [str(user / "mine")]}]}))
    assert not call("rag_index", {"collection": "mine"})[0]
    (user / "theirs").mkdir()
    assert not call("rag_index", {"collection": "theirs", "path": "~/theirs"})[0]
    swap_for_link(user / "theirs", tmp_path / "outside")
    paths.config.write_text(yaml.safe_dump({"mcp": {"allowed_roots": [str(tmp_path / "outside")]}}))
    assert not call("rag_index", {"collection": "theirs"})[0]  # the user allowed where it leads now
    assert ran == [["mine"], ["theirs"], ["theirs"]]


def test_items_of_a_collection_whose_folder_now_leads_outside_are_not_served(rag, user, tmp_path, fake_embedder):
    paths, store, _ = rag
    (user / "swapme").mkdir()
    assert not call("rag_index", {"collection": "swapme", "path": "~/swapme"})[0]
    # what a run started elsewhere (the CLI, a sensor) indexed while the folder led outside
    for key in ("secret.md", "secret-2.md"):
        add_doc(store, fake_embedder, "swapme", key, "the launch code is swordfish", tags=("plans",),
                metadata={"clearance": "cosmic"})
    for key in ("plan.md", "plan-2.md"):  # clearance: a category the rag_search schema lists as an enum
        add_doc(store, fake_embedder, "notes", key, "the launch plan for swordfish", tags=("plans",),
                metadata={"clearance": "low"})
    (tmp_path / "outside").mkdir()
    swap_for_link(user / "swapme", tmp_path / "outside")

    def served() -> str:
        async def go():
            async with Client(build_server()) as client:
                out = [await client.call_tool(t, a) for t, a in [
                    ("rag_search", {"query": "swordfish launch"}),
                    ("rag_search_by_tag", {"tag": "plans"}),
                    ("rag_search_by_tag", {"tag": "plans", "query": "launch"}),
                    ("rag_list_recent", {}),
                    ("rag_related", {"path_or_id": "plan.md"}),
                    ("rag_status", {})]]
                listed = await client.list_tools()
                resources = [(await client.read_resource(u)).contents[0].text
                             for u in ("ingestion://metadata", "ingestion://failures", "rag://stats")]
            assert not any(r.is_error for r in out), [r.content[0].text for r in out if r.is_error]
            return " ".join([r.content[0].text for r in out] + [listed.model_dump_json()] + resources)

        return asyncio.run(go())

    shown = served()
    assert "plan.md" in shown and "secret.md" not in shown and "swordfish" in shown
    assert "launch code" not in shown and "cosmic" not in shown and "Left out: Collection 'swapme'" in shown
    for tool, args in [("rag_get_document", {"path_or_id": "secret.md"}),
                       ("rag_search", {"query": "launch", "collection": "swapme"}),
                       ("rag_collection_info", {"collection": "swapme"}),
                       ("rag_list_recent", {"collection": "swapme"}),
                       ("rag_related", {"path_or_id": "secret.md"})]:
        is_error, msg = call(tool, args)
        assert is_error and "now leads to" in msg and "not shown to AI assistants" in msg, (tool, msg)
    (user / "swapme").unlink()
    (user / "swapme").mkdir()  # the folder is back: its items are served again
    assert "launch code" in served()


# -- arguments past their bounds ------------------------------------------------------------------

def test_arguments_past_their_bounds_are_refused_in_one_sentence(rag, user, fake_embedder):
    _, store, ran = rag
    add_doc(store, fake_embedder, "notes", "n.md", "a note")
    huge = "word " * 200_000  # 1 MB
    refused = [
        ("rag_search", {"query": huge}, "query is 1,000,000 characters long; at most 2,000"),
        ("rag_search_by_tag", {"tag": "x", "query": huge}, "at most 2,000"),
        ("rag_search", {"query": "note", "days": 10**12}, "days must be at most 365,000 (got 1000000000000)"),
        ("rag_search", {"query": "note", "date_from": "99999999999999999999d"}, "reaches back more than 365,000 days"),
        ("rag_search", {"query": "note", "date_to": "9" * 5000 + "d"}, "at most 64"),
        ("rag_search", {"query": "note", "metadata": {f"k{i}": "v" for i in range(10_000)}}, "metadata has 10,000 entries; at most 50"),
        ("rag_search", {"query": "note", "metadata": {"k": ["v"] * 10_000}}, "a value in metadata has 10,000 entries"),
        ("rag_search", {"query": "note", "tags": ["t"] * 10_000}, "tags has 10,000 entries; at most 50"),
        ("rag_search", {"query": "note", "tags": ["t" * 10_000]}, "a value in tags is 10,000 characters long; at most 200"),
        ("rag_search", {"query": "note", "source_type": ["pdf"] * 10_000}, "source_type has 10,000 entries"),
        ("rag_search", {"query": "note", "top_k": 0}, "top_k must be at least 1 (got 0)"),
        ("rag_search", {"query": "note", "top_k": 201}, "top_k must be at most 200"),
        ("rag_search", {"query": "note", "top_k": "ten"}, "top_k: input should be a valid integer"),
        ("rag_search", {"query": "note", "mode": "fuzzy"}, "mode: input should be 'hybrid', 'keyword' or 'semantic'"),
        ("rag_get_document", {"collection": "notes"}, "rag_get_document: path_or_id is required."),
        ("rag_search", {"query": "note", "path_prefix": "/a\x00b"}, "path_prefix contains a NUL character"),
        ("rag_get_document", {"path_or_id": "n.md\x00/etc/passwd"}, "path_or_id contains a NUL character"),
        ("rag_get_document", {"path_or_id": "x" * 5000}, "at most 4,096"),
        ("rag_index", {"collection": "x", "path": str(user / "Notes") + "\x00"}, "path contains a NUL character"),
        ("rag_index", {"collection": "x" * 10_000, "path": str(user / "Notes")}, "collection is 10,000 characters"),
        ("rag_related", {"path_or_id": "n.md", "top_k": -1}, "top_k must be at least 1"),
        ("rag_search_by_tag", {"tag": "x", "top_k": 0}, "top_k must be at least 1"),
        ("rag_list_recent", {"limit": -1}, "limit must be at least 1 (got -1)"),
        ("rag_list_recent", {"days": 10**20}, "days must be at most 365,000"),
        ("rag_collection_info", {"collection": ["notes"]}, "collection: input should be a valid string"),
    ]

    async def go():
        async with Client(build_server()) as client:
            return [await client.call_tool(tool, args) for tool, args, _ in refused]

    for (tool, args, why), result in zip(refused, asyncio.run(go())):
        msg = result.content[0].text
        assert result.is_error and why in msg, (tool, msg)
        assert len(msg) < 400 and "\n" not in msg and "validation error" not in msg and "pydantic" not in msg, msg
    assert ran == []


def test_a_search_at_every_bound_answers(rag, fake_embedder):
    """The bounds are safe: the largest query, the most tags, people, metadata keys and values, the longest span."""
    _, store, _ = rag
    for i in range(3):
        add_doc(store, fake_embedder, f"c{i}", f"n{i}.md", f"note {i}", tags=("t0",), metadata={"k0": "v0"})
    fifty = [f"v{i}" for i in range(50)]
    args = {"query": ("aa bb cc dd " * 500)[:2_000], "top_k": 200, "days": 365_000, "collections": ["c0", "c1", "c2"],
            "tags": [f"t{i}" for i in range(50)], "participants": [f"Person {i}" for i in range(50)],
            "metadata": {f"k{i}": fifty for i in range(50)}, "source_type": ["markdown"] * 50,
            "author": "a" * 200, "date_to": "today"}

    async def go():
        async with Client(build_server()) as client:
            return [await client.call_tool("rag_search", args),
                    await client.call_tool("rag_list_recent", {"days": 365_000, "limit": 200}),
                    await client.call_tool("rag_search", {"query": "note", "date_from": "1000y"})]

    results = asyncio.run(go())
    for result in results:
        assert not result.is_error, result.content[0].text
    assert len(json.loads(results[0].content[0].text)["query"]) < 250  # the query is not echoed whole


def test_http_host_header_is_a_host_and_a_port_and_nothing_else(rag):
    with http_server(host="127.0.0.1") as (port, post):
        for host in [f"localhost:{port}@evil.com", f"localhost@evil.com:{port}", f"localhost:{port}/x",
                     f"localhost:{port}:1", f"localhost:{port} evil.com", "localhost:99999", f"[::1]x:{port}",
                     f"127.0.0.1:{port}#.evil.com", "localhost:", ":8765"]:
            refused = post(Host=host)
            assert refused.status_code == 421, host
            assert "not a valid Host header" in refused.json()["error"], host
        for host in [f"localhost:{port}", "LOCALHOST", f"127.0.0.1:{port}", f"[::1]:{port}", "[::1]"]:
            assert post(Host=host).status_code == 200, host


# -- rag_index as a person with a key --------------------------------------------------------------

def test_a_user_adds_folders_only_under_their_roots_and_sees_only_what_they_added(rag, user, fake_embedder):
    from rag_search.access import users

    paths, store, ran = rag
    config = yaml.safe_load(paths.config.read_text())
    config["users"] = {"ann": {"key_sha256": "a" * 64, "roots": [str(user / "Notes")]},
                       "bob": {"key_sha256": "b" * 64, "collections": ["shared"]}}
    paths.config.write_text(yaml.safe_dump(config))
    ann, bob = (users.directory(paths).users[h * 64] for h in "ab")
    with users.acting_as(ann):
        assert not call("rag_index", {"collection": "ann-notes", "path": "~/Notes/Work"})[0]
        is_error, msg = call("rag_index", {"collection": "elsewhere", "path": "~/Other"})
        assert is_error and f"under your roots ({user / 'Notes'})" in msg
    assert users.made(paths) == {"ann": ["ann-notes"]} and "elsewhere" not in registry(paths)
    add_doc(store, fake_embedder, "ann-notes", "plan.md", "ann's plan")  # what the run indexed
    add_doc(store, fake_embedder, "shared", "list.md", "a shared list")
    with users.acting_as(ann):
        assert [c["name"] for c in json.loads(call("rag_list_collections", {})[1])["collections"]] == ["ann-notes"]
    with users.acting_as(bob):
        assert [c["name"] for c in json.loads(call("rag_list_collections", {})[1])["collections"]] == ["shared"]
        for args, said in [({"collection": "ann-notes"}, "No collection named 'ann-notes' that you can index"),
                           ({"collection": "nope"}, "No collection named 'nope' that you can index")]:
            is_error, msg = call("rag_index", args)
            assert is_error and said in msg and str(user / "Notes") not in msg, (args, msg)
        # a name another user holds reads as any folder bob may not add: one answer, whichever the reason
        taken = call("rag_index", {"collection": "ann-notes", "path": "~/Other"})
        refused = call("rag_index", {"collection": "ann-notez", "path": "~/Other"})
        assert taken[0] and refused[0] and taken[1].replace("ann-notes", "X") == refused[1].replace("ann-notez", "X")
        assert "none yet: ask the server's owner" in taken[1]
    assert ran == [["ann-notes"]]


def test_what_a_user_added_belongs_to_their_id_not_their_name(rag, user):
    """A user removed and a new one given the same name: the new one does not see what the old one added."""
    from rag_search.access import users

    paths, _, _ = rag
    old = users.User("ann", frozenset(), (str(user / "Notes"),), uid="u:" + "1" * 24)
    users.remember_made(paths, old, "ann-notes")
    new = users.User("ann", frozenset(), (), uid="u:" + "2" * 24)
    assert users.visible(paths, old) == {"ann-notes"} and users.visible(paths, new) == frozenset()
    legacy = users.User("ann")  # written before ids: their name is their id, as the records it made say
    users.remember_made(paths, legacy, "legacy-notes")
    assert users.visible(paths, legacy) == {"legacy-notes"} and "legacy-notes" not in users.visible(paths, new)
    users.forget_made(paths, old.id)
    assert users.visible(paths, old) == frozenset()


def test_a_user_added_to_the_config_of_a_running_server_connects_at_once(rag):
    """Keys are looked up in config.yaml as it is now: `local-rag users add` needs no restart."""
    from rag_search.access import users

    paths, _, _ = rag
    with http_server(host="127.0.0.1") as (port, post):
        assert post().status_code == 200  # no keys yet: loopback is the owner's
        key = users.new_key()
        config = yaml.safe_load(paths.config.read_text()) | {
            "users": {"carol": {"key_sha256": users.key_hash(key), "collections": []}}}
        paths.config.write_text(yaml.safe_dump(config))
        assert post().status_code == 403  # from now on, a key is needed
        assert post(Authorization=f"Bearer {key}").status_code == 200
        paths.config.write_text(yaml.safe_dump({k: v for k, v in config.items() if k != "users"}))
        assert post(Authorization=f"Bearer {key}").status_code == 200  # no users left: loopback is open again
