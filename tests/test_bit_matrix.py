"""Candidate generation from sign bits held in RAM (long-running servers): the same results as sqlite-vec's binary
KNN, collection scoping, and never a stale answer after a write (real SQLite with sqlite-vec)."""

from __future__ import annotations

import random

import pytest
from conftest import add_doc

from rag_search.retrieval import Filters, SearchEngine, SearchRequest, vector
from rag_search.store import writes

WORDS = "zebra quokka wombat kube proxy garden budget travel ferry harbour lentil bread router printer".split()


@pytest.fixture
def index(store, fake_embedder, monkeypatch):
    monkeypatch.setattr(vector, "EXACT_SCOPE_LIMIT", 10)  # binary candidates + rescoring from 10 chunks on
    rng = random.Random(5)
    for n in range(120):
        text = " ".join(rng.choice(WORDS) for _ in range(12))
        add_doc(store, fake_embedder, ("notes", "mail")[n % 2], f"doc{n:03}.md", text)
    return store


def keys(engine, query, **kw):
    result = engine.search(SearchRequest(query, mode="semantic", top_k=20, **kw))
    assert result.vector_plan == "binary+rescore"
    return [h.key for h in result.hits]


def test_bits_in_ram_give_the_same_results_as_sqlite_vec(index, fake_embedder):
    plain = SearchEngine(index, fake_embedder)
    ram = SearchEngine(index, fake_embedder, bits_in_ram=True)
    assert ram.bit_matrix.wait(60)
    used = []
    nearest = ram.bit_matrix.nearest
    ram.bit_matrix.nearest = lambda *a, **kw: used.append(1) or nearest(*a, **kw)
    for query in ("zebra quokka", "kube proxy router", "lentil bread budget", "ferry harbour travel"):
        assert keys(ram, query) == keys(plain, query), query
        scoped = keys(ram, query, filters=Filters(collections=("mail",)))
        assert scoped == keys(plain, query, filters=Filters(collections=("mail",)))
        assert scoped and all(int(k[3:6]) % 2 == 1 for k in scoped)
    assert len(used) == 8  # every query above was answered from RAM


def test_a_write_is_never_answered_from_a_stale_matrix(index, fake_embedder):
    ram = SearchEngine(index, fake_embedder, bits_in_ram=True)
    assert ram.bit_matrix.wait(60)
    first = keys(ram, "zebra quokka")
    writes.delete_items(index, "notes" if int(first[0][3:6]) % 2 == 0 else "mail", [first[0]])
    assert not ram.bit_matrix.ready()  # changed by this connection: back to sqlite-vec until re-read
    assert first[0] not in keys(ram, "zebra quokka")
    assert ram.bit_matrix.wait(60)
    assert first[0] not in keys(ram, "zebra quokka")
    add_doc(index, fake_embedder, "notes", "new.md", "zebra quokka zebra quokka")
    assert "new.md" in keys(ram, "zebra quokka")
    assert ram.bit_matrix.wait(60) and "new.md" in keys(ram, "zebra quokka")


@pytest.fixture
def tagged(store, fake_embedder, monkeypatch):
    monkeypatch.setattr(vector, "EXACT_SCOPE_LIMIT", 10)
    rng = random.Random(9)
    for n in range(160):
        tags = ("half",) if n % 2 else ()
        tags += ("rare",) if n % 40 == 3 else ()
        text = " ".join(rng.choice(WORDS) for _ in range(12))
        add_doc(store, fake_embedder, ("notes", "mail")[n % 2], f"doc{n:03}.md", text, tags=tags, ts=1_600_000_000 + n)
    return store


@pytest.mark.parametrize("filters", [Filters(tags=("rare",)), Filters(tags=("half",)),
                                     Filters(date_from=1_600_000_100), Filters(tags=("half",), collections=("mail",))])
def test_filters_on_bits_in_ram_give_the_same_results_as_sqlite_vec(tagged, fake_embedder, filters):
    """A selective filter (rare: 4 of 160 items) searches the filter's own chunks; a broad one (half, a date)
    filters the unfiltered nearest."""
    plain = SearchEngine(tagged, fake_embedder)
    ram = SearchEngine(tagged, fake_embedder, bits_in_ram=True)
    assert ram.bit_matrix.wait(60)
    for query in ("zebra quokka", "kube proxy router", "lentil bread budget"):
        got = keys(ram, query, filters=filters)
        assert got == keys(plain, query, filters=filters), query
        assert got
        for key in got:
            n = int(key[3:6])
            assert ("rare" not in filters.tags or n % 40 == 3) and ("half" not in filters.tags or n % 2)
            assert filters.date_from is None or n >= 100


def test_the_matrix_orders_rows_by_collection_and_finds_them_by_chunk_id(tagged, fake_embedder):
    from rag_search.retrieval.bit_matrix import _matrix

    rows = tagged.conn.execute("SELECT chunk_id, collection_id, embedding_bits FROM chunk_vec").fetchall()
    bits = _matrix(rows[::-1])
    assert sorted(bits.ranges) == sorted({r[1] for r in rows})
    for coll, (lo, hi) in bits.ranges.items():
        assert {int(i) for i in bits.ids[lo:hi]} == {r[0] for r in rows if r[1] == coll}
    import numpy as np

    wanted = np.array([r[0] for r in rows[::7]] + [10**9, -5], dtype=np.int64)  # two ids that are not there
    assert sorted(int(i) for i in bits.ids[bits.rows_of(wanted)]) == sorted(r[0] for r in rows[::7])


def test_a_selective_filter_searches_its_own_chunks_in_ram(tagged, fake_embedder, monkeypatch):
    monkeypatch.setattr(vector, "COARSE_FACTOR", 0)
    monkeypatch.setattr(vector, "COARSE_MIN", 20)  # 20 candidates: 80 unfiltered ones hold ~2 of the 4 rare items
    plain = SearchEngine(tagged, fake_embedder)
    ram = SearchEngine(tagged, fake_embedder, bits_in_ram=True)
    assert ram.bit_matrix.wait(60)
    scoped = []
    nearest = ram.bit_matrix.nearest
    ram.bit_matrix.nearest = lambda *a, **kw: scoped.append(kw.get("chunk_ids") is not None) or nearest(*a, **kw)
    for query in ("zebra quokka", "kube proxy router"):
        got = keys(ram, query, filters=Filters(tags=("rare",)))
        assert sorted(got) == ["doc003.md", "doc043.md", "doc083.md", "doc123.md"]
        assert got == keys(plain, query, filters=Filters(tags=("rare",)))
    assert any(scoped)  # answered from the filter's own chunks


def unpacked_signs(bits, rows):
    """+1/-1 per dimension from the stored bits, unpacked the slow way (sqlite-vec's bit order: LSB first)."""
    import numpy as np

    words = np.ascontiguousarray(bits.columns[:, rows].T)
    return np.unpackbits(words.view(np.uint8), axis=1, bitorder="little").astype(np.float32) * 2.0 - 1.0


def test_unpacked_signs_are_the_stored_vectors_signs(tagged):
    """The asymmetric step reads sqlite-vec's bit order right: each row's signs equal its float vector's."""
    import numpy as np

    from rag_search.retrieval.bit_matrix import _matrix
    from rag_search.store.vectors import from_blob

    rows = tagged.conn.execute("SELECT chunk_id, collection_id, embedding_bits FROM chunk_vec").fetchall()
    floats = dict(tagged.conn.execute("SELECT chunk_id, embedding FROM chunk_vec").fetchall())
    bits = _matrix(rows)
    signs = unpacked_signs(bits, np.arange(len(bits.ids)))
    for r, cid in enumerate(bits.ids):
        assert np.array_equal(signs[r], np.where(from_blob(floats[int(cid)]) > 0, 1.0, -1.0))


def test_sign_scores_by_table_equal_the_dot_product_with_unpacked_signs(tagged):
    import numpy as np

    from rag_search.retrieval.bit_matrix import _matrix

    bits = _matrix(tagged.conn.execute("SELECT chunk_id, collection_id, embedding_bits FROM chunk_vec").fetchall())
    rows = np.arange(len(bits.ids))[::3]
    q = np.random.default_rng(1).standard_normal(bits.columns.shape[0] * 64).astype(np.float32)
    assert np.allclose(bits.sign_scores(rows, q), unpacked_signs(bits, rows) @ q, atol=1e-3)


def test_a_collection_named_twice_is_searched_once(tagged, fake_embedder):
    ram = SearchEngine(tagged, fake_embedder, bits_in_ram=True)
    assert ram.bit_matrix.wait(60)
    once = keys(ram, "zebra quokka", filters=Filters(collections=("mail",)))
    assert keys(ram, "zebra quokka", filters=Filters(collections=("mail", "mail"))) == once
    coll = tagged.conn.execute("SELECT id FROM collections WHERE name = 'mail'").fetchone()[0]
    near = ram.bit_matrix.nearest(b"\0" * 48, 30, (coll, coll))
    assert len({cid for cid, _ in near}) == len(near) == 30


def test_the_k_smallest_distances_by_histogram_match_a_full_sort():
    import numpy as np

    from rag_search.retrieval.bit_matrix import _smallest

    rng = np.random.default_rng(3)
    for n, k in ((1000, 10), (1000, 999), (50, 50), (50, 80), (5000, 300)):
        dist = rng.integers(0, 40, size=n).astype(np.uint16)
        got = _smallest(dist, k)
        want = np.lexsort((np.arange(n), dist))[:k]
        assert sorted(got.tolist()) == sorted(want.tolist())


def test_the_best_sign_scores_by_partition_are_a_stable_sort_s_first_k():
    """The shortlist's best k by sign score, found without sorting them all, are exactly a stable sort's first k:
    ties (many here, and -0.0 beside 0.0) keep the lower position first, so the candidates never change."""
    import numpy as np

    from rag_search.retrieval.bit_matrix import _best_first

    rng = np.random.default_rng(7)
    for trial in range(400):
        n, k = int(rng.integers(1, 6000)), int(rng.integers(1, 800))
        scores = rng.standard_normal(n).astype(np.float32)
        if trial % 3 == 1:
            scores = np.round(scores, 1)
        elif trial % 3 == 2:
            scores = rng.integers(-2, 3, n).astype(np.float32)
            scores[rng.integers(0, n, n // 3)] = -0.0
        assert np.array_equal(_best_first(scores, k), np.argsort(-scores, kind="stable")[:k]), (n, k)


def test_facet_only_filters_list_their_chunks_from_the_facet_index(tagged):
    from rag_search.retrieval.filters import build_where

    def both(f):
        w = build_where(f)
        joined = {r[0] for r in tagged.conn.execute(
            f"SELECT c.id FROM chunks c JOIN items i ON i.id = c.item_id WHERE {w.sql}", w.params)}
        return w, {r[0] for r in tagged.conn.execute(w.ids_query(), w.params)}, joined

    w, fast, joined = both(Filters(tags=("half", "rare")))
    assert w.ids_sql is not None and fast == joined and len(fast) == 4  # the rare items (3, 43, 83, 123) are odd
    w, fast, joined = both(Filters(tags=("half",)))
    assert w.ids_sql is not None and fast == joined and len(fast) == 80
    w, fast, joined = both(Filters(tags=("half",), date_from=1_600_000_100))
    assert w.ids_sql is None and fast == joined and len(fast) == 30  # a date is not a facet: through chunks


def test_with_the_bits_in_ram_only_small_scopes_are_searched_exactly(store, fake_embedder, monkeypatch):
    """Above RAM_EXACT_LIMIT chunks (below the general exact limit), a server answers from the bits and rescoring:
    the top hits of the exact float KNN a one-shot process runs there (up to ties)."""
    from rag_search.retrieval import engine as engine_mod

    monkeypatch.setattr(engine_mod, "RAM_EXACT_LIMIT", 30)
    rng = random.Random(9)
    for n in range(80):
        add_doc(store, fake_embedder, "notes", f"doc{n:03}.md", " ".join(rng.choice(WORDS) for _ in range(12)))
    plain = SearchEngine(store, fake_embedder)
    ram = SearchEngine(store, fake_embedder, bits_in_ram=True)
    assert ram.bit_matrix.wait(60)
    for query in ("zebra quokka", "kube proxy router", "ferry harbour travel"):
        exact = plain.search(SearchRequest(query, mode="semantic", top_k=5))
        binary = ram.search(SearchRequest(query, mode="semantic", top_k=5))
        assert (exact.vector_plan, binary.vector_plan) == ("exact", "binary+rescore")
        got, want = [h.key for h in binary.hits], [h.key for h in exact.hits]
        assert got[0] == want[0] and len(set(got) & set(want)) >= 4, query  # bag-of-words vectors tie often


@pytest.fixture
def named(store, fake_embedder, monkeypatch):
    """Items whose titles hold the query words: hybrid search scores their names (retrieval/titles.py) every query."""
    from rag_search.retrieval import engine as engine_mod

    monkeypatch.setattr(vector, "EXACT_SCOPE_LIMIT", 10)
    monkeypatch.setattr(engine_mod, "RAM_EXACT_LIMIT", 10)
    rng = random.Random(11)
    for n in range(120):
        text = " ".join(rng.choice(WORDS) for _ in range(4))  # each word in ~30 items: rare enough to search names
        title = " ".join(rng.choice(WORDS) for _ in range(2))
        add_doc(store, fake_embedder, ("notes", "mail")[n % 2], f"doc{n:03}.md", text, title=title)
    return store


@pytest.mark.parametrize("mode", ["hybrid", "semantic", "keyword"])
def test_a_server_engine_answers_every_search_from_ram_and_never_reloads(named, fake_embedder, mode):
    """After warm-up, every search of a long-running engine takes its candidates from the bits in RAM, starts no
    reload of them and writes nothing on the index's connection (a write there, even to a TEMP table, changes
    total_changes: the matrix then looked stale, every hybrid query went back to sqlite-vec and re-read the bits)."""
    ram = SearchEngine(named, fake_embedder, bits_in_ram=True)
    assert ram.bit_matrix.wait(60)
    used, loads = [], []
    nearest, load = ram.bit_matrix.nearest, ram.bit_matrix._load
    ram.bit_matrix.nearest = lambda *a, **kw: used.append(1) or nearest(*a, **kw)
    ram.bit_matrix._load = lambda stamp: loads.append(stamp) or load(stamp)
    queries = ["zebra quokka", "kube proxy router", "garden budget", "ferry harbour travel", "lentil bread"]
    changes = named.conn.total_changes
    for query in queries * 2:
        result = ram.search(SearchRequest(query, mode=mode, filters=Filters(collections=("mail",)) if "e" in query
                                          else Filters()))
        assert result.hits, query
        assert ram.bit_matrix.ready(), query
    assert len(used) == (0 if mode == "keyword" else 2 * len(queries))
    assert loads == [] and named.conn.total_changes == changes


def test_the_facts_held_with_the_bits_are_the_indexs(store, fake_embedder):
    """Each chunk's item, cached vector and time as read with the bits answer what SQL answers: items, float
    vectors, and which chunks pass date filters (undated ones included or not)."""
    from rag_search.retrieval.filters import build_where, passing
    from rag_search.store.vectors import fetch_vectors

    rng = random.Random(3)
    for n in range(90):
        ts = None if n % 7 == 0 else 1_600_000_000 + n * 1000
        add_doc(store, fake_embedder, ("notes", "mail")[n % 2], f"doc{n:03}.md",
                " ".join(rng.choice(WORDS) for _ in range(8)), ts=ts)
    ram = SearchEngine(store, fake_embedder, bits_in_ram=True)
    assert ram.bit_matrix.wait(60)
    ids = [r[0] for r in store.conn.execute("SELECT id FROM chunks")] + [10**9]  # and one that is not there
    assert ram.bit_matrix.items_of(ids) == dict(store.conn.execute("SELECT id, item_id FROM chunks"))
    rows = ram.bit_matrix.cache_rows(ids)
    assert len(rows) == len(ids) - 1
    by_row, by_join = fetch_vectors(store.conn, [], None, rows), fetch_vectors(store.conn, ids, fake_embedder.id)
    assert by_row.keys() == by_join.keys() and all((by_row[c] == by_join[c]).all() for c in by_row)
    for filters in (Filters(date_from=1_600_030_000), Filters(date_to=1_600_040_000, include_undated=False),
                    Filters(date_from=1_600_010_000, date_to=1_600_050_000), Filters(include_undated=False),
                    Filters(date_from=1_600_030_000, collections=("mail",))):
        test = ram.bit_matrix.date_test(filters)
        rest = build_where(filters.without_collections())
        assert test.passing(ids) == passing(store.conn, ids, rest), filters
        assert sorted(test.every().tolist()) == sorted(r[0] for r in store.conn.execute(rest.ids_query(), rest.params))
    assert ram.bit_matrix.date_test(Filters(tags=("x",), date_from=1)) is None


def test_distances_in_blocks_and_halves_equal_the_plain_count(monkeypatch):
    """The blocked, two-halves Hamming distances equal XOR + popcount of every word, for any number of words."""
    import numpy as np

    from rag_search.retrieval import bit_matrix as bm

    monkeypatch.setattr(bm, "BLOCK", 1000)
    monkeypatch.setattr(bm, "PARALLEL_ROWS", 5000)
    rng = np.random.default_rng(7)
    for words, n in ((6, 12_345), (16, 7_001), (1, 300), (2, 5_000)):
        cols = rng.integers(0, 2**63, size=(words, n), dtype=np.uint64) | rng.integers(0, 2, size=(words, n),
                                                                                       dtype=np.uint64) << 63
        bits = bm._Bits(np.arange(n), np.ascontiguousarray(cols), {}, np.arange(n), np.arange(n))
        q = rng.integers(0, 2**63, size=words, dtype=np.uint64)
        want = sum(np.bitwise_count(cols[j] ^ q[j]).astype(np.uint16) for j in range(words))
        for rows in (slice(0, n), slice(n // 3, n), np.arange(0, n, 7)):
            assert np.array_equal(bits.distances(q, rows), want[rows]), (words, n, rows)


@pytest.fixture
def crowded(store, fake_embedder, monkeypatch):
    """40 items of 8 near-identical chunks each: the nearest chunks crowd into few items, so the vector side widens."""
    from rag_search.records import Chunk, Fingerprint, ItemRef
    from rag_search.store.item_writer import ParsedItem, write_items

    monkeypatch.setattr(vector, "EXACT_SCOPE_LIMIT", 10)
    writes.ensure_collection(store, "notes")
    rng = random.Random(11)
    items = []
    for n in range(40):
        base = [rng.choice(WORDS) for _ in range(10)]
        chunks = [Chunk(index=i, text=" ".join(base + [WORDS[i]]), title=f"item{n}") for i in range(8)]
        ref = ItemRef("notes", f"item{n:02}.md", f"/data/notes/item{n:02}.md", "markdown")
        items.append(ParsedItem(ref, Fingerprint(1, 1, "x"), f"item{n}", chunks))
    write_items(store, fake_embedder, items)
    return store


@pytest.mark.parametrize("held", [False, True])
def test_a_widened_vector_search_computes_distances_once_and_reads_each_vector_once(crowded, fake_embedder,
                                                                                     monkeypatch, held):
    """Widening (the nearest chunks hold too few items) reuses the first round's Hamming distances, sign scores and
    chunks' items, and reads only the float vectors it lacks (none when the server holds them:
    retrieval/held_vectors.py); what it finds is what a search without that reuse finds, and what a server reading
    the vectors finds."""
    from rag_search.config import SearchSettings
    from rag_search.retrieval import bit_matrix
    from rag_search.store import vectors

    settings = SearchSettings(candidates=12, vectors_in_ram_mb=256 if held else 0)  # 0: read from the index
    reading = SearchEngine(crowded, fake_embedder, SearchSettings(candidates=12, vectors_in_ram_mb=0),
                           bits_in_ram=True)
    assert reading.bit_matrix.wait(60)
    ram = SearchEngine(crowded, fake_embedder, settings, bits_in_ram=True)
    fresh = SearchEngine(crowded, fake_embedder, settings, bits_in_ram=True)  # the same, each round from scratch
    assert ram.bit_matrix.wait(60) and fresh.bit_matrix.wait(60)
    nearest = fresh.bit_matrix.nearest
    fresh.bit_matrix.nearest = lambda *a, memo=None, **kw: nearest(*a, **kw)
    rounds, scans, scored, read, looked_up = [], [], [], [], []
    own = ram.bit_matrix.nearest
    ram.bit_matrix.nearest = lambda *a, **kw: rounds.append(a[1]) or own(*a, **kw)
    items_of = ram.bit_matrix.items_of
    ram.bit_matrix.items_of = lambda ids: looked_up.extend(ids) or items_of(ids)
    for name, log in (("distances", scans), ("sign_scores", scored)):
        method = getattr(bit_matrix._Bits, name)
        monkeypatch.setattr(bit_matrix._Bits, name, lambda self, q, rows, _m=method, _log=log: (
            _log.append(len(range(rows.start, rows.stop)) if isinstance(rows, slice) else len(rows)),
            _m(self, q, rows))[1])
    by_row = vectors._by_cache_row
    monkeypatch.setattr(vectors, "_by_cache_row", lambda conn, rows: read.extend(rows.values()) or by_row(conn, rows))
    histograms, histogram = [], bit_matrix._histogram
    monkeypatch.setattr(bit_matrix, "_histogram", lambda dist: histograms.append(len(dist)) or histogram(dist))
    for query in ("zebra quokka wombat", "kube proxy router", "lentil bread"):
        rounds.clear(), scans.clear(), scored.clear(), read.clear(), looked_up.clear(), histograms.clear()
        got = [h.key for h in ram.search(SearchRequest(query, mode="semantic", top_k=12)).hits]
        assert len(rounds) >= 2 and rounds[1] > rounds[0], (query, rounds)  # it widened
        assert scans == [320] and histograms == [320]  # the distances of every chunk, and their histogram, once
        assert len(read) == len(set(read)) and (not read) == held  # no float vector read twice; none if held
        assert sum(scored) <= 320  # no row's sign scored twice
        assert looked_up and len(looked_up) == len(set(looked_up))  # each chunk's item looked up once per search
        assert got == [h.key for h in fresh.search(SearchRequest(query, mode="semantic", top_k=12)).hits], query
        assert got == [h.key for h in reading.search(SearchRequest(query, mode="semantic", top_k=12)).hits], query
