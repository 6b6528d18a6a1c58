"""Every filter runs inside both retrievers: a match far outside the unfiltered top-k is still found."""

from __future__ import annotations

import pytest
from conftest import add_doc
from fakes import HashEmbedder

from rag_search.retrieval import Filters, SearchEngine, SearchRequest, parse_date
from rag_search.retrieval import vector as vector_mod
from rag_search.store import Store

QUERY = "apple banana cherry orchard harvest"
JAN_2020, JUN_2023 = parse_date("2020-01-15"), parse_date("2023-06-01")

# One needle per filter: it shares a single word with the query, while 60 decoys share all of them.
NEEDLES = {
    "tag": dict(tags=("projects/rare",)),
    "author": dict(author="Zelda Zimmer <zelda@example.org>"),
    # a chat window: no author of its own; who wrote in it are its `authors` (a list in metadata: one facet each)
    "chat-author": dict(participants=("Xavier Xu <slack:U0XAVIER>", "Yorick Yates <slack:U0YORICK>"),
                        metadata={"authors": ["Xavier Xu <slack:U0XAVIER>", "Yorick Yates <slack:U0YORICK>"]}),
    "participant": dict(participants=("Quentin Quux",)),
    "date": dict(ts=JAN_2020),
    "meta": dict(metadata={"area": "archive"}),
    "type": dict(source_type="pdf"),
}
FILTERS = {
    "tag": Filters(tags=("#projects",)),
    "author": Filters(author="zelda"),
    "chat-author": Filters(author="yorick"),
    "participant": Filters(participants=("quentin",)),
    "date": Filters(date_to=parse_date("2020-12-31", end=True), include_undated=False),
    "meta": Filters(metadata={"area": ["archive", "nothing"]}),
    "type": Filters(source_types=("pdf",)),
    "path": Filters(path_prefix="/data/other/needles/"),
    "collection": Filters(collections=("other",)),
}


@pytest.fixture(scope="module", params=[60, 400], ids=["few-decoys", "decoys-beyond-overfetch"])
def corpus(request, tmp_path_factory):
    """60 decoys fit in the over-fetched unfiltered candidates; 400 do not, so the filter must go inside."""
    store = Store.open(tmp_path_factory.mktemp("filters") / "rag.db")
    fill(store, request.param, NEEDLES)
    yield store
    store.close()


def fill(store, decoys: int, needles: dict) -> None:
    """Decoys sharing every query word, one needle per filter sharing one, and a needle in another collection."""
    emb = HashEmbedder()
    for n in range(decoys):
        add_doc(store, emb, "fruit", f"decoy{n:03}.md", f"{QUERY} decoy number {n}", ts=JUN_2023, tags=("common",))
    for name, fields in needles.items():
        add_doc(store, emb, "fruit", f"needles/{name}.md", f"cherry pie notes for {name}", **fields)
    add_doc(store, emb, "other", "needles/path.md", "a cherry tree in the yard")


@pytest.fixture(params=["exact", "binary+rescore"])
def engine(request, corpus, fake_embedder, monkeypatch):
    if request.param == "binary+rescore":
        monkeypatch.setattr(vector_mod, "EXACT_SCOPE_LIMIT", 0)
    return SearchEngine(corpus, fake_embedder)


@pytest.mark.parametrize("mode", ["hybrid", "keyword", "semantic"])
@pytest.mark.parametrize("name", sorted(FILTERS))
def test_filter_finds_matches_outside_the_unfiltered_top_k(engine, name, mode):
    unfiltered = engine.search(SearchRequest(QUERY, top_k=5, mode=mode))
    assert all("decoy" in h.key for h in unfiltered.hits)
    hits = engine.search(SearchRequest(QUERY, top_k=5, mode=mode, filters=FILTERS[name])).hits
    expected = "needles/path.md" if name in ("path", "collection") else f"needles/{name}.md"
    assert [h.key for h in hits] == [expected]


@pytest.mark.parametrize("name", sorted(FILTERS) + ["tags+meta", "participant+tag", "nested-tag"])
def test_the_row_form_of_a_filter_selects_the_same_chunks_as_the_set_form(corpus, name):
    """`for_rows` (facets looked up per chunk, for statements checking a few chunks) and `sql` (facets listed once,
    for statements scanning many) must agree on every chunk."""
    from rag_search.retrieval.filters import build_where

    extra = {"tags+meta": Filters(tags=("common",), metadata={"area": "archive"}),
             "participant+tag": Filters(participants=("quentin",), tags=("projects",)),
             "nested-tag": Filters(tags=("#projects/rare",))}
    where = build_where(FILTERS.get(name) or extra[name], _collection_ids(corpus, name))
    listed = "SELECT c.id FROM chunks c JOIN items i ON i.id = c.item_id WHERE {}"
    as_set = {r[0] for r in corpus.conn.execute(listed.format(where.sql), where.params)}
    as_rows = {r[0] for r in corpus.conn.execute(listed.format(where.for_rows), where.params)}
    assert as_rows == as_set
    assert (len(as_set) == 0) == (name in ("tags+meta", "participant+tag"))  # no needle holds both
    if name in ("tag", "meta", "participant", "nested-tag", "chat-author"):
        assert where.row_sql is not None and "EXISTS" in where.row_sql and len(as_set) == 1
        # each chunk's own facets are looked up (not every tag row of the index for every chunk: 1.8 s for 400 chunks at 100k)
        plan = " ".join(r[3] for r in corpus.conn.execute(
            "EXPLAIN QUERY PLAN " + listed.format(f"c.id IN (1, 2, 3) AND {where.for_rows}"), where.params))
        assert "chunk_facets_by_chunk" in plan and "chunk_facets_by_value" not in plan, plan


def _collection_ids(store, name):
    if name != "collection":
        return ()
    return tuple(r[0] for r in store.conn.execute("SELECT id FROM collections WHERE name = 'other'"))


def test_vector_plan_follows_scope_size(engine):
    result = engine.search(SearchRequest(QUERY, mode="semantic"))
    expected = "exact" if vector_mod.EXACT_SCOPE_LIMIT else "binary+rescore"
    assert result.vector_plan == expected


def test_date_filters_keep_undated_items_unless_asked(store, add, fake_embedder):
    add("n", "dated-old.md", "meeting notes", ts=JAN_2020)
    add("n", "dated-new.md", "meeting notes", ts=JUN_2023)
    add("n", "undated.md", "meeting notes")
    engine = SearchEngine(store, fake_embedder)
    after_2021 = Filters(date_from=parse_date("2021"))
    keys = {h.key for h in engine.search(SearchRequest("meeting", filters=after_2021)).hits}
    assert keys == {"dated-new.md", "undated.md"}
    strict = Filters(date_from=parse_date("2021"), include_undated=False)
    keys = {h.key for h in engine.search(SearchRequest("meeting", filters=strict)).hits}
    assert keys == {"dated-new.md"}


def test_nested_tags_and_tag_prefix_boundaries(store, add, fake_embedder):
    add("n", "nested.md", "garden", tags=("home/garden",))
    add("n", "plain.md", "garden", tags=("home",))
    add("n", "lookalike.md", "garden", tags=("homework",))
    engine = SearchEngine(store, fake_embedder)
    keys = {h.key for h in engine.search(SearchRequest("garden", filters=Filters(tags=("home",)))).hits}
    assert keys == {"nested.md", "plain.md"}
    keys = {h.key for h in engine.search(SearchRequest("garden", filters=Filters(tags=("home/garden",)))).hits}
    assert keys == {"nested.md"}


def test_several_filters_combine_with_and(store, add, fake_embedder):
    add("n", "both.md", "budget review", tags=("work",), author="Ann")
    add("n", "tag-only.md", "budget review", tags=("work",), author="Bob")
    engine = SearchEngine(store, fake_embedder)
    hits = engine.search(SearchRequest("budget", filters=Filters(tags=("work",), author="ann"))).hits
    assert [h.key for h in hits] == ["both.md"]


def test_unknown_collection_lists_the_known_ones(corpus, fake_embedder):
    from rag_search.errors import QueryError

    with pytest.raises(QueryError, match="Known collections: fruit, other"):
        SearchEngine(corpus, fake_embedder).search(SearchRequest("x", filters=Filters(collections=("nope",))))


def test_parse_date_forms():
    assert parse_date("2024") == parse_date("2024-01-01")
    assert parse_date("2024-02", end=True) == parse_date("2024-02-29T23:59:59Z")
    assert parse_date("2024-03-05T10:00:00+02:00") == parse_date("2024-03-05T08:00:00Z")
    from rag_search.errors import QueryError

    with pytest.raises(QueryError, match="YYYY-MM-DD"):
        parse_date("last tuesday")
