"""The search page in a real browser on a real server: Debian's Chromium (Playwright) against the process a person
starts, `local-rag serve --http --token T` (every guard it runs: Host/Origin, keys, sessions, CSRF), over the web
fixture's home (the real model). Sign in through the form, results as one types, filters, keyboard use, an item
opened at its passage, "Index now", sign out (a copied cookie refused after), "nothing found", no JavaScript,
dark mode at phone width. One server and one browser for the module. Screenshots go to $LOCAL_RAG_SCREENSHOTS
(default: a temp dir). The two-user TLS server: test_web_browser_tls.py.
"""

from __future__ import annotations

import pytest
import web_fixture
from browser_env import MARKS, browser, index_now, nothing_found, playwright, screenshots, sign_in, \
    sign_out_and_replay, type_query
from household import start_server

pytestmark = MARKS
playwright()  # skips the module without the playwright package
TOKEN = "owner-token-for-the-browser-tests-0123456789"


@pytest.fixture(scope="module")
def served(tmp_path_factory, builtin_embedder):
    home = web_fixture.build(tmp_path_factory.mktemp("browser"), builtin_embedder, configured=True)
    home.store.close()
    server = start_server(home.paths.home, "--token", TOKEN, tls=False)
    yield server, home
    server.stop()


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    return screenshots(tmp_path_factory)


@pytest.fixture
def page(served, browser):
    server, _ = served
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    p = context.new_page()
    sign_in(p, server.base, TOKEN)
    yield p
    context.close()


def test_sign_in_search_open_an_item_index_now_and_sign_out(served, browser, shots):
    server, _ = served
    base = server.base
    p = browser.new_context(viewport={"width": 1100, "height": 900}).new_page()
    p.goto(base + "?q=bramble")
    p.screenshot(path=str(shots / "login.png"))
    sign_in(p, base, TOKEN, "?q=bramble", mistype=True)  # the form's post carries the page's Origin: accepted
    assert p.inner_text(".hit .open >> nth=0") == "Garden"
    p.click(".hit .open >> nth=0")
    p.wait_for_selector("#match")
    assert "bramble hedge" in p.inner_text("#match")
    assert "Allotment" in p.inner_text("table.props")  # the note's front matter (its aliases) on its page
    outcome = index_now(p, base, "notes")
    assert outcome.startswith("done:") and "failed" in outcome, outcome
    p.screenshot(path=str(shots / "status.png"), full_page=True)
    sign_out_and_replay(browser, p, base)
    p.context.close()


def test_nothing_found_for_nonsense_and_weaker_matches_folded(page, shots):
    said = nothing_found(page)
    assert said.startswith("Nothing found for “zzqxwv plorbfin”")
    page.screenshot(path=str(shots / "nothing-found.png"), full_page=True)
    folded = page.query_selector("details.weaker")
    assert folded is None or not folded.get_property("open").json_value()  # weaker matches stay folded


def test_results_as_you_type_filters_and_keyboard(page, shots):
    base = page.url.split("?")[0]
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
    page.click("h1, .count, body", position={"x": 5, "y": 5})  # focus off the box
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "q"
    page.keyboard.press("ArrowDown")
    first = page.evaluate("document.activeElement.textContent")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowUp")
    assert page.evaluate("document.activeElement.textContent") == first
    page.keyboard.press("Enter")
    page.wait_for_selector("article.item")
    assert page.inner_text("h1") == first and page.url.startswith(base + "item/")


def test_an_item_opens_at_its_passage_and_copies_a_citation(page, shots):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    type_query(page, "bramble hedge")
    page.click(".hit .open >> nth=0")
    page.wait_for_selector("#match")
    box = page.evaluate("(() => { const r = document.getElementById('match').getBoundingClientRect();"
                        " return [r.top, r.bottom, innerHeight, scrollY]; })()")
    assert box[3] > 0 and 0 <= box[0] < box[2]  # scrolled down to it, and it is on screen
    page.screenshot(path=str(shots / "item-note.png"))
    page.click("#copy")
    page.wait_for_selector("#copy:text('Copied')")
    assert page.evaluate("navigator.clipboard.readText()").startswith("“Garden”")
    page.click("text=Compost >> nth=0")  # [[Compost]] opens the note it names
    page.wait_for_selector("article.item")
    assert page.inner_text("h1") == "Compost"


def test_without_javascript_the_form_still_signs_in_and_searches(served, browser):
    server, _ = served
    context = browser.new_context(java_script_enabled=False)
    p = context.new_page()
    sign_in(p, server.base, TOKEN, "")
    p.fill("#q", "compost heap")
    p.press("#q", "Enter")  # the form's own GET
    p.wait_for_selector(".hit")
    assert "q=compost+heap" in p.url and p.inner_text(".hit .open >> nth=0") == "Compost"
    context.close()


def test_phone_width_dark_mode_and_the_status_table(served, browser, shots):
    server, _ = served
    context = browser.new_context(viewport={"width": 390, "height": 844}, color_scheme="dark", is_mobile=True,
                                  has_touch=True)
    p = context.new_page()
    sign_in(p, server.base, TOKEN)
    type_query(p, "offsite venue")
    assert p.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(22, 24, 27)"
    assert p.evaluate("document.documentElement.scrollWidth") <= 390  # nothing wider than the phone
    assert p.evaluate("document.getElementById('filters').open") is False  # folded away at phone width
    p.screenshot(path=str(shots / "phone-dark.png"))
    p.goto(server.base + "status")
    assert p.evaluate("document.documentElement.scrollWidth") <= 390
    for part in ('tr[data-collection="notes"] td.last-run', 'tr[data-collection="notes"] button'):
        box = p.locator(part).bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390, (part, box)  # on screen, not scrolled off
    p.screenshot(path=str(shots / "phone-status.png"), full_page=True)
    context.close()
