"""The feature reranker's inputs computed the fast way (a few lookups per query stem) equal their definition (every
word of a candidate stemmed): the same features, so the same order, for any text and query."""

from __future__ import annotations

import math
import random

import numpy as np

from rag_search.retrieval.rerank import FEATURES, Candidate, _stem, features, query_words, tokens

STEMS = ["plan", "test", "run", "bus", "read", "quick", "note", "tag", "index", "garden", "process", "class"]
ENDINGS = ["", "s", "es", "ed", "ing", "ly", "ings", "eds", "er"]


def word(rng: random.Random) -> str:
    return rng.choice(STEMS) + rng.choice(ENDINGS) if rng.random() < 0.6 else rng.choice(["the", "a", "of", "zzz"])


def by_definition(query: str, c: Candidate) -> tuple[float, float, float, float]:
    """coverage, proximity, idf_coverage, idf_title as the reranker first defined them."""
    qstems = [_stem(w) for w in query_words(query)]
    raw = tokens(c.text)
    stem_of = {w: _stem(w) for w in set(raw)}
    present = set(stem_of.values())
    covered = [q for q in qstems if q in present]
    words = [stem_of[w] for w in raw] if len(covered) > 1 else []
    wanted, last, best = set(covered), {}, math.inf
    for pos, w in enumerate(words):
        if w in wanted:
            last[w] = pos
            if len(last) == len(wanted):
                best = min(best, pos - min(last.values()) + 1)
    proximity = 0.0 if len(wanted) < 2 or best is math.inf else 1.0 / (1.0 + (best - len(wanted)) / 4)
    total = sum(c.idf.values()) or 1.0
    title = {_stem(w) for w in tokens(c.title)}
    return (len(covered) / len(qstems) if qstems else 0.0, proximity,
            sum(v for q, v in c.idf.items() if q in present) / total,
            sum(v for q, v in c.idf.items() if q in title) / total)


def test_features_equal_their_definition_on_random_texts_and_queries():
    rng = random.Random(33)
    columns = [FEATURES.index(f) for f in ("coverage", "proximity", "idf_coverage", "idf_title")]
    for _ in range(200):
        query = " ".join(word(rng) for _ in range(rng.randint(1, 5)))
        cands = []
        for n in range(6):
            c = Candidate(n, n, " ".join(word(rng) for _ in range(3)), " ".join(word(rng) for _ in range(60)),
                          n + 1, 1.0 / (n + 1))
            c.idf = {_stem(w): rng.random() for w in query_words(query)}
            cands.append(c)
        got = features(query, cands)
        want = np.array([by_definition(query, c) for c in cands])
        assert np.array_equal(got[:, columns], want), query


def test_words_of_ascii_text_are_the_regexs_words():
    """tokens() splits ASCII text by a byte table: the same words as \\w+ finds, whatever the punctuation."""
    import re

    rng = random.Random(5)
    alphabet = "abcXYZ019_ -.,;:!?()[]{}<>'\"`~@#$%^&*+=/\\|\t\n\x00\x7f"
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        assert tokens(text) == re.findall(r"\w+", text.lower()), repr(text)
    assert tokens("Ünïcode wörds, 東京タワー") == ["ünïcode", "wörds", "東京", "京タ", "タワ", "ワー"]


def test_distances_filled_in_one_call_equal_one_dot_product_per_chunk(tmp_path):
    """The reranker's cosine distances of the chunks the vector side did not rescore, computed for all candidates at
    once, are the float32 values `1.0 - vector @ query` gives chunk by chunk (the same order, so the same scores)."""
    from rag_search.retrieval.rerank import _fill_distances

    rng = np.random.default_rng(11)
    vectors = rng.standard_normal((200, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    known = {cid: vectors[cid] for cid in range(200)}
    query = rng.standard_normal(384).astype(np.float32)
    query /= np.linalg.norm(query)
    cands = []
    for n in range(30):
        chunks = rng.choice(200, size=int(rng.integers(1, 9)), replace=False).tolist()
        cands.append(Candidate(n, chunks[0], "", "", n + 1, 1.0, chunks=chunks))
    _fill_distances(None, query, cands, known, embedder_id="")
    for c in cands:
        each = sorted(float(1.0 - known[cid] @ query) for cid in c.chunks)
        assert c.distance == float(1.0 - known[c.chunk_id] @ query)
        assert c.second == (each[1] if len(each) > 1 else each[0])
