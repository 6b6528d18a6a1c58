"""What the browser tests share: Debian's Chromium (never a downloaded browser) driven by Playwright, headless, and
the steps a person takes on the page. Skipped, saying why, where /usr/bin/chromium or playwright is missing (CI
installs chromium: .ci/run)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync"]
MARKS = [pytest.mark.browser,
         pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium (Debian: apt-get install chromium)")]
NONSENSE = "zzqxwv plorbfin"


def playwright():
    return pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (pip: .[test])")


def launch(p):
    return p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)


@pytest.fixture(scope="module")
def browser():
    """One Chromium for a test module (import this fixture into the module)."""
    with playwright().sync_playwright() as p:
        b = launch(p)
        yield b
        b.close()


def screenshots(tmp_path_factory) -> Path:
    folder = Path(os.environ.get("LOCAL_RAG_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def sign_in(page, base: str, key: str, start: str = "?q=garden", mistype: bool = False) -> None:
    """Through the login form, as a person does (`mistype`: a wrong key first, which counts against the address);
    back where they began."""
    page.goto(base + start)
    assert "/login" in page.url, page.url
    if mistype:
        page.fill("input[name=key]", "not-the-key")
        page.click("button[type=submit]")
        assert "not a key of this server" in page.inner_text(".error")
    page.fill("input[name=key]", key)
    page.click("button[type=submit]")
    page.wait_for_url(base + start)


def type_query(page, text: str) -> None:
    """Type into the box key by key and wait for those results to be drawn."""
    page.fill("#q", "")
    page.type("#q", text, delay=20)
    page.wait_for_function("q => document.body.dataset.drawnQuery === q", arg=text)


def sign_out_and_replay(browser, page, base: str) -> None:
    """Sign out with the page's button; a cookie copied before is refused after (a new browser gets the login)."""
    copied = page.context.cookies()
    assert any(c["name"] == "local_rag_session" for c in copied)
    page.click("text=Sign out")
    page.wait_for_url(base + "login")
    thief = browser.new_context(ignore_https_errors=True)
    thief.add_cookies(copied)
    replay = thief.new_page()
    replay.goto(base + "?q=garden")
    assert "/login" in replay.url, "a cookie copied before sign out still opens the index"
    thief.close()


def index_now(page, base: str, collection: str, seconds: float = 120) -> str:
    """Press "Index now" for the collection on the status page; the outcome the page shows once the run ended."""
    page.goto(base + "status")
    row = f'tr[data-collection="{collection}"]'
    page.click(f"{row} button:text('Index now')")
    page.wait_for_url(base + "status")
    assert "Refused" not in page.content()
    deadline = time.monotonic() + seconds
    while "indexing now" in page.context.request.get(base + "status").text():  # the browser's own cookie
        assert time.monotonic() < deadline, f"Index now of {collection} did not end in {seconds} s"
        time.sleep(0.5)
    page.goto(base + "status")  # ended: the page no longer reloads itself
    return page.inner_text(f"{row} .job")


def nothing_found(page) -> str:
    type_query(page, NONSENSE)
    assert page.query_selector(".hit .open:visible") is None, "a nonsense query listed hits"
    return page.inner_text(".nothing")
