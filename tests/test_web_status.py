"""The search page's status view and "index now": a real Dagster run through rag_index's path (mcp_index.index),
its outcome and its link into the Dagster UI, failed items with their reasons; and `local-rag web`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
from pipeline_env import make_home
from starlette.testclient import TestClient

from rag_search.retrieval import SearchEngine
from rag_search.store import Store
from rag_search.web import Backend, TokenGate, web_app


def test_index_now_runs_a_collection_and_the_status_links_its_dagster_run(tmp_path, monkeypatch, fake_embedder):
    paths, vault = make_home(tmp_path, monkeypatch)
    (vault / "broken.pdf").write_bytes(b"%PDF-1.4 not really")  # a failed item with its reason
    store = Store.open(paths.db)
    app = web_app(Backend(paths, store, SearchEngine(store, fake_embedder)), TokenGate(None),
                  dagster_ui="http://127.0.0.1:3999")
    client = TestClient(app, base_url="http://127.0.0.1:8765", follow_redirects=False)
    before = client.get("/status").text
    assert 'data-collection="notes"' in before and "not indexed yet" in before and "No Dagster runs yet" in before
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', before).group(1)
    assert client.post("/index", data={"collection": "notes", "csrf": "forged"}).status_code == 403
    pressed = client.post("/index", data={"collection": "notes", "csrf": csrf})
    assert pressed.status_code == 303 and pressed.headers["location"] == "/status"
    running = client.get("/status").text
    assert "indexing now" in running and '<meta http-equiv="refresh"' in running and " disabled>Index now" in running
    job = app.state.jobs.all()["notes"]
    deadline = time.time() + 240
    while job.running:
        assert time.time() < deadline
        time.sleep(0.2)
    assert job.error is None and "indexed" in job.outcome
    after = client.get("/status").text
    row = after[after.index('data-collection="notes"'):after.index("</tr>", after.index('data-collection="notes"'))]
    assert re.search(r'<a class="run" href="http://127.0.0.1:3999/runs/[0-9a-f-]{36}"', row)
    assert "done: " in row and "indexed" in row and "mcp" in row  # rag_index's trigger
    assert "broken.pdf" in after and re.search(r"<b>(corrupt|unreadable|empty)</b>", after)
    store.close()


def test_local_rag_web_serves_the_page_and_prints_its_address_without_a_browser(tmp_path):
    from test_mcp_security import free_port

    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "LOCAL_RAG_MCP_TOKEN")}
    env |= {"LOCAL_RAG_HOME": str(tmp_path / "home"), "DAGSTER_HOME": str(tmp_path / "home" / "dagster")}
    proc = subprocess.Popen([str(Path(sys.executable).with_name("local-rag")), "web", "--port", str(port)], env=env,
                            stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        deadline = time.time() + 120
        while not any("in a browser" in ln for ln in lines):
            assert time.time() < deadline and proc.poll() is None, lines
            lines.append(proc.stderr.readline())
        assert f"Open http://127.0.0.1:{port}/ in a browser" in "".join(lines)
        page = httpx.get(f"http://127.0.0.1:{port}/?q=anything", timeout=30)
        assert page.status_code == 200 and "Nothing is indexed" in page.text
    finally:
        proc.terminate()
        proc.wait(timeout=60)
