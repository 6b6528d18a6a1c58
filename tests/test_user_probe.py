"""Side channels between users, probed: every MCP tool and resource and every page route, asked by one user on an
index with the other users' private collections and on the same index with those collections deleted, must answer
the same - the same hits in the same order with the same scores, relevance, counts, facets and notes. A score that
moved would tell the user something about items they cannot see (a word's frequency there, how long those notes
are); the issue's probe (a word only the other user's notes hold, min_score) is among the calls.

In process, as `local-rag serve --http` runs them (mcp/server.http_app with the page, keys and sessions; the MCP
tools through a real client session run as the user). The index is synthetic: notes whose words overlap across
collections with different frequencies and lengths, so whole-index statistics would show.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import add_doc
from fakes import HashEmbedder
from mcp.client import Client
from starlette.testclient import TestClient

from rag_search.access import http_keys, users
from rag_search.config import LiveSettings, Paths
from rag_search.mcp import server as mcp_server
from rag_search.mcp.context import RagContext
from rag_search.retrieval import Filters, SearchEngine, SearchRequest
from rag_search.retrieval.relevance import search_with_relevance
from rag_search.store import Store, writes
from rag_search.web.mount import page_for

GRANTS = {"ann": ["ann-notes", "shared"], "bob": ["bob-notes", "shared"]}
PRIVATE = {"ann-notes", "bob-notes", "owner-diary"}
COMMON = "garden tomato harbour ledger window bicycle lantern orchard meeting budget".split()
OWN = {"ann-notes": ["oncologist", "marzipan"], "bob-notes": ["zeppelin", "payroll"], "owner-diary": ["quasar"],
       "shared": ["allotment"]}
QUERIES = ["tomato harbour", "lanternfish oncologist", "lanternfish oncologst", "garden budget meeting", "zeppelin",
           "marzipan", "allotment window", '"bicycle lantern"', "orch*", "ledger", "quasar tomato", "note 7",
           "what grows in the garden", "zzqxwv plorbfin"]


def _corpus(rng: random.Random) -> list[tuple[str, str, str, tuple[str, ...], dict]]:
    """(collection, key, text, tags, metadata): every collection uses the common words, each with its own mix."""
    out = []
    for n in range(48):
        coll = ["ann-notes", "bob-notes", "shared", "owner-diary"][n % 4]
        bias = COMMON[: 3 + (n % 4) * 2]  # each collection leans on different common words
        words = [rng.choice(bias if rng.random() < 0.6 else COMMON) for _ in range(rng.randint(5, 90))]
        words += rng.sample(OWN[coll], 1) * rng.randint(0, 3)
        if coll == "bob-notes" and n % 3 == 0:
            words.append("lanternfish")
        tags = (rng.choice(["garden", "work", "home"]),)
        out.append((coll, f"{coll}/note{n}.md", " ".join(words), tags, {"area": rng.choice(["north", "south"])}))
    out.append(("ann-notes", "ann-notes/visit.md", "The oncologist visit about the lanternfish study", ("health",), {}))
    return out


@pytest.fixture(scope="module")
def worlds(tmp_path_factory):
    """Three homes: every collection; and for each user, the same index with what they cannot see deleted."""
    base, embedder = tmp_path_factory.mktemp("probe"), HashEmbedder()
    full = base / "full"
    full.mkdir()
    store = Store.open(full / "rag.db")
    for coll, key, text, tags, meta in _corpus(random.Random(11)):
        add_doc(store, embedder, coll, key, text, title=key.split("/")[-1], tags=tags, metadata=meta,
                ts=1_700_000_000 + len(key) * 3600)
    store.close()
    keys = {name: users.new_key() for name in GRANTS}
    config = {"users": {n: {"key_sha256": users.key_hash(k), "id": users.new_id(), "collections": GRANTS[n]}
                        for n, k in keys.items()},
              "people": {"known": {"Ann Example": ["ann@example.com"]}}}
    (full / "config.yaml").write_text(yaml.safe_dump(config))
    homes = {"full": full}
    for user, grants in GRANTS.items():
        home = base / f"without-{user}"
        shutil.copytree(full, home)
        s = Store.open(home / "rag.db")
        for coll in PRIVATE - set(grants):
            writes.delete_collection(s, coll)
        s.close()
        homes[user] = home
    yield homes, keys, embedder


class Served:
    """One home served as `local-rag serve --http` serves it, in process."""

    def __init__(self, home: Path, embedder):
        self.paths = Paths.from_env({"LOCAL_RAG_HOME": str(home)})
        self.store = Store.open(self.paths.db)
        live = LiveSettings(self.paths.config)
        self.ctx = RagContext(self.paths, live.settings, self.store, embedder,
                              SearchEngine(self.store, embedder, live.settings.search), None, live)
        self.access = http_keys.Access(self.paths, None, open_when_keyless=False)

    def app(self):
        return mcp_server.http_app(port=8765, paths=self.paths, access=self.access,
                                   web=page_for(self.ctx, self.access, self.paths))

    def close(self):
        self.store.close()


def mcp_calls(user: str) -> list[tuple[str, dict]]:
    """Every tool (and the issue's min_score probe) with arguments naming the user's collections, items, tags."""
    mine = GRANTS[user]
    calls: list[tuple[str, dict]] = []
    for q in QUERIES:
        for mode in ("keyword", "hybrid", "semantic"):
            calls.append(("rag_search", {"query": q, "mode": mode, "top_k": 20}))
        calls += [("rag_search", {"query": q, "mode": "keyword", "min_score": 0.45}),
                  ("rag_search", {"query": q, "chunks": True, "collection": mine[0]}),
                  ("rag_search", {"query": q, "tags": ["garden"], "metadata": {"area": "north"}}),
                  ("rag_search_by_tag", {"tag": "work", "query": q})]
    calls += [("rag_search", {"searches": [{"type": "keyword", "query": "tomato ledger"},
                                           {"type": "semantic", "query": "harbour window"}], "intent": "budget"}),
              ("rag_batch_search", {"queries": QUERIES[:6], "mode": "keyword", "min_score": 0.3}),
              ("rag_batch_search", {"queries": QUERIES[6:], "top_k": 15}),
              ("rag_list_collections", {}), ("rag_status", {}), ("rag_knowledge_stats", {}),
              ("rag_search_by_tag", {"tag": "garden"}), ("rag_list_recent", {"days": 365_000, "limit": 50})]
    for coll in mine:
        calls += [("rag_collection_info", {"collection": coll}),
                  ("rag_list_recent", {"collection": coll, "days": 365_000})]
    for n in range(0, 48, 3):
        key = f"{mine[n % 2]}/note{n}.md"
        calls += [("rag_get_document", {"path_or_id": key}), ("rag_related", {"path_or_id": key, "top_k": 20}),
                  ("rag_context", {"path_or_id": key, "chunk_index": 0})]
    return calls


RESOURCES = ["rag://stats", "ingestion://status", "ingestion://stats", "knowledge://stats", "ingestion://failures",
             "ingestion://metadata"]


def mcp_answers(served: Served, user: str, key: str) -> dict[str, str]:
    person = users.directory(served.paths).find(key)

    async def go():
        out = {}
        async with Client(mcp_server.build_server()) as c:
            for tool, args in mcp_calls(user):
                r = await c.call_tool(tool, args)
                out[f"{tool} {json.dumps(args, sort_keys=True)}"] = " ".join(x.text for x in r.content)
            for uri in RESOURCES:
                out[uri] = (await c.read_resource(uri)).contents[0].text
            out["tools/list"] = (await c.list_tools()).model_dump_json()
        return out

    with users.acting_as(person):
        return asyncio.run(go())


def page_answers(served: Served, user: str, key: str) -> dict[str, str]:
    client = TestClient(served.app(), base_url="http://127.0.0.1:8765", follow_redirects=False)
    assert client.post("/login", data={"key": key}).status_code == 303
    out = {}
    routes = [("/", {"q": q}) for q in QUERIES] + [("/results", {"q": q, "mode": m}) for q in QUERIES[:7]
                                                   for m in ("keyword", "semantic")]
    routes += [("/results", {"q": "garden", "tag": "garden", "person": "Ann"}), ("/", {}), ("/status", {})]
    ids = [r[0] for r in served.store.conn.execute(
        "SELECT i.id FROM items i JOIN collections c ON c.id = i.collection_id WHERE c.name IN (?, ?) ORDER BY i.id",
        tuple(GRANTS[user]))]
    routes += [(f"/item/{i}", {"q": "tomato garden"}) for i in ids[::2]]
    for path, params in routes:
        answer = client.get(path, params=params)
        out[f"{path} {json.dumps(params, sort_keys=True)}"] = f"{answer.status_code} {answer.text}"
    return out


_VOLATILE = [(re.compile(r'"ms":\s*[\d.]+'), '"ms":0'), (re.compile(r" · \d+ ms"), " · 0 ms"),
             (re.compile(r'name="csrf" value="[0-9a-f]+"'), 'name="csrf"'),
             (re.compile(r'"loaded":\s*"[^"]+"'), '"loaded":""'), (re.compile(r'"took_ms":\s*[\d.]+'), "")]


def _steady(text: str) -> str:
    for pattern, fixed in _VOLATILE:
        text = pattern.sub(fixed, text)
    return text


@pytest.mark.parametrize("user", list(GRANTS))
def test_no_answer_changes_with_the_items_a_user_cannot_see(worlds, monkeypatch, user):
    homes, keys, embedder = worlds
    answers = {}
    for world in ("full", user):
        served = Served(homes[world], embedder)
        monkeypatch.setattr(mcp_server, "_context", served.ctx)
        try:
            answers[world] = {**mcp_answers(served, user, keys[user]), **page_answers(served, user, keys[user])}
        finally:
            served.close()
    full, without = answers["full"], answers[user]
    assert full.keys() == without.keys() and len(full) > 150
    differences = [k for k in full if _steady(full[k]) != _steady(without[k])]
    assert differences == [], (len(differences), differences[:3], _first_diff(full, without, differences))
    hits = sum(text.count('"relevance"') for text in full.values())
    assert hits > 300  # the probe compared real scores, not empty answers
    others = [w for c in PRIVATE - set(GRANTS[user]) for w in OWN[c]]
    assert not any(w in _steady(t) for t in full.values() for w in others if w not in json.dumps(QUERIES))


def _first_diff(full: dict, without: dict, keys: list[str]) -> str:
    if not keys:
        return ""
    a, b = _steady(full[keys[0]]), _steady(without[keys[0]])
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"{keys[0]}: ...{a[max(0, at - 80):at + 80]}... vs ...{b[max(0, at - 80):at + 80]}..."


def test_the_probe_would_see_whole_index_statistics(worlds):
    """Control: the same searches weighed by the whole index's figures (no scope, as before this issue) do differ
    between the two indexes, so the probe above would have caught them."""
    homes, _, embedder = worlds
    scores = {}
    for world in ("full", "bob"):
        store = Store.open(Path(homes[world]) / "rag.db")
        engine = SearchEngine(store, embedder)
        scores[world] = [[(h.key, round(h.score, 6), round(h.relevance or 0, 6)) for h in search_with_relevance(
            engine, SearchRequest(q, mode="keyword", filters=Filters(collections=tuple(GRANTS["bob"])))).hits]
            for q in QUERIES]
        store.close()
    assert scores["full"] != scores["bob"]
