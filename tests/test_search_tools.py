"""The agent's search tools: query plans, batch search, context around a hit, min_score (relevance 0..1), stale
marks. The fixture vault indexed through the pipelines; the tools through a real MCP client over stdio."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from pipeline_env import make_home

from rag_search.cli.main import cli
from rag_search.errors import QueryError
from rag_search.records import Hit
from rag_search.retrieval import Filters, SearchEngine, SearchRequest
from rag_search.retrieval.context import chunks_around
from rag_search.retrieval.plan import INTENT_WEIGHT, QueryPlan, SubQuery, fuse_lists, run_plan
from rag_search.retrieval.relevance import query_vectors, with_relevance, word_share
from rag_search.retrieval.stale import CHANGED, DELETED, UNCHECKED, mark_hits, stale_marks, stale_note
from rag_search.store import Store

EXE = str(Path(sys.executable).with_name("local-rag"))
KUBE = "Projects/Work/Kube Upgrade.md"


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    """The fixture vault indexed through the pipelines, in its own LOCAL_RAG_HOME."""
    mp = pytest.MonkeyPatch()
    paths, vault = make_home(tmp_path_factory.mktemp("tools"), mp)
    from rag_pipelines.indexing import runs
    from rag_pipelines.wiring import resources

    runs.index_collections(paths, ["notes"])
    resources.close_all()
    env = {"LOCAL_RAG_HOME": str(paths.home), "DAGSTER_HOME": str(paths.dagster_home)}
    mp.undo()
    return paths, vault, env


@pytest.fixture
def engine(indexed, builtin_embedder):
    paths, _, _ = indexed
    store = Store.open(paths.db)
    yield SearchEngine(store, builtin_embedder)
    store.close()


def item_id(store: Store, key: str) -> int:
    return store.conn.execute("SELECT id FROM items WHERE key = ?", (key,)).fetchone()[0]


# -- stale marks -------------------------------------------------------------------------------

def test_stale_marks_after_an_edit_a_delete_and_a_move_and_gone_after_reindexing(indexed, tmp_path):
    paths, vault, env = indexed
    store = Store.open(paths.db)
    edited, deleted, moved = "Projects/Runbook.md", "Help/Formatting help.md", KUBE
    ids = {k: item_id(store, k) for k in (edited, deleted, moved)}
    assert stale_marks(store, list(ids.values())) == {}  # as indexed
    saved = {k: (vault / k).read_bytes() for k in ids}
    try:
        with (vault / edited).open("a") as f:
            f.write("\nOne more step.\n")
        (vault / deleted).unlink()
        (vault / "Moved here").mkdir()
        (vault / moved).rename(vault / "Moved here" / "Kube Upgrade.md")
        assert stale_marks(store, list(ids.values())) == {ids[edited]: CHANGED, ids[deleted]: DELETED,
                                                          ids[moved]: DELETED}
        hits = SearchEngine(store, None).search(SearchRequest("kube-proxy iptables", mode="keyword")).hits
        marked = mark_hits(store, hits)
        assert marked[0].key == moved and marked[0].stale == DELETED and marked[0].to_dict()["stale"] == DELETED
        out = CliRunner().invoke(cli, ["search", "--mode", "keyword", "kube-proxy iptables"], env=env,
                                 catch_exceptions=False).output
        assert "[deleted since indexed]" in out.splitlines()[0]
        as_json = json.loads(CliRunner().invoke(cli, ["search", "--json", "--mode", "keyword", "runbook steps"],
                                                env=env, catch_exceptions=False).output)
        assert {h["key"]: h["stale"] for h in as_json["hits"]}[edited] == CHANGED
    finally:
        (vault / "Moved here" / "Kube Upgrade.md").unlink(missing_ok=True)
        shutil.rmtree(vault / "Moved here", ignore_errors=True)
        for k, data in saved.items():
            (vault / k).write_bytes(data)
    from rag_pipelines.indexing import runs
    from rag_pipelines.wiring import resources

    os.environ.update(env)
    try:
        runs.index_collections(paths, ["notes"])  # the restored files differ in mtime: re-checked, re-stamped
    finally:
        resources.close_all()
        for k in env:
            os.environ.pop(k, None)
    assert stale_marks(store, [item_id(store, k) for k in ids]) == {}
    store.close()


def test_a_process_that_cannot_see_the_sources_says_it_cannot_check(indexed, monkeypatch):
    """A search server without the sources (a pod without the volume, an unmounted disk) marks a missing file
    "unchecked", not "deleted"; the config naming the source folders is read only when a file is missing."""
    from rag_search import collection_config

    paths, vault, env = indexed
    store = Store.open(paths.db)
    ids = [item_id(store, k) for k in (KUBE, "Projects/Runbook.md")]
    reads, declared = [], collection_config.declared
    monkeypatch.setattr(collection_config, "declared", lambda *a, **kw: reads.append(1) or declared(*a, **kw))
    monkeypatch.setenv("LOCAL_RAG_HOME", str(paths.home))
    assert stale_marks(store, ids) == {} and reads == []  # every file there: nothing else read
    away = vault.with_name(vault.name + "-elsewhere")
    vault.rename(away)
    try:
        assert stale_marks(store, ids) == {i: UNCHECKED for i in ids} and reads == [1]  # once per call
        vault.mkdir()  # a mount point with nothing mounted
        assert stale_marks(store, ids) == {i: UNCHECKED for i in ids}
        hits = mark_hits(store, SearchEngine(store, None).search(SearchRequest("kube-proxy iptables",
                                                                              mode="keyword")).hits)
        assert hits[0].key == KUBE and hits[0].stale == UNCHECKED and "could not be checked" in stale_note(hits)
        out = CliRunner().invoke(cli, ["search", "--mode", "keyword", "kube-proxy iptables"], env=env,
                                 catch_exceptions=False).output
        assert "[not checked: its source is not visible here]" in out.splitlines()[0]
        assert "deleted" not in out
        vault.rmdir()
    finally:
        away.rename(vault)
    (vault / "Projects" / "Runbook.md").rename(vault / "Runbook.md.away")  # the folder is there: truly deleted
    try:
        assert stale_marks(store, ids) == {ids[1]: DELETED}
    finally:
        (vault / "Runbook.md.away").rename(vault / "Projects" / "Runbook.md")
    store.close()


def test_items_without_a_file_of_their_own_are_not_marked(store, fake_embedder, tmp_path):
    """A message (its uri a message id) is not checked; a calendar event only for its file's disappearance."""
    from rag_search.store.item_writer import ParsedItem, write_items
    from rag_search.records import Chunk, Fingerprint, ItemRef
    from rag_search.store import writes

    ics = tmp_path / "cal.ics"
    ics.write_text("BEGIN:VCALENDAR\nEND:VCALENDAR\n")
    for coll, key, uri, kind in [("mail", "m1", "mid:abc@example.com", "email"), ("cal", "e1", str(ics), "event")]:
        writes.ensure_collection(store, coll)
        write_items(store, fake_embedder, [ParsedItem(ItemRef(coll, key, uri, kind), Fingerprint(None, None, "x", "s"),
                                                      key, [Chunk(index=0, text=f"{key} text", title=key)])])
    ids = [r[0] for r in store.conn.execute("SELECT id FROM items ORDER BY id")]
    ics.write_text("BEGIN:VCALENDAR\nX-CHANGED:1\nEND:VCALENDAR\n")
    assert stale_marks(store, ids) == {}  # an edit inside the calendar file is not checked
    ics.unlink()
    assert stale_marks(store, ids) == {ids[1]: DELETED}


# -- query plans, relevance, context (library) ------------------------------------------------

def hit(item_id: int, chunk_id: int) -> Hit:
    return Hit(chunk_id, item_id, "c", "markdown", f"k{item_id}", f"/x/{item_id}", f"t{item_id}", "text", "", 0, (),
               None, None, None, (), {}, 0.0)


def test_fusion_of_sub_query_lists_shows_each_item_by_the_list_that_ranked_it_best():
    lists = {"keyword#1": (1.0, [hit(1, 10), hit(2, 20)]), "semantic#2": (1.0, [hit(2, 21), hit(3, 30)]),
             "semantic#3": (INTENT_WEIGHT, [hit(3, 31)])}
    fused = fuse_lists(lists, k=10)
    assert [h.item_id for h in fused] == [2, 3, 1]  # in both lists first; 3 twice, once at half weight
    assert fused[0].chunk_id == 21 and fused[0].item_ranks == {"keyword#1": 2, "semantic#2": 1}
    assert fused[1].chunk_id == 31  # shown by the list that ranked it first
    assert fused[0].score == pytest.approx(1 / 12 + 1 / 11) and fused[1].score == pytest.approx(1 / 12 + 0.5 / 11)


def test_a_plan_finds_what_the_plain_query_misses_and_checks_its_bounds(engine):
    plain = engine.search(SearchRequest("Comment revenir en arrière après la mise à jour ?", top_k=3))
    plan = QueryPlan((SubQuery("keyword", "kube-proxy rollback"), SubQuery("semantic", "roll back a cluster upgrade")),
                     intent="how to undo the Kubernetes upgrade")
    found = run_plan(engine, plan, Filters(), top_k=3).hits
    assert found[0].key == KUBE and KUBE not in [h.key for h in plain.hits[:1]]
    assert set(found[0].item_ranks) == {"keyword#1", "semantic#2", "semantic#3"}  # the intent searched too
    assert all(0.0 <= h.relevance <= 1.0 for h in found) and found[0].relevance > 0.5
    for bad, why in [(QueryPlan(()), "Give a query"), (QueryPlan((SubQuery("fuzzy", "x"),)), "keyword"),
                     (QueryPlan((SubQuery("keyword", " "),)), "empty"),
                     (QueryPlan((SubQuery("keyword", "x" * 1001),)), "at most 1,000"),
                     (QueryPlan(tuple(SubQuery("keyword", "x") for _ in range(9))), "at most 8"),
                     (QueryPlan((SubQuery("keyword", "x"),), "y" * 501), "intent")]:
        with pytest.raises(QueryError, match=why):
            bad.checked()


def test_relevance_is_one_scale_meaning_or_rare_words_and_min_score_cuts_by_it(engine):
    q = "kube-proxy iptables"
    vec = query_vectors(engine.embedder, [q])[q]
    hits = with_relevance(engine.store, q, engine.search(SearchRequest(q, top_k=5)).hits, vec)
    assert hits[0].key == KUBE and hits[0].relevance == pytest.approx(1.0)  # holds every query word
    assert all(0.0 <= h.relevance <= 1.0 for h in hits) and min(h.relevance for h in hits) < 0.5
    unrelated = with_relevance(engine.store, "sourdough bread starter", hits[:1], query_vectors(
        engine.embedder, ["sourdough bread starter"])["sourdough bread starter"])
    assert unrelated[0].relevance < 0.3
    assert word_share({"kube": 3.0, "upgrade": 1.0}, hits[0]) == pytest.approx(1.0)
    assert word_share({"kube": 3.0, "zebra": 1.0}, hits[0]) == pytest.approx(0.75)


def test_batched_query_vectors_equal_one_at_a_time(builtin_embedder):
    texts = ["kubernetes upgrade", "a much longer question about the sourdough bread starter we fed", "x"]
    batch = query_vectors(builtin_embedder, texts)
    for t in texts:
        assert np.allclose(batch[t], builtin_embedder.embed_query(t), atol=1e-5)


def test_context_gives_neighbours_in_order_and_stays_within_its_budget(engine):
    store = engine.store
    iid = item_id(store, "Help/Formatting help.md")
    n = store.conn.execute("SELECT count(*) FROM chunks WHERE item_id = ?", (iid,)).fetchone()[0]
    assert n >= 3
    around = chunks_around(store, iid, 1, 1, 5)
    assert [c["chunk_index"] for c in around["chunks"]] == list(range(0, min(n, 7)))
    assert [c.get("hit") for c in around["chunks"]][:2] == [None, True] and around["chunks_in_item"] == n
    small = chunks_around(store, iid, 1, 1, 5, budget_chars=1)
    assert [c["chunk_index"] for c in small["chunks"]] == [1] and "left out" in small["note"]
    with pytest.raises(QueryError, match="chunk_index 99"):
        chunks_around(store, iid, 99, 1, 1)


# -- through a real MCP client ------------------------------------------------------------------

@asynccontextmanager
async def session(env):
    params = StdioServerParameters(command=EXE, args=["serve"], env={**os.environ, **env})
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                yield s


def payload(result):
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


def test_plan_batch_context_min_score_and_stale_over_stdio(indexed):
    _, vault, env = indexed
    queries = ["kube-proxy iptables", "formatting help callouts", "runbook steps", "nothing like zebra qwxyz"]

    async def go():
        async with session(env) as s:
            planned = payload(await s.call_tool("rag_search", {"searches": [
                {"type": "keyword", "query": "kube-proxy rollback"},
                {"type": "semantic", "query": "roll back a cluster upgrade"}], "intent": "undo the upgrade"}))
            assert planned["hits"][0]["key"] == KUBE and planned["searches"] == 3
            assert 0 <= planned["hits"][-1]["relevance"] <= planned["hits"][0]["relevance"] <= 1
            readme = payload(await s.call_tool("rag_search", {  # the README's example: query, plan, intent, min_score
                "query": "cluster upgrade problems", "searches": [
                    {"type": "keyword", "query": "kube-proxy rollback"},
                    {"type": "semantic", "query": "the kubernetes upgrade failed and was rolled back"}],
                "intent": "what broke during the last cluster upgrade and how it was undone", "min_score": 0.3}))
            assert readme["searches"] == 4 and readme["hits"][0]["key"] == KUBE
            assert all(h["relevance"] >= 0.3 for h in readme["hits"])

            singles = [payload(await s.call_tool("rag_search", {"query": q})) for q in queries]
            batch = payload(await s.call_tool("rag_batch_search", {"queries": queries}))["results"]
            assert [r["query"] for r in batch] == queries
            for one, many in zip(singles, batch):
                assert [h["key"] for h in many["hits"]] == [h["key"] for h in one["hits"]]

            strict = payload(await s.call_tool("rag_search", {"query": "kube-proxy iptables", "min_score": 0.9}))
            assert [h["key"] for h in strict["hits"]] == [KUBE] and "below min_score" in strict["note"]

            top = singles[1]["hits"][0]
            ctx = payload(await s.call_tool("rag_context", {"path_or_id": str(top["item_id"]),
                                                            "chunk_index": top["chunk_index"], "before": 1,
                                                            "after": 1}))
            assert ctx["key"] == top["key"] and any(c.get("hit") for c in ctx["chunks"])
            assert top["content"].endswith(next(c["content"] for c in ctx["chunks"] if c.get("hit")))

            errors = {}
            for name, args in [("rag_search", {"query": "x", "mode": "fuzzy"}),
                               ("rag_search", {"searches": [{"type": "fuzzy", "query": "x"}]}),
                               ("rag_search", {}),
                               ("rag_batch_search", {"queries": ["x"] * 21}),
                               ("rag_context", {"path_or_id": str(top["item_id"]), "chunk_index": 999})]:
                result = await s.call_tool(name, args)
                assert result.is_error
                errors[json.dumps(args)[:40]] = result.content[0].text
            texts = list(errors.values())
            assert "mode: input should be 'hybrid', 'keyword' or 'semantic' (got 'fuzzy')" in texts[0]
            assert "input should be 'keyword' or 'semantic'" in texts[1] and "Give a query" in texts[2]
            assert "at most 20" in texts[3] and "chunk_index 999" in texts[4]
            assert all("\n" not in t and "validation error" not in t for t in texts)

            saved = (vault / KUBE).read_bytes()
            (vault / KUBE).unlink()
            try:
                gone = payload(await s.call_tool("rag_search", {"query": "kube-proxy iptables"}))
                assert gone["hits"][0]["stale"] == "deleted" and "deleted or moved" in gone["note"]
            finally:
                (vault / KUBE).write_bytes(saved)

    asyncio.run(go())


def test_cli_min_score_keeps_hits_of_that_relevance_and_explain_shows_it(indexed):
    _, _, env = indexed

    def search(*args):
        return CliRunner().invoke(cli, ["search", *args, "kube-proxy iptables"], env=env, catch_exceptions=False)

    everything = json.loads(search("--json").output)["hits"]
    strict = json.loads(search("--json", "--min-score", "0.9").output)["hits"]
    assert len(everything) > 1 and [h["key"] for h in strict] == [KUBE] and strict[0]["relevance"] >= 0.9
    assert all(0 <= h["relevance"] <= 1 for h in everything)
    assert "relevance 1.00" in search("--explain", "--top", "1").output
    assert search("--min-score", "2").exit_code == 2  # out of 0..1: a usage error
