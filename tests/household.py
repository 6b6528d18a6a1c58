"""A household's index and server for the users tests and bench/user_isolation.py: two people with keys over TLS.

ann reads ann-family and shared-garden, bob reads bob-work and shared-garden, owner-diary is the owner's alone.
Every collection's items carry words, tags, metadata values, links and failures found nowhere else, so a leak
shows as one of another collection's MARKERS in a response. `probe_calls` builds the probe set: for each tool
(and the resources, and tools/list) at least `per_tool` calls, naming every collection, item id, key, path,
tag and value of the whole index - the other user's included.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import socket
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from rag_search.store.item_writer import ParsedItem, write_items
from rag_search.records import Chunk, Fingerprint, ItemRef
from rag_search.store import Store, writes

EXE = str(Path(sys.executable).with_name("local-rag"))

# collection → items (key, text, tags, metadata, links); each collection's words are its own
HOUSEHOLD = {
    "ann-family": [
        ("recipes/sourdough.md", "Grandma's sourdough with marzipan and rye, baked on Sundays", ("food",),
         {"cook": "annmarzipan"}, ("holidays",)),
        ("holidays.md", "Summer holidays in Brittany with the ferry at eight", ("travel",), {"cook": "annmarzipan"},
         ()),
    ],
    "bob-work": [
        ("ops/kube.md", "kube-proxy zeppelin outage on node-7 after the upgrade", ("bobops",),
         {"team": "bobzeppelin"}, ("payroll",)),
        ("payroll.md", "Payroll zeppelin review of salaries in March", ("bobops",), {"team": "bobzeppelin"}, ()),
    ],
    "shared-garden": [
        ("tomatoes.md", "Tomatoes need sun and water in the shared garden", ("garden",), {"plot": "north"}, ()),
    ],
    "owner-diary": [
        ("diary/secret.md", "Lighthouse diary: the owner's quasar thoughts", ("ownerquasar",),
         {"mood": "ownerlighthouse"}, ()),
    ],
}
GRANTS = {"ann": ["ann-family", "shared-garden"], "bob": ["bob-work", "shared-garden"]}
FAILED = {"bob-work": "broken-zeppelin.pdf", "owner-diary": "broken-quasar.pdf", "ann-family": "broken-marzipan.pdf",
          "shared-garden": "broken-garden.pdf"}
OWN_WORDS = {"ann-family": ["marzipan", "annmarzipan", "sourdough"], "bob-work": ["zeppelin", "bobzeppelin", "bobops"],
             "owner-diary": ["quasar", "ownerlighthouse", "ownerquasar", "lighthouse"], "shared-garden": []}


def markers(user: str) -> list[str]:
    """What must never reach `user`: the names, words, keys and paths of the collections not granted to them."""
    out = []
    for coll in HOUSEHOLD:
        if coll in GRANTS[user]:
            continue
        out += [coll, *OWN_WORDS[coll], FAILED[coll], f"/data/{coll}"] + [k for k, *_ in HOUSEHOLD[coll]]
    return out


def build_index(home: Path, embedder) -> None:
    store = Store.open(home / "rag.db")
    try:
        for coll, items in HOUSEHOLD.items():
            writes.ensure_collection(store, coll)
            parsed = [ParsedItem(ItemRef(coll, key, f"/data/{coll}/{key}", "markdown", "files"),
                                 Fingerprint(len(text), 1, hashlib.sha256(text.encode()).hexdigest()), key.rsplit("/")[-1],
                                 [Chunk(0, text, title=key, tags=tags, metadata=meta, ts=1_700_000_000 + i)],
                                 links=links, text=text)
                      for i, (key, text, tags, meta, links) in enumerate(items)]
            write_items(store, embedder, parsed)
            writes.mark_failed(store, ItemRef(coll, FAILED[coll], f"/data/{coll}/{FAILED[coll]}", "pdf", "files"),
                               "parse", f"{FAILED[coll]} is not a PDF")
            writes.record_scan(store, coll, "files", "project", len(items) + 1, 1, 0.1, f"scan of /data/{coll} ok")
    finally:
        store.close()


def write_config(home: Path, extra: dict | None = None) -> dict[str, str]:
    """config.yaml with ann's and bob's users; returns their keys (made as `local-rag users add` makes them)."""
    from rag_search.access import users

    from rag_search.file_updates import write_atomic

    keys = {name: users.new_key() for name in GRANTS}
    config = {"users": {name: {"key_sha256": users.key_hash(keys[name]), "id": users.new_id(),
                               "collections": GRANTS[name]} for name in GRANTS}} | (extra or {})
    write_atomic(home / "config.yaml", yaml.safe_dump(config, sort_keys=False), mode=0o600)  # as `users add` does
    return keys


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    proc: subprocess.Popen
    url: str
    cert: Path
    fingerprint: str  # as the server printed it
    stderr: Path

    @property
    def base(self) -> str:
        """The search page's address."""
        return self.url.removesuffix("mcp")

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.cert))

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


def start_server(home: Path, *args: str, tls: bool = True) -> Server:
    """`local-rag serve --http` (with `tls`: `--tls`) on a free loopback port, once its startup lines are out."""
    port = free_port()
    err = home / f"serve-{port}.err"
    env = {**os.environ, "LOCAL_RAG_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")}
    proc = subprocess.Popen([EXE, "serve", "--http", *(["--tls"] if tls else []), "--port", str(port), *args],
                            env=env, stdout=subprocess.DEVNULL, stderr=err.open("w"))
    deadline = time.time() + 90
    while "Query log" not in err.read_text() or not _listening(port):
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            raise AssertionError(f"serve did not start: {err.read_text()}")
        time.sleep(0.1)
    found = re.search(r"SHA-256 fingerprint: ([0-9A-F:]{95})", err.read_text())
    scheme, name = ("https", "localhost") if tls else ("http", "127.0.0.1")
    return Server(proc, f"{scheme}://{name}:{port}/mcp", home / "tls" / "cert.pem", found.group(1) if found else "",
                  err)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


def probe_calls(per_tool: int = 50) -> dict[str, list[dict]]:
    """tool → argument sets (at least `per_tool` each), naming everything in the index, every user's included
    ("rag_search (plan)": rag_search with query plans)."""
    colls = [*HOUSEHOLD, "no-such-collection", "BOB-WORK", "owner-diary "]
    keys = [k for items in HOUSEHOLD.values() for k, *_ in items] + list(FAILED.values())
    refs = keys + [f"/data/{c}/{k}" for c, items in HOUSEHOLD.items() for k, *_ in items] + \
        [str(i) for i in range(1, 16)] + [f"item:{i}" for i in range(1, 16)]
    words = [w for ws in OWN_WORDS.values() for w in ws] + ["tomatoes garden", "holidays", "salaries March",
                                                            "kube-proxy node-7", "diary"]
    tags = ["food", "travel", "bobops", "garden", "ownerquasar", "bob", "owner"]
    meta = [{"team": "bobzeppelin"}, {"mood": "ownerlighthouse"}, {"cook": "annmarzipan"}, {"plot": "north"}]
    modes = ["hybrid", "keyword", "semantic"]
    cyc = lambda xs: itertools.cycle(xs)  # noqa: E731
    w, c, t, m, mo, r = cyc(words), cyc(colls), cyc(tags), cyc(meta), cyc(modes), cyc(refs)
    search = []
    for i in range(per_tool):
        args: dict = {"query": next(w), "mode": next(mo), "top_k": 20}
        extra = [{}, {"collection": next(c)}, {"collections": [next(c), next(c)]}, {"tags": [next(t)]},
                 {"metadata": next(m)}, {"path_prefix": f"/data/{next(c)}"}, {"chunks": True}][i % 7]
        search.append(args | extra)
    return {
        "rag_search": search,
        "rag_search_by_tag": [{"tag": next(t)} | ({"query": next(w)} if i % 2 else {}) for i in range(per_tool)],
        "rag_get_document": [{"path_or_id": next(r)} | ({"collection": next(c)} if i % 3 == 2 else {})
                             for i in range(per_tool)],
        "rag_related": [{"path_or_id": next(r), "top_k": 20} for _ in range(per_tool)],
        "rag_list_collections": [{} for _ in range(per_tool)],
        "rag_collection_info": [{"collection": next(c)} for _ in range(per_tool)],
        "rag_list_recent": [({"collection": next(c)} if i % 2 else {}) | {"days": 365_000, "limit": 50}
                            for i in range(per_tool)],
        "rag_knowledge_stats": [{} for _ in range(per_tool)],
        "rag_status": [{} for _ in range(per_tool)],
        "rag_batch_search": [{"queries": [next(w), next(w), next(w)], "top_k": 20, "mode": next(mo)} |
                             ({"collections": [next(c), next(c)]} if i % 3 == 1 else {}) for i in range(per_tool)],
        "rag_context": [{"path_or_id": next(r), "chunk_index": 0, "before": 5, "after": 5} for _ in range(per_tool)],
        "rag_search (plan)": [{"searches": [{"type": "keyword", "query": next(w)}, {"type": "semantic",
                                                                                   "query": next(w)}],
                               "intent": next(w), "top_k": 20} | ({"collection": next(c)} if i % 2 else {})
                              for i in range(per_tool)],
    }


RESOURCES = ["rag://stats", "ingestion://status", "ingestion://stats", "knowledge://stats", "ingestion://watch-stats",
             "ingestion://failures", "ingestion://metadata"]


def leaks(text: str, args: dict, user: str) -> list[str]:
    """The markers of collections not granted to `user` in a response, but those the caller itself named (a
    message may repeat what was asked: "No collection named 'bob-work'")."""
    asked = [v.lower() for v in _strings(args)]
    low = text.lower()
    return [m for m in markers(user) if m.lower() in low and not any(m.lower() in a for a in asked)]


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *_strings(v)]]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []
