"""One server for a household: two people with keys over TLS through the MCP SDK's streamable HTTP client.

A real `local-rag serve --http --tls` (self-signed certificate, pinned by its printed fingerprint) on a small
index (tests/household.py); ann and bob each run the probe set (every tool and resource at least 50 times,
naming everything in the index) and never see the other's collections; wrong keys are slowed down; a missing
key gets our sentence, not an OAuth flow; the query log names each call's user and no key is ever written.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import ssl
import time
from functools import partial

import httpx
import pytest
from household import (GRANTS, HOUSEHOLD, OWN_WORDS, RESOURCES, build_index, leaks, probe_calls, start_server,
                       write_config)

PER_TOOL = 50  # in-process probe: every tool, resource and tools/list this many times per user
PER_TOOL_HTTP = 4  # the same through the HTTPS server (bench/user_isolation.py runs 50 and more there)


@pytest.fixture(scope="module")
def household(tmp_path_factory, builtin_embedder):
    home = tmp_path_factory.mktemp("household")
    build_index(home, builtin_embedder)
    keys = write_config(home)
    server = start_server(home)
    yield home, keys, server
    server.stop()


async def _session(server, key: str | None, run):
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx2.AsyncClient(headers=headers, verify=server.ssl_context(), timeout=60) as http:
        async with streamable_http_client(server.url, http_client=http) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                return await run(s)


def check_probe(user: str, answers: list[tuple[str, dict, str, bool]], per_tool: int) -> None:
    """No marker of another collection in any answer; every tool probed `per_tool` times; the probe reached
    what the user may see (so it would have shown a leak)."""
    counted: dict[str, int] = {}
    for tool, args, text, _ in answers:
        kind = "resources" if "://" in tool else tool
        counted[kind] = counted.get(kind, 0) + 1
        assert not leaks(text, args, user), (user, tool, args, leaks(text, args, user), text[:500])
    assert all(n >= per_tool for t, n in counted.items() if t != "tools/list") and len(counted) == 14, counted
    shown = " ".join(text for _, _, text, error in answers if not error)
    for coll in GRANTS[user]:
        assert f'"collection":"{coll}"' in shown, (user, coll)
    ok = sum(not error for *_, error in answers)
    assert ok > len(answers) / 2, f"{user}: only {ok} of {len(answers)} calls answered"
    assert not any("Error executing tool" in t and "Traceback" in t for _, _, t, _ in answers)


def test_two_users_never_see_each_others_collections_through_https(household):
    home, keys, server = household
    for user in ("ann", "bob"):
        check_probe(user, asyncio.run(_session(server, keys[user], partial(run_probe, per_tool=PER_TOOL_HTTP))),
                    PER_TOOL_HTTP)
    assert "Traceback" not in server.stderr.read_text()


def test_the_probe_set_leaks_nothing_in_50_calls_per_tool(household):
    """The full probe (50 calls of each tool, 50 resource reads, tools/list) for both users, in-process: the same
    server code as over HTTPS, with the request's user set as http_keys sets it."""
    from mcp.client import Client

    from rag_search.mcp import server as mcp_server
    from rag_search.access import users
    from rag_search.config import Paths

    home, _, _ = household
    mcp_server.close_context()
    mcp_server.open_context(Paths.from_env({"LOCAL_RAG_HOME": str(home)}))

    async def go():
        async with Client(mcp_server.build_server()) as c:
            return await run_probe(c, PER_TOOL)

    try:
        for user in ("ann", "bob"):
            person = users.directory(Paths.from_env({"LOCAL_RAG_HOME": str(home)})).find(household[1][user])
            with users.acting_as(person):
                check_probe(user, asyncio.run(go()), PER_TOOL)
    finally:
        mcp_server.close_context()


async def run_probe(s, per_tool: int) -> list[tuple[str, dict, str, bool]]:
    """(tool or resource, arguments, response text, is error) of the probe set, through session `s`."""
    out = []
    for tool, calls in probe_calls(per_tool).items():
        for args in calls:
            r = await s.call_tool(tool.split(" ")[0], args)  # "rag_search (plan)" is rag_search
            out.append((tool, args, " ".join(c.text for c in r.content), r.is_error))
    for i in range(per_tool):
        uri = RESOURCES[i % len(RESOURCES)]
        out.append((uri, {}, (await s.read_resource(uri)).contents[0].text, False))
    listed = await s.list_tools()
    out.append(("tools/list", {}, listed.model_dump_json(), False))
    return out


def test_another_users_collection_reads_as_one_that_does_not_exist(household):
    _, keys, server = household

    async def run(s):
        out = {}
        for tool, arg in [("rag_collection_info", "collection"), ("rag_list_recent", "collection"),
                          ("rag_get_document", "path_or_id"), ("rag_related", "path_or_id")]:
            for value in (["bob-work", "nothing-here"] if arg == "collection" else ["payroll.md", "nothing-here.md"]):
                r = await s.call_tool(tool, {arg: value})
                out[(tool, value)] = (r.is_error, r.content[0].text.replace(value, "<asked>"))
        r = await s.call_tool("rag_search", {"query": "zeppelin", "collection": "bob-work"})
        out["search"] = (r.is_error, r.content[0].text)
        return out

    out = asyncio.run(_session(server, keys["ann"], run))
    assert out[("rag_collection_info", "bob-work")] == out[("rag_collection_info", "nothing-here")]
    assert out[("rag_list_recent", "bob-work")] == out[("rag_list_recent", "nothing-here")]
    assert out[("rag_get_document", "payroll.md")] == out[("rag_get_document", "nothing-here.md")]
    assert out[("rag_related", "payroll.md")] == out[("rag_related", "nothing-here.md")]
    assert out["search"][0] and "Collections you can read: ann-family, shared-garden." in out["search"][1]


def test_the_certificate_is_the_one_whose_fingerprint_the_server_printed(household):
    _, _, server = household
    host, port = "localhost", int(server.url.split(":")[2].split("/")[0])
    import socket

    with socket.create_connection(("127.0.0.1", port)) as raw, \
            server.ssl_context().wrap_socket(raw, server_hostname=host) as tls:
        der = tls.getpeercert(binary_form=True)
    assert ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest()) == server.fingerprint
    with pytest.raises(httpx.ConnectError):  # not trusted by default: clients pin or trust this certificate
        httpx.post(server.url, json={})


def test_a_missing_or_wrong_key_gets_a_sentence_and_no_oauth(household):
    _, _, server = household
    from mcp.shared.exceptions import MCPError

    async def init_only(s):
        return True

    for key, said in [(None, "This server needs a key"), ("lrag_wrong", "Wrong key")]:
        with pytest.raises(BaseException) as raised:  # the SDK raises our message (inside its task group)
            asyncio.run(_session(server, key, init_only))
        errors = _leaves(raised.value)
        assert any(isinstance(e, MCPError) and said in str(e) for e in errors), errors
    client = httpx.Client(verify=server.ssl_context(), transport=httpx.HTTPTransport(
        verify=server.ssl_context(), local_address="127.0.0.3"))  # its own address: not slowed by other tests
    refused = client.post(server.url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize"})
    assert refused.status_code == 403 and "www-authenticate" not in refused.headers
    assert "needs a key" in refused.json()["error"]["message"]
    for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-authorization-server"):
        assert client.get(server.url.replace("/mcp", path)).status_code == 404


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for e in exc.exceptions for leaf in _leaves(e)]
    return [exc]


def test_wrong_keys_are_slowed_down_per_address(household):
    _, keys, server = household
    ctx = server.ssl_context()
    attacker = httpx.Client(transport=httpx.HTTPTransport(verify=ctx, local_address="127.0.0.2"))
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    headers = {"Accept": "application/json, text/event-stream"}

    def guess(i: int, **extra):
        return attacker.post(server.url, json=init, headers={**headers, "Authorization": f"Bearer lrag_guess{i}",
                                                             **extra})

    # a made-up X-Forwarded-For does not spread the guesses over addresses: no proxy is trusted
    statuses = [guess(i, **{"X-Forwarded-For": f"198.51.100.{i}"}) for i in range(8)]
    assert [r.status_code for r in statuses] == [403] * 6 + [429] * 2  # 5 free, the 6th makes it wait
    assert statuses[6].headers["retry-after"] == "1" and "try again in 1 s" in statuses[6].json()["error"]["message"]
    right = attacker.post(server.url, json=init, headers={**headers, "Authorization": f"Bearer {keys['ann']}"})
    assert right.status_code == 200  # a right key always works, even from an address that waits
    assert guess(9).status_code == 429  # ... and clears nothing: the wrong ones still wait
    elsewhere = httpx.post(server.url, json=init, verify=ctx, headers={**headers, "Authorization": "Bearer x"})
    assert elsewhere.status_code == 403  # other addresses are not affected
    time.sleep(1.1)
    assert guess(10).status_code == 403  # the wait is over: the next wrong key counts, and doubles the wait
    assert guess(11).headers["retry-after"] == "2"


def test_another_users_key_cannot_use_or_end_an_mcp_session(household):
    """bob holding ann's session id (say, from a shared proxy's log) with his own key: the session does not exist
    for him, so he can neither call tools in it nor end it."""
    _, keys, server = household
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    accept = {"Accept": "application/json, text/event-stream"}
    client = httpx.Client(verify=server.ssl_context(), transport=httpx.HTTPTransport(
        verify=server.ssl_context(), local_address="127.0.0.8"))
    opened = client.post(server.url, json=init, headers={**accept, "Authorization": f"Bearer {keys['ann']}"})
    session = opened.headers["mcp-session-id"]
    as_bob = {**accept, "Authorization": f"Bearer {keys['bob']}", "mcp-session-id": session,
              "mcp-protocol-version": "2025-06-18"}
    listed = client.post(server.url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=as_bob)
    ended = client.delete(server.url, headers=as_bob)
    assert listed.status_code == ended.status_code == 404 and "Session not found" in ended.text
    as_ann = {**as_bob, "Authorization": f"Bearer {keys['ann']}"}
    client.post(server.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=as_ann)
    still = client.post(server.url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, headers=as_ann)
    assert still.status_code == 200 and "rag_search" in still.text  # ann's session goes on
    assert client.delete(server.url, headers=as_ann).status_code == 200


def test_the_query_log_names_each_calls_user_and_no_key_is_written(household):
    home, keys, server = household

    async def run(s):
        await s.call_tool("rag_search", {"query": "tomatoes", "tags": ["garden"]})
        return (await s.call_tool("rag_get_document", {"path_or_id": "tomatoes.md"})).is_error

    for user in ("ann", "bob"):
        assert asyncio.run(_session(server, keys[user], run)) is False
    lines = [json.loads(line) for line in (home / "query-log.jsonl").read_text().splitlines()]
    searches = [e for e in lines if e["tool"] == "rag_search" and e["query"] == "tomatoes"]
    assert [e["user"] for e in searches][-2:] == ["ann", "bob"]
    assert searches[-1]["filters"] == {"tags": ["garden"]} and searches[-1]["hits"] == ["tomatoes.md"]
    assert searches[-1]["ms"] > 0 and searches[-1]["time"].endswith("+00:00")
    assert {e["user"] for e in lines} <= {"ann", "bob"}
    assert (home / "query-log.jsonl").stat().st_mode & 0o077 == 0  # queries are private
    written = (home / "query-log.jsonl").read_text() + server.stderr.read_text() + (home / "config.yaml").read_text()
    assert not any(key in written for key in keys.values()) and "lrag_" not in written


def test_the_server_reports_its_version_and_its_startup(household):
    from rag_search import __version__

    _, keys, server = household

    async def version():
        import httpx2
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {keys['ann']}"},
                                      verify=server.ssl_context()) as http:
            async with streamable_http_client(server.url, http_client=http) as (read, write):
                async with ClientSession(read, write) as s:
                    return (await s.initialize()).server_info.version

    assert asyncio.run(version()) == __version__ != ""
    said = server.stderr.read_text()
    assert f"on {server.url.replace('localhost', '127.0.0.1')}" in said and "self-signed certificate" in said
    assert "users: 2 user(s) (ann: ann-family, shared-garden; bob: bob-work, shared-garden)" in said
    assert "Traceback" not in said


def test_the_owner_still_sees_everything_without_keys_in_process(household):
    """stdio stays the local owner's: every collection (an in-process session, as `serve` runs it)."""
    from mcp.client import Client

    from rag_search.mcp import server as mcp_server
    from rag_search.config import Paths

    home, _, _ = household
    mcp_server.close_context()
    mcp_server.open_context(Paths.from_env({"LOCAL_RAG_HOME": str(home)}))

    async def go():
        async with Client(mcp_server.build_server()) as c:
            return json.loads((await c.call_tool("rag_list_collections", {})).content[0].text)

    try:
        assert {c["name"] for c in asyncio.run(go())["collections"]} == set(HOUSEHOLD)
    finally:
        mcp_server.close_context()


def test_ssl_context_refuses_another_certificate(household, tmp_path):
    """A client pinning this server's certificate refuses another one (say, a man in the middle's)."""
    from rag_search.access import tls

    home, _, server = household
    other = tls.certificate(tmp_path, {"localhost"})
    assert other.fingerprint != server.fingerprint
    with pytest.raises(httpx.ConnectError):
        httpx.post(server.url, json={}, verify=ssl.create_default_context(cafile=str(other.cert)))


# -- the search page at / of the same server ---------------------------------------------------------

def _page(server, address: str) -> httpx.Client:
    return httpx.Client(base_url=server.url.removesuffix("/mcp"), follow_redirects=False, transport=httpx.HTTPTransport(
        verify=server.ssl_context(), local_address=address))  # an address of its own: its own wrong-key budget


def test_the_search_page_signs_people_in_with_their_key_and_shows_only_their_collections(household):
    _, keys, server = household
    assert "/login" in _page(server, "127.0.0.5").get("/?q=garden").headers["location"]
    words = [w for ws in OWN_WORDS.values() for w in ws] + ["tomatoes", "holidays", "salaries"]
    asks = [("/", {"q": w}) for w in words] + [("/results", {"q": w, "collection": c}) for w in words[:4]
                                               for c in HOUSEHOLD] + \
        [(f"/item/{i}", {}) for i in range(1, 16)] + [("/status", {})]
    for user in ("ann", "bob"):
        page = _page(server, "127.0.0.5")
        assert page.post("/login", data={"key": keys[user], "next": "/"}).status_code == 303
        shown = ""
        for path, params in asks:
            answer = page.get(path, params=params)
            assert answer.status_code in (200, 400, 404), (user, path, params, answer.status_code)
            assert not leaks(answer.text, params, user), (user, path, params, leaks(answer.text, params, user))
            shown += answer.text if answer.status_code == 200 else ""
        assert all(coll in shown for coll in GRANTS[user]) and "tomatoes" in shown.lower(), user
        bearer = _page(server, "127.0.0.5").get("/?q=zeppelin", headers={"Authorization": f"Bearer {keys[user]}"})
        assert bearer.status_code == 200 and not leaks(bearer.text, {"q": "zeppelin"}, user)


def test_wrong_keys_on_the_login_page_count_against_the_address_as_on_mcp(household):
    _, keys, server = household
    page = _page(server, "127.0.0.6")
    tries = [page.post("/login", data={"key": f"lrag_guess{i}"}) for i in range(8)]
    assert [r.status_code for r in tries] == [401] * 6 + [429] * 2  # 5 free, the 6th makes it wait
    assert "not a key of this server" in tries[0].text and "try again in 1 s" in tries[6].text
    assert "<form" in tries[6].text  # a page to try again from, not a bare status
    mcp = page.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize"},
                    headers={"Authorization": "Bearer lrag_guess9"})
    assert mcp.status_code == 429  # one budget for the page and MCP
    signed = page.post("/login", data={"key": keys["ann"]})
    assert signed.status_code == 303  # a right key signs in, even from an address that waits
