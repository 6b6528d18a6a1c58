"""The store on a real SQLite file with sqlite-vec: round trips, cascades, atomicity, cache, identity."""

from __future__ import annotations

import numpy as np
import pytest
from fakes import HashEmbedder

from rag_search.embedders.cached import embed_texts
from rag_search.errors import EmbedderMismatch, NotFound
from rag_search.records import Chunk, Fingerprint, ItemRef
from rag_search.store import Store, migrations, reads, writes


def counts(store):
    q = lambda sql: store.conn.execute(sql).fetchone()[0]  # noqa: E731
    return {
        "items": q("SELECT count(*) FROM items"),
        "chunks": q("SELECT count(*) FROM chunks"),
        "fts": q("SELECT count(*) FROM chunks_fts_docsize"),
        "vec": q("SELECT count(*) FROM chunk_vec"),
        "facets": q("SELECT count(*) FROM chunk_facets"),
    }


def test_migrations_are_recorded_in_order_and_idempotent(tmp_path):
    s = Store.open(tmp_path / "rag.db")
    assert migrations.applied(s.conn) == [name for name, _ in migrations.MIGRATIONS]
    assert migrations.migrate(s.conn) == []
    s.close()
    s2 = Store.open(tmp_path / "rag.db")
    assert s2.conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(
        migrations.SCHEMA_VERSION
    )
    assert s2.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_item_round_trip_keeps_every_field(store, add):
    add("notes", "a.md", "alpha beta", ts=1700000000, author="Ann", participants=("Bob",), tags=("x/y",),
        metadata={"area": "work", "n": 3}, heading_path=("H1", "H2"), page=4)
    row = store.conn.execute(
        "SELECT title, text, ts, author, participants, tags, metadata, heading_path, page FROM chunks"
    ).fetchone()
    assert row == ("a.md", "alpha beta", 1700000000, "Ann", '["Bob"]', '["x/y"]', '{"area":"work","n":3}',
                   '["H1","H2"]', 4)
    facets = set(store.conn.execute("SELECT name, value FROM chunk_facets").fetchall())
    assert facets == {("tag", "x/y"), ("participant", "Bob"), ("meta.area", "work"), ("meta.n", "3")}
    item = store.conn.execute("SELECT status, size, sha256, indexed_at IS NOT NULL FROM items").fetchone()
    assert item == ("indexed", len("alpha beta"), "x", 1)


def test_replacing_an_item_replaces_its_rows(store, add):
    add("notes", "a.md", "first version")
    add("notes", "a.md", "second version")
    assert counts(store) == {"items": 1, "chunks": 1, "fts": 1, "vec": 1, "facets": 0}
    assert store.conn.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH 'first'").fetchall() == []


def test_deleting_items_and_collections_removes_chunks_fts_and_vectors(store, add):
    add("notes", "a.md", "one", tags=("t",))
    add("notes", "b.md", "two", tags=("t",))
    add("other", "c.md", "three", tags=("t",))
    assert writes.delete_items(store, "notes", ["a.md", "missing.md"]) == 1
    assert counts(store) == {"items": 2, "chunks": 2, "fts": 2, "vec": 2, "facets": 2}
    assert writes.delete_collection(store, "notes") == 1
    assert counts(store) == {"items": 1, "chunks": 1, "fts": 1, "vec": 1, "facets": 1}
    assert store.conn.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH 'two'").fetchall() == []
    with pytest.raises(NotFound, match="Known collections: other"):
        writes.delete_collection(store, "notes")


def test_failures_are_recorded_and_cleared_by_a_good_write(store, add):
    writes.ensure_collection(store, "notes")
    ref = ItemRef("notes", "bad.pdf", "/data/notes/bad.pdf", "pdf")
    writes.mark_failed(store, ref, "parse", "PDF header missing")
    [failure] = reads.failures(store)
    assert (failure.key, failure.error_kind, failure.message) == ("bad.pdf", "parse", "PDF header missing")
    assert reads.status(store)["totals"]["failed"] == 1
    add("notes", "bad.pdf", "fixed content", source_type="pdf")
    assert reads.failures(store) == []


def test_embedding_cache_embeds_each_text_once(store):
    emb = HashEmbedder()
    vecs1, n1 = embed_texts(store, emb, ["a b", "c d", "a b"])
    vecs2, n2 = embed_texts(store, emb, ["c d", "a b", "e f"])
    assert (n1, n2) == (2, 1)
    assert emb.calls == [2, 1]
    np.testing.assert_allclose(vecs1[0], vecs2[1])
    assert np.allclose(vecs1[0], vecs1[2])


def test_opening_with_another_embedder_is_refused_with_the_fix(store, add):
    add("notes", "a.md", "text")
    other = HashEmbedder(dimensions=32, name="other")
    with pytest.raises(EmbedderMismatch, match="local-rag reembed"):
        store.bind_embedder(other.id, other.dimensions)


def test_collection_summary_counts(store, add):
    add("notes", "a.md", "one")
    add("notes", "b.pdf", "two", source_type="pdf")
    info = reads.collection_info(store, "notes")
    assert (info["items"], info["chunks"], info["items_by_source_type"]) == (2, 2, {"markdown": 1, "pdf": 1})


def test_one_item_cannot_flood_the_facets(store, fake_embedder):
    """100k metadata keys or huge values on one item write a bounded number of filter rows."""
    from conftest import add_doc

    meta = {f"k{i}": f"v{i}" for i in range(100_000)}
    meta["long"] = "x" * 10_000
    add_doc(store, fake_embedder, "c", "bomb.md", "text", metadata=meta, tags=tuple(f"t{i}" for i in range(10_000)))
    rows = store.conn.execute("SELECT count(*) FROM chunk_facets").fetchone()[0]
    assert rows <= 64 + 200 + 50
    assert store.conn.execute("SELECT count(*) FROM chunk_facets WHERE length(value) > 200").fetchone()[0] == 0


def test_the_cache_moves_to_a_rowid_table_and_keeps_every_vector(tmp_path, monkeypatch):
    """0008: an index written with the WITHOUT ROWID cache (4.7 KB a vector) keeps its vectors in ~1.7 KB each."""
    import numpy as np

    from rag_search.store import migrations
    from rag_search.store.cache import cache_vectors, cached_vectors

    older = [m for m in migrations.MIGRATIONS if m[0] != "0008_cache_rowid"]
    monkeypatch.setattr(migrations, "MIGRATIONS", older)
    path = tmp_path / "old.db"
    store = Store.open(path)
    rng = np.random.default_rng(0)
    vecs = {f"h{i}": rng.standard_normal(384).astype(np.float32) for i in range(600)}
    cache_vectors(store, "m", vecs.items())
    assert "WITHOUT ROWID" in store.conn.execute("SELECT sql FROM sqlite_master WHERE name = 'embedding_cache'").fetchone()[0]
    old_pages = store.conn.execute("SELECT count(*) FROM dbstat WHERE name = 'embedding_cache'").fetchone()[0]
    store.close()
    monkeypatch.undo()
    store = Store.open(path)
    assert "0008_cache_rowid" in migrations.applied(store.conn)
    got = cached_vectors(store, "m", list(vecs))
    assert len(got) == 600 and all(np.array_equal(got[h], v) for h, v in vecs.items())
    cache_vectors(store, "m", [("h1", np.zeros(384, dtype=np.float32))])  # a cached text is never replaced
    assert np.array_equal(cached_vectors(store, "m", ["h1"])["h1"], vecs["h1"])
    pages = store.conn.execute("SELECT count(*) FROM dbstat WHERE name = 'embedding_cache'").fetchone()[0]
    assert pages * 2 < old_pages, (pages, old_pages)
    store.close()


def test_rescoring_reads_vectors_cached_under_an_equivalent_embedder(store):
    """An index built by the shipped model keeps its cache rows under that id; the derived model's searches read them."""
    import numpy as np

    from rag_search.records import text_hash
    from rag_search.store.cache import cache_vectors
    from rag_search.store.vectors import fetch_vectors

    store.bind_embedder("builtin/all-MiniLM-L6-v2-int8", 384)
    writes.ensure_collection(store, "c")
    v = np.random.default_rng(2).standard_normal((1, 384)).astype(np.float32)
    v /= np.linalg.norm(v)
    chunk = Chunk(0, "a cached text")
    writes.replace_item(store, ItemRef("c", "a.md", "/a.md", "markdown"), Fingerprint(1, 1, "x"), "A", [chunk], v)
    cache_vectors(store, "builtin/all-MiniLM-L6-v2-int8", [(text_hash(chunk.vector_text), v[0])])
    cid = store.conn.execute("SELECT id FROM chunks").fetchone()[0]
    store.conn.execute("DELETE FROM chunk_vec")  # only the cache can answer now
    assert np.array_equal(fetch_vectors(store.conn, [cid], "builtin/all-MiniLM-L6-v2-int8pc")[cid], v[0])


def test_a_migration_another_process_applied_meanwhile_is_skipped(tmp_path, monkeypatch):
    """Two processes opening a new home at once both see the migrations pending; the one that waited for the other's
    write lock found its tables made ("table chunks_fts already exists") and failed its run. The other process is
    a second connection that migrates the file in the window between reading what is applied and applying it."""
    from rag_search.store import migrations
    from rag_search.store.connection import connect

    path = tmp_path / "rag.db"
    first = connect(path)
    announce, raced = migrations._announce, []

    def other_process_first(conn, name):
        if not raced:
            raced.append(name)
            Store.open(path).close()  # the other process migrates the whole file now
        announce(conn, name)

    monkeypatch.setattr(migrations, "_announce", other_process_first)
    assert migrations.migrate(first) == []  # nothing left to do, and no error
    assert raced and migrations.pending(first) == []
    assert first.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == \
        str(len(migrations.MIGRATIONS))
    first.close()
