"""FTS5 query safety, identifier and phrase matching, and Reciprocal Rank Fusion."""

from __future__ import annotations

import pytest

from rag_search.retrieval import SearchEngine, SearchRequest
from rag_search.retrieval.fusion import rrf
from rag_search.retrieval.keyword import match_expression, parse_terms

HOSTILE = [
    '"', '""', "'", "*", "(", ")", "a AND", "OR OR", "NOT", "NEAR(a b)", "title:secret", "^start", "-minus",
    "a + b", "col:val*", '"unterminated phrase', "{a b}", "a\x00b", "🙂 emoji", "über straße", "%_%", ";", "--",
    "DROP TABLE chunks;", "a:b:c", "[x]", "\\", "AND", "x" * 5000,
]


@pytest.fixture
def engine(store, add, fake_embedder):
    add("n", "k8s.md", "The kube-proxy pod crashed on node-3 after the upgrade.")
    add("n", "proxy.md", "Set up a reverse proxy in front of the kube API server for the team.")
    add("n", "code.md", "Rename snake_case_name to camelCase in the parser module.")
    add("n", "snake.md", "A snake in the garden; the case was closed; a name was given.")
    add("n", "invoice.md", "Invoice INV-2024-0042 from ACME was paid on 3 March.")
    add("n", "invoice2.md", "Invoice INV-2024-0043 is still open.")
    add("n", "phrase.md", "the quick brown fox jumps over the lazy dog")
    add("n", "shuffled.md", "the lazy fox is brown and quick, jumps over a dog")
    return SearchEngine(store, fake_embedder)


@pytest.mark.parametrize("query", HOSTILE)
@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_hostile_queries_never_break_fts(engine, query, mode):
    if not query.strip():
        return
    engine.search(SearchRequest(query, mode=mode))  # must not raise


@pytest.mark.parametrize(
    "query,expected",
    [("kube-proxy", "k8s.md"), ("snake_case_name", "code.md"), ("INV-2024-0042", "invoice.md"),
     ('"quick brown fox"', "phrase.md")],
)
def test_identifiers_and_phrases_match_exactly_first(engine, query, expected):
    hits = engine.search(SearchRequest(query, mode="keyword")).hits
    assert hits[0].key == expected
    assert len(hits) == 1  # the parts alone, or out of order, do not match


def test_prefix_search(engine):
    keys = {h.key for h in engine.search(SearchRequest("invo*", mode="keyword")).hits}
    assert keys == {"invoice.md", "invoice2.md"}


def test_natural_language_uses_or_and_drops_stopwords():
    terms = parse_terms("What is the status of the kube-proxy crash?")
    assert match_expression(terms) == '"status" OR "kube proxy" OR "crash"'
    assert match_expression(parse_terms("the")) == '"the"'
    assert match_expression(parse_terms('say "he said ""hi""" now')) is not None


def test_snippet_marks_matched_words(engine):
    hit = engine.search(SearchRequest("invoice paid", mode="keyword")).hits[0]
    assert "**Invoice**" in hit.snippet and "**paid**" in hit.snippet


def test_rrf_scores_and_order():
    fused = rrf({"vector": [1, 2, 3], "keyword": [3, 4]}, {"vector": 0.7, "keyword": 0.3}, k=60)
    scores = {f.chunk_id: f.score for f in fused}
    assert scores[3] == pytest.approx(0.7 / 63 + 0.3 / 61)
    assert scores[1] == pytest.approx(0.7 / 61)
    assert [f.chunk_id for f in fused] == [3, 1, 2, 4]
    assert fused[0].ranks == {"vector": 3, "keyword": 1}


def test_rrf_weights_shift_the_winner():
    rankings = {"vector": [1, 2], "keyword": [2, 1]}
    assert rrf(rankings, {"vector": 0.9, "keyword": 0.1})[0].chunk_id == 1
    assert rrf(rankings, {"vector": 0.1, "keyword": 0.9})[0].chunk_id == 2


def test_rrf_orders_ties_by_best_rank_then_id_on_random_rankings():
    """Equal scores (equal weights, mirrored ranks) go by the better best rank, then the lower id: the order the
    definition gives, computed the way the search does."""
    import random

    rng = random.Random(4)
    for _ in range(300):
        rankings = {name: rng.sample(range(40), rng.randint(0, 30)) for name in ("vector", "keyword", "title")}
        weights = {name: rng.choice([0.5, 1.0, 1.0, 0.0]) for name in rankings}
        fused = rrf(rankings, weights, k=60)
        scores, best = {}, {}
        for name, ids in rankings.items():
            if weights[name] <= 0:
                continue
            for rank, id_ in enumerate(ids, start=1):
                scores[id_] = scores.get(id_, 0.0) + weights[name] * 1.0 / (60 + rank)
                best[id_] = min(best.get(id_, rank), rank)
        assert [f.id for f in fused] == sorted(scores, key=lambda i: (-scores[i], best[i], i))
        assert [f.score for f in fused] == [scores[f.id] for f in fused]


def test_a_long_pasted_query_is_bounded_to_its_first_terms():
    """667 distinct words held the index 3.9 s (every word a doclist read and a reranker pass)."""
    from rag_search.retrieval.keyword import MAX_TERMS, parse_terms
    from rag_search.retrieval.rerank import query_words

    words = [f"q{a}{b}" for a in "abcdefghijklmnopqrstuvwxyz" for b in "abcdefghijklmnopqrstuvwxyz"][:667]
    query = " ".join(words)
    assert [t.text for t in parse_terms(query)] == words[:MAX_TERMS]
    assert query_words(query) == words[:MAX_TERMS]
