"""The search page in a real browser on the household server: `local-rag serve --http --tls` with two users' keys
(tests/household.py, the real model), Debian's Chromium trusting its self-signed certificate. ann signs in through
the form, finds and opens her note, runs "Index now" on her own collection and signs out (her copied cookie is
refused after); bob, on the same server, finds none of ann's words and gets "nothing found" for nonsense."""

from __future__ import annotations

import pytest
import yaml
from browser_env import MARKS, browser, index_now, nothing_found, playwright, screenshots, sign_in, \
    sign_out_and_replay, type_query
from household import build_index, start_server, write_config

pytestmark = MARKS
playwright()  # skips the module without the playwright package


@pytest.fixture(scope="module")
def served(tmp_path_factory, builtin_embedder):
    home = tmp_path_factory.mktemp("household-browser")
    build_index(home, builtin_embedder)
    notes = tmp_path_factory.mktemp("ann-notes")
    (notes / "knitting.md").write_text("# Knitting\n\nA scarf of marzipan-coloured wool, cast on in October.\n")
    keys = write_config(home, {"collections": {"ann-notes": {"sources": [{"type": "project", "paths": [str(notes)]}]}}})
    config = yaml.safe_load((home / "config.yaml").read_text())
    config["users"]["ann"]["collections"].append("ann-notes")
    (home / "config.yaml").write_text(yaml.safe_dump(config))
    server = start_server(home)
    yield server, keys
    server.stop()


def test_ann_signs_in_finds_opens_indexes_and_signs_out(served, browser, tmp_path_factory):
    server, keys = served
    shots = screenshots(tmp_path_factory)
    p = browser.new_context(ignore_https_errors=True, viewport={"width": 1100, "height": 800}).new_page()
    sign_in(p, server.base, keys["ann"], "?q=marzipan", mistype=True)
    assert "sourdough" in p.inner_text(".hits").lower()
    p.screenshot(path=str(shots / "tls-ann-results.png"), full_page=True)
    p.click(".hit .open >> nth=0")
    p.wait_for_selector("article.item")
    assert "marzipan" in p.inner_text("article.item").lower()
    outcome = index_now(p, server.base, "ann-notes")
    assert outcome.startswith("done: 1 indexed"), outcome
    p.goto(server.base)
    type_query(p, "scarf wool")
    assert p.inner_text(".hit .open >> nth=0") == "Knitting"  # what Index now indexed is found
    sign_out_and_replay(browser, p, server.base)
    p.context.close()


def test_bob_sees_nothing_of_anns_and_nothing_for_nonsense(served, browser):
    server, keys = served
    p = browser.new_context(ignore_https_errors=True).new_page()
    sign_in(p, server.base, keys["bob"], "?q=zeppelin")
    assert "kube" in p.inner_text(".hits").lower()  # his own
    type_query(p, "marzipan sourdough")
    shown = " ".join(p.eval_on_selector_all(".hit", "hits => hits.map(h => h.textContent)")).lower()
    assert "sourdough" not in shown and "marzipan" not in shown and "knitting" not in shown
    assert nothing_found(p).startswith("Nothing found")
    p.goto(server.base + "status")
    names = p.eval_on_selector_all("tr[data-collection]", "rows => rows.map(r => r.dataset.collection)")
    assert sorted(names) == ["bob-work", "shared-garden"]
    p.context.close()
