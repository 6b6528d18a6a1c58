"""The page as `local-rag serve --http` builds it (every guard: Host/Origin, keys, sessions, CSRF), in process: server-side
sessions that end on sign out, a new key, a removed user and expiry; forms from the page itself (Origin null only
with Sec-Fetch-Site: same-origin) and refusals as pages; what each user's page offers and logs. The real process
in a real browser: test_web_served.py."""

from __future__ import annotations

import json
import re
import stat

import pytest
import web_fixture
import yaml
from click.testing import CliRunner
from starlette.testclient import TestClient

from rag_search.access import http_keys, sessions, users
from rag_search.access.query_log import QueryLog
from rag_search.config import LiveSettings, load_settings
from rag_search.mcp import server as mcp_server
from rag_search.mcp.context import RagContext
from rag_search.web.mount import page_for
from rag_search.web.security import COOKIE

TOKEN = "owner-token-" + "x" * 24
BASE = "http://127.0.0.1:8765"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The web fixture's home with two users (ann: notes, books; bob: gmail, slack), served as `serve` does."""
    home = web_fixture.build(tmp_path_factory.mktemp("sessions"))
    keys = {"ann": users.new_key(), "bob": users.new_key()}
    grants = {"ann": ["notes", "books"], "bob": ["gmail", "slack"]}
    config = {"people": {"known": {"Ann Example": ["ann@example.com"], "Zed Nobody": ["zed@nowhere.example"]}},
              "users": {n: {"key_sha256": users.key_hash(k), "id": users.new_id(), "collections": grants[n]}
                        for n, k in keys.items()}}
    home.paths.config.write_text(yaml.safe_dump(config))
    live = LiveSettings(home.paths.config, interval=0)
    ctx = RagContext(home.paths, live.settings, home.store, home.embedder, home.backend.engine,
                     home.backend.directory, live)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mcp_server, "_context", ctx)
        mp.setattr(mcp_server, "_queries", None)
        mcp_server.log_queries(QueryLog(home.paths.home), on_by_default=True)
        access = http_keys.Access(home.paths, TOKEN, open_when_keyless=True)
        app = mcp_server.http_app(port=8765, token=TOKEN, paths=home.paths, access=access,
                                  web=page_for(ctx, access, home.paths, mcp_server.record_query))
        yield app, home, keys, access
    home.store.close()


def client(app, address: str = "127.0.0.1") -> TestClient:
    return TestClient(app, base_url=BASE, follow_redirects=False, client=(address, 50000))


def sign_in(app, key: str, address: str = "127.0.0.1") -> TestClient:
    c = client(app, address)
    answer = c.post("/login", data={"key": key, "next": "/"}, headers={"Origin": BASE})
    assert answer.status_code == 303, answer.text
    return c


def signed_out(c: TestClient) -> bool:
    answer = c.get("/?q=garden")
    return answer.status_code == 303 and answer.headers["location"].startswith("/login")


def csrf(c: TestClient) -> str:
    return re.search(r'name="csrf" value="([0-9a-f]+)"', c.get("/status").text).group(1)


def test_a_cookie_copied_before_sign_out_is_refused_after_it(served):
    app, home, keys, _ = served
    ann = sign_in(app, keys["ann"])
    cookie = ann.cookies[COOKIE]
    assert keys["ann"] not in cookie and users.key_hash(keys["ann"]) not in cookie  # a random id, not the key
    copy = client(app)
    copy.cookies.set(COOKIE, cookie)
    assert not signed_out(copy)
    out = ann.post("/logout", data={"csrf": csrf(ann)}, headers={"Origin": BASE})
    assert out.status_code == 303 and out.headers["location"] == "/login"
    assert signed_out(copy) and signed_out(ann)
    stored = (home.paths.home / sessions.FILE).read_text()
    assert cookie not in stored and keys["ann"] not in stored  # the server keeps hashes
    assert stat.S_IMODE((home.paths.home / sessions.FILE).stat().st_mode) == 0o600


def test_a_new_key_or_a_removed_user_ends_their_sign_ins(served, monkeypatch):
    app, home, keys, _ = served
    monkeypatch.setenv("LOCAL_RAG_HOME", str(home.paths.home))
    run = lambda *args: CliRunner().invoke(mcp_server_cli(), ["users", *args], catch_exceptions=False)  # noqa: E731
    assert run("add", "carol", "-c", "notes").exit_code == 0
    first = run("key", "carol").stdout.strip()
    carol = sign_in(app, first)
    bystander = sign_in(app, keys["bob"])
    new = run("key", "carol")
    assert "1 sign-in(s) to the search page ended" in new.stderr
    assert signed_out(carol) and not signed_out(bystander)
    carol = sign_in(app, new.stdout.strip())
    config = home.paths.config.read_text()
    home.paths.config.write_text(config.replace(users.key_hash(new.stdout.strip()), users.key_hash("lrag_other")))
    assert signed_out(carol)  # the key changed behind the server's back (an edit): the session's key is gone
    home.paths.config.write_text(config)
    carol = sign_in(app, new.stdout.strip())
    assert "1 sign-in(s) to the search page ended" in run("remove", "carol").stderr
    assert signed_out(carol)


def mcp_server_cli():
    from rag_search.cli.main import cli

    return cli


def test_a_session_ends_when_it_expires(tmp_path):
    now = [1000.0]
    store = sessions.Sessions(tmp_path, clock=lambda: now[0])
    sid = store.start("u:1", "a" * 64)
    valid = {sessions.key_fingerprint("a" * 64): "u:1"}
    assert store.find(sid, valid) is not None and store.find(sid + "x", valid) is None
    assert store.find(sid, {sessions.key_fingerprint("a" * 64): "u:2"}) is None  # another user's key: no
    sid = store.start("u:1", "a" * 64)
    now[0] += sessions.LIFETIME + 1
    assert store.find(sid, valid) is None
    assert json.loads((tmp_path / sessions.FILE).read_text())["sessions"] == {}  # forgotten, not just refused


def test_the_pages_own_forms_pass_and_other_origins_get_a_page_that_says_why(served):
    app, _, keys, _ = served
    c = client(app)
    null = c.post("/login", data={"key": keys["ann"]}, headers={"Origin": "null"})
    assert null.status_code == 403 and null.headers["content-type"].startswith("text/html")
    assert "Origin: null" in null.text and "allow-origin" not in null.text
    same = c.post("/login", data={"key": keys["ann"]}, headers={"Origin": "null", "Sec-Fetch-Site": "same-origin"})
    assert same.status_code == 303  # a browser that hides the origin but says the form is this site's own
    forged = c.post("/login", data={"key": keys["ann"]}, headers={"Origin": "null", "Sec-Fetch-Site": "cross-site"})
    assert forged.status_code == 403
    other = c.post("/index", data={"collection": "notes"}, headers={"Origin": "https://evil.example"})
    assert other.status_code == 403 and "another site" in other.text and "<!doctype html>" in other.text
    mcp = c.post("/mcp", json={}, headers={"Origin": "null", "Sec-Fetch-Site": "same-origin"})
    assert mcp.status_code == 403 and mcp.json()["error"].startswith("Origin 'null' is not trusted")
    host = c.get("/", headers={"Host": "evil.example"})
    assert host.status_code == 421 and "<h1>Wrong address</h1>" in host.text
    page = c.get("/login")
    assert page.headers["referrer-policy"] == "same-origin"  # so the page's form posts carry its Origin
    with pytest.raises(Exception, match="cannot be trusted"):
        mcp_server.http_app(port=8765, allow_origins=["null"], paths=served[1].paths, access=served[3])


def test_refusals_and_expired_forms_are_pages_that_say_what_to_do(served):
    app, _, keys, _ = served
    ann = sign_in(app, keys["ann"])
    expired = ann.post("/index", data={"collection": "notes", "csrf": "old"}, headers={"Origin": BASE})
    assert expired.status_code == 403 and "reload the page" in expired.text and "<html" in expired.text
    fragment = client(app).get("/results?q=garden")
    assert fragment.status_code == 401 and 'href="/login"' in fragment.text
    assert ann.get("/item/" + "9" * 20).status_code == 404  # past SQLite's integers: not found, not a crash
    assert ann.get("/item/12345678").status_code == 404


def test_each_users_page_offers_only_the_people_of_their_collections_and_logs_their_searches(served):
    app, home, keys, _ = served
    bob, ann = sign_in(app, keys["bob"]), sign_in(app, keys["ann"])
    people = lambda c: re.findall(r'<datalist id="people">(.*?)</datalist>', c.get("/").text)[0]  # noqa: E731
    assert "Ann Example" in people(bob)  # she writes in bob's mail and chats
    assert "Ann Example" not in people(ann) and "Zed Nobody" not in people(bob)  # the owner's address book stays his
    bob.get("/?q=offsite+venue")
    ann.get("/results?q=compost")
    lines = [json.loads(x) for x in (home.paths.home / "query-log.jsonl").read_text().splitlines()]
    page = [e for e in lines if e["tool"] == "page"]
    assert [(e["user"], e["query"]) for e in page][-2:] == [("bob", "offsite venue"), ("ann", "compost")]
    assert page[-1]["hits"][0] == "Compost.md" and not any("@" in h or "/" in h for h in page[-1]["hits"])
    config = yaml.safe_load(home.paths.config.read_text())
    home.paths.config.write_text(yaml.safe_dump(config | {"server": {"query_log": False}}))  # off, while it runs
    ann.get("/?q=bramble")
    after = (home.paths.home / "query-log.jsonl").read_text().splitlines()
    assert len(after) == len(lines) and mcp_server.active_log() is None
    home.paths.config.write_text(yaml.safe_dump(config))
    ann.get("/?q=bramble")
    assert len((home.paths.home / "query-log.jsonl").read_text().splitlines()) == len(lines) + 1


def test_dagster_run_links_only_where_the_visitor_can_reach_the_ui(served):
    app, home, keys, _ = served
    local, remote = sign_in(app, keys["ann"]), sign_in(app, keys["ann"], "192.0.2.10")
    assert "Runs open in the Dagster UI at http://127.0.0.1:3000" in local.get("/status").text
    assert "Dagster UI" not in remote.get("/status").text  # its 127.0.0.1 is the visitor's own machine
    config = yaml.safe_load(home.paths.config.read_text())
    home.paths.config.write_text(yaml.safe_dump(config | {"server": {"dagster_url": "https://nas.example:3000"}}))
    try:
        assert "Runs open in the Dagster UI at https://nas.example:3000" in remote.get("/status").text
    finally:
        home.paths.config.write_text(yaml.safe_dump(config))


def test_rag_status_shows_a_broken_configs_error_only_to_the_owner(served):
    _, home, _, _ = served
    ctx = mcp_server._context
    good = home.paths.config.read_text()
    home.paths.config.write_text(good + "\nsearch: {top_k: lots}\n")
    try:
        ctx.refresh(max_age=0)
        owner = mcp_server.status(ctx)["config"]
        ann = next(u for u in users.directory(home.paths).users.values() if u.name == "ann")
        with users.acting_as(ann):
            theirs = mcp_server.status(ctx)["config"]
        assert "top_k" in owner["error"] and str(home.paths.config) == owner["file"]
        assert theirs == {"loaded": owner["loaded"], "note": mcp_server.BROKEN_CONFIG}
        assert "top_k" not in json.dumps(theirs) and str(home.paths.home) not in json.dumps(theirs)
    finally:
        home.paths.config.write_text(good)
        ctx.refresh(max_age=0)


def test_the_home_is_private_and_a_home_that_cannot_be_made_is_a_sentence(tmp_path, monkeypatch):
    from rag_search.cli.main import cli
    from rag_search.store import Store

    home = tmp_path / "new" / "home"
    monkeypatch.setenv("LOCAL_RAG_HOME", str(home))
    assert CliRunner().invoke(cli, ["users", "add", "ann"]).exit_code == 0
    Store.open(home / "rag.db").close()
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    for name in ("config.yaml", "rag.db"):
        assert stat.S_IMODE((home / name).stat().st_mode) == 0o600, name
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("LOCAL_RAG_HOME", str(tmp_path / "a-file" / "home"))
    out = CliRunner().invoke(cli, ["users", "add", "bob"])
    assert out.exit_code != 0 and "Cannot create the folder" in out.output and "Traceback" not in out.output
    assert out.exception is None or isinstance(out.exception, SystemExit)


def test_load_settings_reads_what_users_add_writes(served):
    """The ids `users add` writes validate (a config with them loads)."""
    assert all(re.fullmatch(r"u:[0-9a-f]{24}", u.id) for u in load_settings(served[1].paths.config).users.values())
