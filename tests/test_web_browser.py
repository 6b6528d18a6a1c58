"""The search page in a real browser: Debian's Chromium (/usr/bin/chromium) driven by Playwright, never a downloaded
browser. Login, results as you type, filters, keyboard use, opening an item at its passage, the page without
JavaScript, dark mode at phone width. Screenshots go to $LOCAL_RAG_SCREENSHOTS (default: the test's temp dir).

Skipped, saying why, where /usr/bin/chromium or the playwright package is missing (CI: `apt-get install chromium`).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
import web_fixture

from rag_search.web import TokenGate, web_app

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium (Debian: apt-get install chromium)"),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (pip: .[test])")
TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The page over the web fixture's home behind a token, served by uvicorn on loopback in a thread."""
    import uvicorn
    from test_mcp_security import free_port

    home = web_fixture.build(tmp_path_factory.mktemp("browser"))
    port = free_port()
    app = web_app(home.backend, TokenGate(TOKEN))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not server.started:
        assert time.time() < deadline and thread.is_alive()
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}", home
    server.should_exit = True
    thread.join(timeout=30)
    home.store.close()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    folder = Path(os.environ.get("LOCAL_RAG_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def signed_in(browser, base: str, shots: Path | None = None, **context):
    """A page of a new browser context, signed in through the login form."""
    page = browser.new_context(**context).new_page()
    page.goto(base + "/?q=bramble")
    assert "/login" in page.url
    if shots:
        page.screenshot(path=str(shots / "login.png"))
    page.fill("input[name=token]", "wrong")
    page.click("button[type=submit]")
    assert "not the token" in page.inner_text(".error")
    page.fill("input[name=token]", TOKEN)
    page.click("button[type=submit]")
    page.wait_for_selector(".hit")
    assert page.url == base + "/?q=bramble"  # back where the login began
    return page


def type_query(page, text: str) -> None:
    """Type into the box key by key (as a person does) and wait for those results to be drawn."""
    page.fill("#q", "")
    page.type("#q", text, delay=30)
    page.wait_for_function("q => document.body.dataset.drawnQuery === q", arg=text)


def test_login_results_as_you_type_filters_and_keyboard(server, browser, shots):
    base, _ = server
    page = signed_in(browser, base, shots, viewport={"width": 1100, "height": 900})
    type_query(page, "lighthouse")  # no Enter: results come as one types
    assert page.inner_text(".hit .open") == "The Voyage"
    assert page.url.endswith("/?q=lighthouse")  # the address is the bookmark of what is shown
    type_query(page, "offsite")
    page.screenshot(path=str(shots / "results.png"), full_page=True)
    page.select_option("select[name=collection]", "slack")
    page.wait_for_function("() => location.search.includes('collection=slack') && document.body.dataset.drawnQuery")
    page.wait_for_function("() => [...document.querySelectorAll('.hit .coll')].every(e => e.textContent === 'slack')")
    page.select_option("select[name=collection]", "")
    page.fill("input[name=after]", "2026-03-04")
    page.fill("input[name=before]", "2026-03-04")
    page.press("input[name=before]", "Enter")
    page.wait_for_function("() => location.search.includes('before=2026-03-04')")
    page.wait_for_selector("text=Re: Offsite in March")
    page.screenshot(path=str(shots / "filters.png"), full_page=True)

    page.click("h1, .count, body", position={"x": 5, "y": 5})  # focus off the box
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "q"
    page.keyboard.press("ArrowDown")
    first = page.evaluate("document.activeElement.textContent")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowUp")
    assert page.evaluate("document.activeElement.textContent") == first
    assert page.evaluate("document.querySelector('.hit.sel .open').textContent") == first
    page.keyboard.press("Enter")
    page.wait_for_selector("article.item")
    assert page.inner_text("h1") == first


def test_an_item_opens_scrolled_to_its_passage_and_copies_a_citation(server, browser, shots):
    base, _ = server
    page = signed_in(browser, base, viewport={"width": 1100, "height": 700})
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
    type_query(page, "bramble hedge")
    page.click(".hit .open >> nth=0")
    page.wait_for_selector("#match")
    assert "bramble hedge" in page.inner_text("#match")
    box = page.evaluate("(() => { const r = document.getElementById('match').getBoundingClientRect();"
                        " return [r.top, r.bottom, innerHeight, scrollY]; })()")
    assert box[3] > 0 and 0 <= box[0] < box[2]  # scrolled down to it, and it is on screen
    page.screenshot(path=str(shots / "item-note.png"))
    page.click("#copy")
    page.wait_for_selector("#copy:text('Copied')")
    assert page.evaluate("navigator.clipboard.readText()").startswith("“Garden”")
    page.goto(base + "/?q=lighthouse")
    page.click(".hit .open >> nth=0")
    page.wait_for_selector("#match")
    assert "lighthouse" in page.inner_text("#match") and "Chapter 2 of 3" in page.inner_text(".chapters")
    page.screenshot(path=str(shots / "item-book.png"))
    page.goto(base + "/?q=headcount&collection=slack")
    page.click(".hit .open >> nth=0")
    page.wait_for_selector("li.msg#match")
    assert "headcount" in page.inner_text("#match") and page.is_visible("text=Same conversation")
    page.screenshot(path=str(shots / "item-chat.png"), full_page=True)


def test_without_javascript_a_results_page_is_a_plain_get(server, browser):
    base, _ = server
    context = browser.new_context(java_script_enabled=False)
    context.add_cookies([{"name": "local_rag_session", "value": TokenGate(TOKEN).sign_in({"token": TOKEN}),
                          "url": base}])
    page = context.new_page()
    page.goto(base + "/")
    page.fill("#q", "compost heap")
    page.press("#q", "Enter")  # the form's own GET
    page.wait_for_selector(".hit")
    assert "q=compost+heap" in page.url and page.inner_text(".hit .open >> nth=0") == "Compost"


def test_dark_mode_at_phone_width(server, browser, shots):
    base, home = server
    page = signed_in(browser, base, viewport={"width": 390, "height": 844}, color_scheme="dark", is_mobile=True,
                     has_touch=True)
    type_query(page, "offsite venue")
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(22, 24, 27)"
    assert page.evaluate("document.documentElement.scrollWidth") <= 390  # nothing wider than the phone
    assert page.evaluate("document.getElementById('filters').open") is False  # folded away at phone width
    page.screenshot(path=str(shots / "phone-dark.png"))
    plan = web_fixture.item_id(home.store, "gmail", "offsite-plan")
    page.goto(f"{base}/item/{plan}?chunk=0&q=venue#match")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.screenshot(path=str(shots / "phone-mail.png"))
    page.goto(base + "/status")
    page.screenshot(path=str(shots / "phone-status.png"))
