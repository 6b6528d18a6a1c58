"""Ranking: the whole-item keyword index, distinct item results, exact rare tokens first in hybrid, reranking."""

from __future__ import annotations

import json
import random
import time

import pytest
from conftest import add_doc
from ollama_standin import OllamaStandIn

from rag_search.config import SearchSettings
from rag_search.store.item_writer import ParsedItem, write_items
from rag_search.records import Chunk, Fingerprint, ItemRef
from rag_search.retrieval import SearchEngine, SearchRequest
from rag_search.retrieval.engine import Retrieved
from rag_search.retrieval.rerank import Candidate, FeatureReranker, OllamaReranker, apply_rerank, load_reranker
from rag_search.store import Store, migrations, writes


def add_item(store, embedder, key, sections, collection="n", title=None, **fields):
    """One item of several chunks (one per section text)."""
    writes.ensure_collection(store, collection)
    ref = ItemRef(collection, key, f"/data/{collection}/{key}", "markdown")
    title = title or key
    chunks = [Chunk(index=i, text=f"{title} > Part {i + 1}\n\n{t}", title=title, heading_path=(f"Part {i + 1}",),
                    **fields)
              for i, t in enumerate(sections)]
    write_items(store, embedder, [ParsedItem(ref, Fingerprint(1, 1, key), title, chunks)])


def item_fts(store, expression):
    return [r[0] for r in store.conn.execute("SELECT rowid FROM items_fts WHERE items_fts MATCH ? ORDER BY rank",
                                             (expression,))]


def item_id(store, key):
    return store.conn.execute("SELECT id FROM items WHERE key = ?", (key,)).fetchone()[0]


# -- the whole-item keyword index ---------------------------------------------------------------

def test_item_index_follows_every_write(store, fake_embedder):
    add_item(store, fake_embedder, "a.md", ["the zebra crossed", "a quokka smiled"], title="Alpha")
    a = item_id(store, "a.md")
    assert item_fts(store, '"zebra" AND "quokka"') == [a]  # terms of different chunks match the item together
    assert item_fts(store, 'text:"alpha"') == []  # the title opening each chunk's context line is not body text
    assert item_fts(store, 'title:"alpha"') == [a] and item_fts(store, 'text:"part"') == [a]  # headings stay
    add_item(store, fake_embedder, "a.md", ["only a wombat now"])  # replaced in the same transaction
    assert item_fts(store, '"zebra"') == [] and item_fts(store, '"wombat"') == [a]
    add_item(store, fake_embedder, "b.md", ["another wombat"])
    writes.delete_items(store, "n", ["a.md"])
    assert item_fts(store, '"wombat"') == [item_id(store, "b.md")]
    writes.delete_collection(store, "n")
    assert store.conn.execute("SELECT count(*) FROM items_fts").fetchone()[0] == 0


def test_failed_write_leaves_the_item_index_unchanged(store, fake_embedder):
    add_item(store, fake_embedder, "a.md", ["the zebra crossed"])
    ref = ItemRef("n", "a.md", "/data/n/a.md", "markdown")
    with pytest.raises(Exception):
        writes.replace_item(store, ref, None, "a.md", [Chunk(index=0, text="quokka")], fake_embedder.embed_documents([]))
    assert item_fts(store, '"zebra"') == [item_id(store, "a.md")] and item_fts(store, '"quokka"') == []


def test_migration_backfills_an_existing_index(tmp_path, monkeypatch, fake_embedder):
    older = [m for m in migrations.MIGRATIONS if m[0] != "0006_item_fts"]
    monkeypatch.setattr(migrations, "MIGRATIONS", older)
    path = tmp_path / "old.db"
    store = Store.open(path)
    writes.ensure_collection(store, "n")
    with store.transaction() as conn:  # what an index written before 0006 holds
        conn.execute("INSERT INTO items(id, collection_id, source_type, key, uri, title, status) "
                     "VALUES (7, 1, 'markdown', 'a.md', '/a.md', 'Alpha', 'indexed')")
        for idx, text in enumerate(["Alpha\n\nthe zebra crossed", "Alpha > Part 2\n\na quokka smiled"]):
            conn.execute("INSERT INTO chunks(item_id, collection_id, idx, title, text, content_hash) "
                         "VALUES (7, 1, ?, 'Alpha', ?, 'h')", (idx, text))
    store.close()
    monkeypatch.undo()
    store = Store.open(path)
    assert "0006_item_fts" in migrations.applied(store.conn)
    assert item_fts(store, '"zebra" AND "quokka" AND "part"') == [7]
    assert item_fts(store, 'text:"alpha"') == []
    store.close()


# -- item-level results ---------------------------------------------------------------------------

@pytest.fixture
def corpus(store, fake_embedder):
    add_item(store, fake_embedder, "split.md", ["Notes on the zebra enclosure.", "The quokka arrives in May."])
    # named for neither word: a note *named* Zebra is name evidence of its own (test_names_and_scripts.py)
    add_item(store, fake_embedder, "park.md", ["A zebra seen at the park."])
    add_item(store, fake_embedder, "island.md", ["A quokka seen on the island."])
    add_item(store, fake_embedder, "long.md", [f"Chapter {n} about the kube-proxy upgrade and its rollback."
                                               for n in range(8)])
    for n in range(6):
        add_item(store, fake_embedder, f"other{n}.md", [f"kube-proxy mention {n} in passing"])
    return store


def test_terms_split_across_chunks_rank_the_item_first(corpus, fake_embedder):
    engine = SearchEngine(corpus, fake_embedder)
    for mode in ("keyword", "hybrid"):
        hits = engine.search(SearchRequest("zebra quokka", mode=mode)).hits
        assert hits[0].key == "split.md", (mode, [h.key for h in hits])
        assert hits[0].item_ranks["keyword"] == 1


def test_one_hit_per_item_with_its_other_sections(corpus, fake_embedder):
    engine = SearchEngine(corpus, fake_embedder)
    hits = engine.search(SearchRequest("kube-proxy upgrade rollback", top_k=5)).hits
    keys = [h.key for h in hits]
    assert len(keys) == len(set(keys)) == 5 and keys[0] == "long.md"
    assert len(hits[0].sections) == 5 and {s["heading"] for s in hits[0].sections} <= {f"Part {n}" for n in range(1, 9)}
    assert hits[0].chunk_index not in {s["chunk_index"] for s in hits[0].sections}
    chunks = engine.search(SearchRequest("kube-proxy upgrade rollback", top_k=5, chunks=True)).hits
    assert [h.key for h in chunks].count("long.md") >= 3 and all(not h.sections for h in chunks)


def test_top_k_is_full_of_distinct_items(store, fake_embedder):
    for n in range(30):  # every item has many chunks matching the query equally
        add_item(store, fake_embedder, f"doc{n:02}.md", [f"release checklist step {s} for service {n}" for s in range(6)])
    engine = SearchEngine(store, fake_embedder, SearchSettings(candidates=10))
    for mode in ("keyword", "semantic", "hybrid"):
        hits = engine.search(SearchRequest("release checklist", top_k=25, mode=mode)).hits
        assert len({h.item_id for h in hits}) == len(hits) == 25, mode


def test_filters_choose_a_passing_chunk(store, fake_embedder):
    writes.ensure_collection(store, "n")
    ref = ItemRef("n", "mixed.md", "/data/n/mixed.md", "markdown")
    chunks = [Chunk(index=0, text="mixed\n\nzebra early", title="mixed", ts=100),
              Chunk(index=1, text="mixed\n\nquokka late", title="mixed", ts=5000)]
    write_items(store, fake_embedder, [ParsedItem(ref, None, "mixed", chunks)])
    from rag_search.retrieval import Filters

    engine = SearchEngine(store, fake_embedder)
    hits = engine.search(SearchRequest("zebra quokka", mode="keyword", filters=Filters(date_from=1000))).hits
    assert [h.chunk_index for h in hits] == [1]
    # the item holds "zebra" as a whole; what is shown is still a chunk that passes the filter
    hits = engine.search(SearchRequest("zebra", mode="keyword", filters=Filters(date_from=1000))).hits
    assert [h.chunk_index for h in hits] == [1]
    assert engine.search(SearchRequest("zebra", mode="keyword", filters=Filters(date_to=50))).hits == []


# -- exact identifiers and rare tokens in hybrid mode ------------------------------------------------

TOPICS = [
    "Weekly sync with the platform team about the deployment pipeline and flaky integration tests.",
    "Grocery list and meal plan for the week: lentil soup, roasted vegetables, and rye bread.",
    "Reading notes on distributed consensus: leader election, log replication and quorum reads.",
    "Trip planning for the coast: train times, a guesthouse near the harbour, and a ferry to the island.",
    "Budget review for the quarter: cloud costs went up, licences were renewed, travel was cut.",
    "Garden journal: tomatoes planted, the apple tree pruned, compost turned after the rain.",
    "Interview loop feedback for the backend role: strong on systems design, weaker on testing.",
    "Home network: the router was replaced, the printer got a static address, the NAS was updated.",
]


def unique_token(rng: random.Random, n: int) -> str:
    letters = "".join(rng.choice("bcdfghjklmnpqrstvwxz") + rng.choice("aeiou") for _ in range(3))
    forms = [f"{letters[:3].upper()}-{rng.randint(10000, 99999)}", f"{letters}_{rng.randint(10, 99)}_cfg",
             f"{letters.capitalize()}Handler{n}", f"{letters}ine"]
    return forms[n % len(forms)]


@pytest.fixture(scope="module")
def token_notes(tmp_path_factory, builtin_embedder):
    """200 notes of everyday topics, each holding one unique token (ids, snake_case, CamelCase, rare words)."""
    rng = random.Random(12)
    store = Store.open(tmp_path_factory.mktemp("tokens") / "rag.db")
    writes.ensure_collection(store, "notes")
    items, tokens = [], {}
    for n in range(200):
        token = unique_token(rng, n)
        key = f"note-{n:03}.md"
        tokens[key] = token
        text = f"{TOPICS[n % len(TOPICS)]} Reference {token} was mentioned. {TOPICS[(n * 3 + 1) % len(TOPICS)]}"
        ref = ItemRef("notes", key, f"/notes/{key}", "markdown")
        items.append(ParsedItem(ref, None, key, [Chunk(index=0, text=text, title=key)]))
    write_items(store, builtin_embedder, items)
    yield store, tokens
    store.close()


def test_a_unique_token_ranks_its_note_first_in_hybrid(token_notes, builtin_embedder):
    store, tokens = token_notes
    engine = SearchEngine(store, builtin_embedder)  # the defaults, as users get them
    probes = random.Random(3).sample(sorted(tokens), 40)
    misses = []
    for n, key in enumerate(probes):
        query = tokens[key] if n % 4 else f"where did I mention {tokens[key]}"
        hits = engine.search(SearchRequest(query)).hits
        if not hits or hits[0].key != key:
            misses.append((query, [h.key for h in hits[:3]]))
    assert not misses, f"{len(misses)} of 40 probes missed rank 1: {misses[:5]}"


# -- reranking ----------------------------------------------------------------------------------------

def candidates(n=4):
    return [Candidate(item_id=i, chunk_id=i, title=f"t{i}", text=f"text {i}", fused_rank=i + 1,
                      fused_score=1.0 / (60 + i + 1)) for i in range(n)]


class Reverse:
    id = "reverse"

    def scores(self, query, cands, deadline):
        return [float(c.fused_rank) for c in cands]


class Slow:
    id = "slow"

    def scores(self, query, cands, deadline):
        return [float(c.fused_rank) if n < 2 else None for n, c in enumerate(cands)]


def test_rerank_orders_within_the_head_and_keeps_unscored_slots():
    got = Retrieved()
    order, scores, note = apply_rerank(Reverse(), "q", candidates(), got, 1.0)
    assert order == [3, 2, 1, 0] and scores == [1.0, 2.0, 3.0, 4.0] and note is None
    order, scores, note = apply_rerank(Slow(), "q", candidates(), got, 1.0)
    assert order == [1, 0, 2, 3] and "scored 2 of 4" in note


def test_feature_reranker_prefers_the_candidate_that_covers_the_query():
    cands = candidates(3)
    cands[2].text = "the zebra and the quokka share an enclosure"
    cands[2].title = "zebra quokka"
    reranker = FeatureReranker({"coverage": 1.0, "title": 1.0, "proximity": 1.0})
    order, _, _ = apply_rerank(reranker, "zebra quokka", cands, Retrieved(), 1.0)
    assert order[0] == 2


def test_reranking_is_configured_and_measured_in_the_engine(corpus, fake_embedder):
    assert load_reranker(SearchSettings(reranker="off")) is None
    assert load_reranker(SearchSettings(reranker="features")).id == "features"
    engine = SearchEngine(corpus, fake_embedder, SearchSettings(reranker="features"))
    result = engine.search(SearchRequest("zebra quokka"))
    assert result.reranker == "features" and "rerank" in result.timings_ms
    assert result.hits[0].key == "split.md"
    plain = engine.search(SearchRequest("zebra quokka", rerank=False))
    assert plain.reranker is None


def test_ollama_reranker_against_the_local_stand_in(corpus, fake_embedder):
    """Only the Ollama server is replaced (tests/ollama_standin.py); our client code runs as it would."""
    with OllamaStandIn(models=("bge-m3:latest",), dims=64) as server:
        reranker = load_reranker(SearchSettings(reranker="ollama"), ollama_host=server.host)
        assert isinstance(reranker, OllamaReranker) and reranker.id == "ollama/bge-m3"
        settings = SearchSettings(reranker="ollama", rerank_budget_ms=5000)
        engine = SearchEngine(corpus, fake_embedder, settings, reranker=reranker)
        result = engine.search(SearchRequest("zebra quokka", top_k=3))
        assert result.reranker == "ollama/bge-m3" and result.rerank_note is None
        sent = [r for r in server.requests if r["path"] == "/api/embed"][-1]
        assert sent["model"] == "bge-m3" and sent["input"][0] == "zebra quokka" and len(sent["input"]) > 3
        assert result.hits[0].key == "split.md"
    with OllamaStandIn(models=("bge-m3:latest",), dims=64, delay=0.5) as slow:
        engine = SearchEngine(corpus, fake_embedder, SearchSettings(reranker="ollama", rerank_budget_ms=100),
                              reranker=OllamaReranker(slow.host))
        t0 = time.perf_counter()
        result = engine.search(SearchRequest("zebra quokka", top_k=3))
        # the request was cut at the budget (a timeout, so the fused order stands) rather than waited out: the note
        # says so; the time bound only catches a hang (a 0.45 s bound failed once on a loaded machine: 1.16 s)
        assert "fused order kept" in (result.rerank_note or "") and time.perf_counter() - t0 < 5
        assert result.hits[0].key == "split.md"
    with OllamaStandIn(models=("nomic-embed-text:latest",), dims=64) as other:
        engine = SearchEngine(corpus, fake_embedder, reranker=OllamaReranker(other.host))
        result = engine.search(SearchRequest("zebra quokka", top_k=3))
        assert "ollama pull bge-m3" in result.rerank_note and result.hits[0].key == "split.md"
