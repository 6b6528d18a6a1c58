"""The search page (rag_search/web) over HTTP without a browser: search and filters as GET parameters, items opened
by kind and rendered safely, related items, the token login, a gate that narrows collections, and the page mounted
beside MCP behind the server's Host and Origin checks. Browser tests: test_web_browser.py."""

from __future__ import annotations

import re
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest
import web_fixture
from starlette.testclient import TestClient

from rag_search.web import Principal, TokenGate, web_app
from rag_search.web.security import COOKIE


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    h = web_fixture.build(tmp_path_factory.mktemp("web"))
    yield h
    h.store.close()


@pytest.fixture
def client(home):
    return TestClient(web_app(home.backend, TokenGate(None)), base_url="http://127.0.0.1:8765")


def titles(html: str) -> list[str]:
    return re.findall(r'<a class="open" href="[^"]*">([^<]*)</a>', html)


def collections_of(html: str) -> set[str]:
    return set(re.findall(r'<span class="coll">([^<]*)</span>', html))


# -- search ---------------------------------------------------------------------------------------

def test_a_results_page_is_a_get_form_and_a_bookmark(client, home):
    garden = web_fixture.item_id(home.store, "notes", "Garden")
    page = client.get("/?q=bramble")
    assert page.status_code == 200
    assert '<form id="search" class="search" method="get" action="/"' in page.text
    assert 'value="bramble"' in page.text  # the box shows the query back
    assert titles(page.text)[0] == "Garden"
    assert f'href="/item/{garden}?chunk=4&amp;q=bramble#match"' in page.text  # opens at the matching passage
    assert "<mark>bramble</mark>" in page.text
    fragment = client.get("/results?q=bramble")
    assert fragment.status_code == 200 and "<html" not in fragment.text and titles(fragment.text)[0] == "Garden"


def test_a_hit_shows_kind_date_people_and_other_matching_sections(client):
    mail = client.get("/?q=Bavaria&collection=gmail").text
    hit = mail[mail.index('<li class="hit">'):mail.index("</li>")]
    assert '<span class="kind">email</span>' in hit and "<time>2026-03-03" in hit
    assert "Ann Example &lt;ann@example.com&gt;" in hit and "Bob Stone" in hit  # sender, then the others
    note = client.get("/?q=soil+patience+bramble&collection=notes").text
    assert re.search(r'Also matches: <a href="[^"]*chunk=\d&amp;q=soil%20patience%20bramble#match">Garden › (Beds|Hedge)</a>',
                     note)


def test_filters_narrow_the_results(client):
    assert collections_of(client.get("/?q=offsite&collection=gmail").text) == {"gmail"}
    assert collections_of(client.get("/?q=offsite&collection=slack").text) == {"slack"}
    assert titles(client.get("/?q=garden&tag=garden").text) == ["Garden"]
    assert set(re.findall(r'<span class="kind">([^<]*)</span>', client.get("/?q=garden&type=markdown").text)) == {
        "markdown"}
    with_ann = client.get("/?q=offsite&person=Ann").text  # the people directory: her address and her Slack id
    assert {"gmail", "slack"} <= collections_of(with_ann)
    assert collections_of(client.get("/?q=offsite&person=nobody-like-this").text) == set()
    dated = titles(client.get("/?q=offsite&collection=gmail&after=2026-03-04&before=2026-03-04").text)
    assert "Re: Offsite in March: venue decision" in dated and "Offsite in March: venue decision" not in dated


def test_relative_dates_and_a_bad_date_say_what_to_write(client):
    assert titles(client.get("/?q=offsite&collection=gmail&after=7d").text) == []  # the mail is from March 2026
    assert titles(client.get("/?q=offsite&collection=gmail&before=last+month").text)
    bad = client.get("/?q=offsite&after=soonish")
    assert bad.status_code == 400 and "Cannot read the date" in bad.text and "last month" in bad.text
    assert "Unknown mode" in client.get("/results?q=x&mode=psychic").text


def test_an_index_built_by_another_embedder_is_an_error_on_the_page_that_says_what_to_run(home):
    from fakes import HashEmbedder

    from rag_search.retrieval import SearchEngine
    from rag_search.web import Backend

    other = Backend(home.paths, home.store, SearchEngine(home.store, HashEmbedder(32)))
    page = TestClient(web_app(other, TokenGate(None))).get("/?q=garden")
    assert page.status_code == 400 and "local-rag reembed" in page.text


# -- items ----------------------------------------------------------------------------------------

def test_a_note_is_rendered_from_markdown_without_its_html_or_script_links(client, home):
    garden = web_fixture.item_id(home.store, "notes", "Garden")
    page = client.get(f"/item/{garden}?chunk=4&q=bramble")
    assert page.status_code == 200
    body = page.text[page.text.index('<div class="body'):]
    assert "<script>alert" not in page.text and "<img" not in body
    assert "&lt;script&gt;alert('note script')&lt;/script&gt;" in body  # shown as text
    assert "[click me](javascript:alert('link'))" in body  # a link markdown-it refuses stays text
    assert 'href="javascript:' not in page.text
    assert '<a href="https://example.org/page">normal link</a>' in body
    compost = web_fixture.item_id(home.store, "notes", "Compost")
    assert f'<a href="/item/{compost}">Compost</a>' in body  # [[Compost]] opens the note it names
    assert "<h2>Hedge</h2>" in body
    match = body[body.index('id="match"'):]
    assert "bramble hedge" in match[:400] and "Plans for the allotment" not in match
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY" and page.headers["cache-control"] == "no-store"


def test_a_mail_shows_its_headers_and_its_thread(client, home):
    plan = web_fixture.item_id(home.store, "gmail", "offsite-plan")
    page = client.get(f"/item/{plan}?chunk=0&q=lakeside").text
    assert "<th>from</th><td>Ann Example &lt;ann@example.com&gt;</td>" in page
    assert re.search(r"<th>cc</th><td>Bob Stone &lt;bob@example.org&gt;, J.rgen M.ller", page)
    assert "<h2>Same thread</h2>" in page and "Re: Offsite in March: venue decision" in page
    reply = web_fixture.item_id(home.store, "gmail", "offsite-reply")
    assert "Offsite in March: venue decision</a>" in client.get(f"/item/{reply}").text  # and back


def test_a_chat_window_shows_its_messages_and_its_conversation(client, home):
    hits = client.get("/?q=offsite&collection=slack").text
    first = re.search(r'href="/item/(\d+)\?chunk=(\d+)', hits)
    page = client.get(f"/item/{first.group(1)}?chunk={first.group(2)}&q=offsite").text
    assert '<ol class="chat">' in page and '<b class="sender">' in page
    assert re.search(r'<li class="msg match" id="match">', page)
    general = web_fixture.item_id(home.store, "slack", "C01GENERAL/20260304")
    page = client.get(f"/item/{general}").text
    assert "<h2>Same conversation</h2>" in page
    conversation = page[page.index("<h2>Same conversation</h2>"):]
    conversation = conversation[:conversation.index("</section>")]
    assert conversation.count("<li>") == 2 and "thread" not in conversation  # its windows, not a thread's


def test_a_book_opens_at_the_chapter_of_the_match(client, home):
    book = web_fixture.item_id(home.store, "books", "voyage")
    hit = re.search(r'href="(/item/\d+\?chunk=\d+&amp;q=lighthouse)#match"', client.get("/?q=lighthouse").text)
    page = client.get(hit.group(1).replace("&amp;", "&")).text
    assert "Chapter 2 of 3: <b>The Storm</b>" in page and "<h1>The Storm</h1>" in page
    assert re.search(r'<div id="match" class="match">[^#]*At last the lighthouse beam', page)
    assert "cargo of tea" not in page  # chapter 1 is not on the page
    assert f'href="/item/{book}?part=0&amp;q=lighthouse">‹ Departure</a>' in page
    assert "Arrival ›" in page
    assert "cargo of tea" in client.get(f"/item/{book}?part=0").text


def test_an_item_page_has_a_citation_and_links_and_backlinks(client, home):
    garden, compost = (web_fixture.item_id(home.store, "notes", k) for k in ("Garden", "Compost"))
    page = client.get(f"/item/{garden}?chunk=4").text
    assert re.search(r'id="citation" readonly value="“Garden”, \d{4}-\d\d-\d\d, notes: [^"]*Garden.md '
                     r'\(passage 5, Garden › Hedge\)"', page)
    assert "<h2>Links</h2>" in page and f'href="/item/{compost}">Compost</a>' in page
    assert f'href="/item/{garden}">Garden</a>' in client.get(f"/item/{compost}").text.split("<h2>Backlinks</h2>")[1]
    assert client.get("/item/999999").status_code == 404


# -- who may see what -----------------------------------------------------------------------------

def test_with_a_token_the_page_asks_once_and_keeps_an_httponly_strict_cookie(home):
    client = TestClient(web_app(home.backend, TokenGate("s3cret")), base_url="http://127.0.0.1:8765",
                        follow_redirects=False)
    first = client.get("/?q=bramble")
    assert first.status_code == 303 and first.headers["location"] == "/login?next=%2F%3Fq%3Dbramble"
    assert client.get("/results?q=bramble").status_code == 401
    assert client.get("/login").status_code == 200
    wrong = client.post("/login", data={"token": "guess", "next": "/?q=bramble"})
    assert wrong.status_code == 401 and "not the token" in wrong.text and COOKIE not in client.cookies
    right = client.post("/login", data={"token": "s3cret", "next": "/?q=bramble"})
    assert right.status_code == 303 and right.headers["location"] == "/?q=bramble"
    cookie = right.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "s3cret" not in cookie
    assert titles(client.get("/?q=bramble").text)[0] == "Garden"
    assert client.post("/logout", data={"csrf": "forged"}).status_code == 403
    other = TestClient(web_app(home.backend, TokenGate("s3cret")), base_url="http://127.0.0.1:8765")
    assert other.get("/results?q=bramble", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    assert client.post("/login", data={"token": "s3cret", "next": "//evil.example/x"}).headers["location"] == "/"


class NotesOnly(TokenGate):
    """A gate (as a server with users supplies one) that lets its principal see the notes collection only."""

    def collections_for(self, principal: Principal) -> frozenset[str] | None:
        return frozenset({"notes"})


def test_a_gate_narrows_what_a_principal_can_search_open_and_index(home):
    client = TestClient(web_app(home.backend, NotesOnly(None), index_run=lambda name: pytest.fail(name)),
                        base_url="http://127.0.0.1:8765", follow_redirects=False)
    assert collections_of(client.get("/?q=offsite+garden").text) == {"notes"}
    assert "No collection named &#39;gmail&#39;" in client.get("/?q=offsite&collection=gmail").text
    plan = web_fixture.item_id(home.store, "gmail", "offsite-plan")
    assert client.get(f"/item/{plan}").status_code == 404
    garden = web_fixture.item_id(home.store, "notes", "Garden")
    assert "Similar" not in client.get(f"/item/{garden}").text.split("<aside")[1] or "gmail" not in \
        client.get(f"/item/{garden}").text.split("<aside")[1]
    status = client.get("/status").text
    assert 'data-collection="notes"' in status and 'data-collection="gmail"' not in status
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', status).group(1)
    assert client.post("/index", data={"collection": "gmail", "csrf": csrf}).status_code == 404
    options = client.get("/").text
    assert "<option>notes</option>" in options and "<option>gmail</option>" not in options


def test_the_page_is_mounted_beside_mcp_behind_its_host_and_origin_checks(home, monkeypatch):
    from rag_search.access import http_keys
    from rag_search.mcp import server as mcp_server
    from rag_search.mcp.server import RagContext
    from rag_search.web.mount import page_for

    ctx = RagContext(home.paths, mcp_server.Settings(), home.store, home.embedder, home.backend.engine)
    monkeypatch.setattr(mcp_server, "_context", ctx)
    access = http_keys.Access(home.paths, "s3cret", open_when_keyless=True)
    app = mcp_server.http_app(port=8765, token="s3cret", paths=home.paths, web=page_for(ctx, access, home.paths),
                              access=access)
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    with TestClient(app, base_url="http://127.0.0.1:8765", follow_redirects=False) as client:
        assert client.get("/login").status_code == 200
        assert client.get("/login", headers={"Host": "evil.example:8765"}).status_code == 421  # DNS rebinding
        assert client.post("/login", data={"key": "s3cret"}, headers={"Origin": "http://evil.example"}).status_code == 403
        signed = client.post("/login", data={"key": "s3cret"}, headers={"Origin": "http://127.0.0.1:8765"})
        assert signed.status_code == 303
        assert titles(client.get("/?q=bramble").text)[0] == "Garden"
        mcp = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        assert client.post("/mcp", json=init, headers=mcp).status_code == 403  # the cookie is not MCP's key
        assert client.post("/mcp", json=init, headers={**mcp, "Authorization": "Bearer s3cret"}).status_code == 200


def test_templates_and_static_files_ship_in_the_wheel():
    root = Path(__file__).parents[1]
    globs = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["rag_search.web"]
    web = root / "rag_search" / "web"
    files = [p.relative_to(web).as_posix() for d in ("templates", "static") for p in (web / d).iterdir()]
    assert files and all(any(fnmatch(f, g) for g in globs) for f in files), files
