"""The search page measured through a browser: keystroke → results drawn, p50/p95, at 10k and 100k chunks; page weight.

    python bench/web_latency.py [--sizes 10000 100000] [--queries 100] [--delay 50] [--person]

Uses query_latency.py's synthetic indexes (bench/out/synthetic-v3-N.db, built once) and its query embedder (the
real model embeds each query). The page (rag_search.web) is served by uvicorn on 127.0.0.1 as `local-rag serve`
serves it (sign bits in RAM); Debian's Chromium (/usr/bin/chromium) is driven by Playwright. Each query is typed
key by key (`--delay` ms apart, a fast typist: faster than the page's debounce, so only the last key searches); the
page's own script stamps the time from the last key's input event to the frame after the results were inserted
(app.js: document.body.dataset.drawnMs). Reported: that time (it includes the 120 ms debounce) and the same less
the debounce (the search request and the drawing). Page weight: the HTML of a results page, app.js and app.css,
as sent (the server does not compress) and gzipped. `--person`: searched as a person with a key (who sees every
collection here): word statistics are counted over their collections (retrieval/corpus.py), the owner's are the
index's own.
"""

from __future__ import annotations

import argparse
import gzip
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
from query_latency import OUT, SyntheticQueryEmbedder, open_db, percentiles
from synthetic import queries, real_embeddings

from rag_search.config import Paths
from rag_search.retrieval import SearchEngine
from rag_search.web import Backend, TokenGate, web_app

CHROMIUM = "/usr/bin/chromium"
# nothing of the browser's own (updates, sync, background fetches, GPU set-up) competes with the page for the cores
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"]
DEBOUNCE_MS = 120  # app.js DEBOUNCE_MS


def serve(app) -> tuple[str, object]:
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}", server


def measure(base: str, qs: list[str], delay: int) -> list[float]:
    from playwright.sync_api import sync_playwright

    times = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        page.goto(base + "/")
        for n, q in enumerate(qs):
            page.fill("#q", "")
            page.evaluate("document.body.dataset.drawnQuery = ''")
            page.type("#q", q, delay=delay)
            page.wait_for_function("q => document.body.dataset.drawnQuery === q", arg=q, timeout=30_000)
            if n >= 5:  # the first few warm the page and the engine
                times.append(float(page.evaluate("document.body.dataset.drawnMs")))
        browser.close()
    return times


def weight(base: str, q: str) -> str:
    parts = {"results page HTML": f"/?q={q}", "app.js": "/static/app.js", "app.css": "/static/app.css"}
    sizes = {name: httpx.get(base + path).content for name, path in parts.items()}
    raw, packed = sum(map(len, sizes.values())), sum(len(gzip.compress(b)) for b in sizes.values())
    each = ", ".join(f"{name} {len(b) / 1024:.1f} KB" for name, b in sizes.items())
    return f"page weight: {raw / 1024:.1f} KB as sent ({packed / 1024:.1f} KB gzipped): {each}"


class PersonGate(TokenGate):
    """No sign-in, but a person's explicit collections (all of them): their searches take the scoped path."""

    def __init__(self, names: frozenset[str]):
        super().__init__(None)
        self.names = names

    def collections_for(self, principal):
        return self.names


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--delay", type=int, default=50, help="ms between keys")
    ap.add_argument("--person", action="store_true", help="search as a person with a key (scoped statistics)")
    args = ap.parse_args()
    base_vectors, held_out = real_embeddings(OUT)
    embedder = SyntheticQueryEmbedder(held_out)
    qs = queries(args.queries + 5)
    for n in args.sizes:
        store = open_db(n, base_vectors)
        engine = SearchEngine(store, embedder, bits_in_ram=True)
        engine.bit_matrix.wait()
        if getattr(engine, "common_words", None) is not None:
            engine.common_words.wait()
        paths = Paths.from_env({"LOCAL_RAG_HOME": tempfile.mkdtemp(prefix="web-bench-")})
        names = frozenset(r[0] for r in store.conn.execute("SELECT name FROM collections"))
        gate = PersonGate(names) if args.person else TokenGate(None)
        base, server = serve(web_app(Backend(paths, store, engine), gate))
        times = measure(base, qs, args.delay)
        p50, p95 = percentiles(times)
        less = percentiles([t - DEBOUNCE_MS for t in times])
        print(f"{n:,} chunks{' (a person with a key)' if args.person else ''}, {len(times)} queries typed {args.delay} ms/key: keystroke → results drawn "
              f"p50 {p50:.0f} ms, p95 {p95:.0f} ms (less the {DEBOUNCE_MS} ms debounce: p50 {less[0]:.0f} ms, "
              f"p95 {less[1]:.0f} ms)", flush=True)
        print("  " + weight(base, qs[0].replace(" ", "+")), flush=True)
        server.should_exit = True
        store.close()


if __name__ == "__main__":
    sys.exit(main())
