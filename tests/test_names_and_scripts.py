"""Names as evidence (titles, aliases, file names: retrieval/titles.py) and unspaced scripts (rag_search.cjk), on real
SQLite indexes with the bundled model."""

from __future__ import annotations

from conftest import add_doc

from rag_search.config import SearchSettings
from rag_search.store.names import item_names
from rag_search.retrieval import SearchEngine, SearchRequest
from rag_search.store import Store, migrations

CORE_PLUGINS = ("Core plugins ship with the app. Backlinks, Canvas, Daily notes, File explorer, Graph view, Outline, "
                "Page preview, Properties view, Search, Tags view (lists the tags used in your notes), Templates and "
                "Word count. Use plugins to organize notes the way you work.")
GLOSSARY = ("Glossary. Note: a Markdown file. Vault: a folder of notes. Tag: a keyword you use to organize notes. "
            "Property: a field in the frontmatter. Link: a reference to another note. Embed: a note shown inside "
            "another.")


def notes(store, embedder):
    """A page named for the question, and pages that merely mention its words (the shape of Obsidian's help vault,
    where "how to use tags to organize notes" put Tags 2nd behind Core plugins), in a vault where most pages are
    about using and organizing notes (so those words say little)."""
    for n, topic in enumerate(["Folders", "Links", "Search", "Graph view", "Daily notes", "Canvas", "Sync",
                               "Publish", "Backlinks", "Bookmarks"]):
        add_doc(store, embedder, "help", f"{topic}.md", f"How to use {topic.lower()} to organize your notes. "
                f"Notes and more notes: use {topic.lower()} page {n}.", title=topic)
    add_doc(store, embedder, "help", "Tags.md", "Tags are keywords that help you find the notes you want. Write #tag "
            "in the text or list it in the properties. Nested tags have slashes.", title="Tags")
    add_doc(store, embedder, "help", "Core plugins.md", CORE_PLUGINS, title="Core plugins")
    add_doc(store, embedder, "help", "Glossary.md", GLOSSARY, title="Glossary")
    add_doc(store, embedder, "help", "Callouts.md", "Use callouts to add content without breaking the flow of your "
            "notes. To make a callout, put [!info] on the first line of a blockquote. A callout can fold.",
            title="Callouts", metadata={"aliases": ["Admonitions"]})
    add_doc(store, embedder, "help", "Style guide.md", "Style guide. Write short sentences in plain words. Use callout "
            "boxes for tips and do not stack admonitions. Headings in sentence case.", title="Style guide")


MENTIONS = "Tags help you organize notes: tags on notes, tags in notes, and plugins use tags to organize notes. "


def test_the_names_list_puts_the_page_named_for_the_question_first(store, builtin_embedder):
    """Whole-text BM25 ranks pages that repeat the words above the page named for them; the names list does not."""
    notes(store, builtin_embedder)
    for n in range(2):
        add_doc(store, builtin_embedder, "help", f"Mentions {n}.md", MENTIONS * 3, title=f"Mentions {n}")
    off = SearchEngine(store, builtin_embedder, SearchSettings(title_weight=0, reranker="off"))
    on = SearchEngine(store, builtin_embedder, SearchSettings(reranker="off", keyword_weight=0.5, title_weight=0.5))
    query = "how to use tags to organize notes"  # the names list at BM25's weight (the defaults: test below)
    assert off.search(SearchRequest(query, mode="keyword")).hits[0].key != "Tags.md"  # BM25 alone: the mentions win
    hit = on.search(SearchRequest(query, mode="keyword")).hits[0]
    assert hit.key == "Tags.md" and hit.item_ranks["title"] == 1  # what --explain shows
    assert on.search(SearchRequest("admonitions", mode="keyword")).hits[0].key == "Callouts.md"  # an alias names it


def test_defaults_put_the_named_page_first(store, builtin_embedder):
    notes(store, builtin_embedder)
    engine = SearchEngine(store, builtin_embedder)
    for query, key in (("how to use tags to organize notes", "Tags.md"), ("Callouts", "Callouts.md"),
                       ("admonitions", "Callouts.md")):
        assert engine.search(SearchRequest(query)).hits[0].key == key, query


def test_a_name_of_one_common_word_is_no_evidence(store, builtin_embedder):
    """A page called 'Notes' is not what 'rename a batch of notes with a pattern' asks for."""
    notes(store, builtin_embedder)
    add_doc(store, builtin_embedder, "help", "Notes.md", "What a note is.", title="Notes")
    engine = SearchEngine(store, builtin_embedder, SearchSettings(reranker="off"))
    result = engine.search(SearchRequest("rename a whole batch of tags and notes at once using a pattern"))
    assert all("title" not in h.item_ranks for h in result.hits if h.key == "Notes.md")


def test_names_of_an_item():
    assert item_names("Kube Upgrade", "Projects/Work/kube-upgrade.md", "markdown", {"aliases": ["k8s upgrade", 3]}) == [
        ("Kube Upgrade", "title"), ("k8s upgrade", "alias"), ("kube-upgrade", "file")]
    assert item_names("Re: offsite", "<CAF1@mail.example.com>", "email", {}) == [("Re: offsite", "title")]
    assert ("Charles Dickens", "author") in item_names("A Christmas Carol", "book/12", "book", {}, ("Charles Dickens",))


def test_the_migration_names_items_indexed_before(store, fake_embedder):
    add_doc(store, fake_embedder, "n", "Runbook.md", "Roll back kube-proxy.", title="Runbook",
            metadata={"aliases": ["Ops runbook"]})
    store.conn.execute("DELETE FROM item_names")
    migrations.backfill_item_names(store.conn)
    names = {r[0] for r in store.conn.execute("SELECT name FROM item_names")}
    assert names == {"Runbook", "Ops runbook"}


def test_chinese_words_inside_unspaced_text_are_found(store, builtin_embedder):
    """unicode61 made one token of a whole run: 全屏模态框 found nothing in 全屏的模态框."""
    add_doc(store, builtin_embedder, "docs", "teleport.md", "Teleport 可以把全屏的模态框渲染到 body 下面。", title="Teleport")
    add_doc(store, builtin_embedder, "docs", "computed.md", "计算属性会基于其响应式依赖被缓存。", title="计算属性")
    engine = SearchEngine(store, builtin_embedder)
    assert engine.search(SearchRequest("全屏模态框", mode="keyword")).hits[0].key == "teleport.md"
    assert engine.search(SearchRequest("属性缓存", mode="keyword")).hits[0].key == "computed.md"
    hit = engine.search(SearchRequest('"模态框"', mode="keyword")).hits[0]  # a quoted phrase: in sequence
    assert hit.key == "teleport.md" and "模态框" in hit.text  # shown as written, never the bigrams


def test_the_migration_gives_old_chunks_their_bigrams(tmp_path, fake_embedder):
    store = Store.open(tmp_path / "rag.db")
    add_doc(store, fake_embedder, "docs", "a.md", "可以把全屏的模态框渲染到下面")
    store.conn.execute("UPDATE chunks SET keywords = ''")  # as written before 0010
    store.conn.execute("INSERT INTO items_fts(items_fts) VALUES ('delete-all')")
    migrations.backfill_cjk_keywords(store.conn)
    assert "模态" in store.conn.execute("SELECT keywords FROM chunks").fetchone()[0]
    found = store.conn.execute("SELECT rowid FROM items_fts WHERE items_fts MATCH '\"模态\"'").fetchall()
    assert found
    store.close()


def test_also_matches_names_each_section_once_and_pages_by_number():
    """`also matches: Syncthing, Syncthing` and `passage 4` for a PDF page."""
    from rag_search.records import Hit

    hit = Hit(1, 1, "c", "pdf", "k", "u", "t", "x", "x", 0, ("Sync",), 3, None, None, (), {}, 1.0,
              sections=({"chunk_index": 2, "heading": "Syncthing", "page": None},
                        {"chunk_index": 5, "heading": "Syncthing", "page": None},
                        {"chunk_index": 6, "heading": "Sync", "page": None},
                        {"chunk_index": 3, "heading": None, "page": 4},
                        {"chunk_index": 8, "heading": None, "page": None}))
    assert hit.also_matches() == ["Syncthing", "page 4", "passage 9"]


def test_a_stem_shared_with_one_note_does_not_pin_it(store, builtin_embedder):
    """'equations' stems to 'equat', as 'equate' in one note does: that note was put first as a one-item term."""
    from rag_search.retrieval.keyword import exact_items, parse_terms
    from rag_search.retrieval.filters import SqlFilter

    add_doc(store, builtin_embedder, "n", "ledger.md", "We equate the two balances at month end.")
    add_doc(store, builtin_embedder, "n", "ids.md", "Ticket INV-2024-0042 is open.")
    where = SqlFilter("1", ())
    assert exact_items(store.conn, parse_terms("equations"), where, 1) == {}
    assert list(exact_items(store.conn, parse_terms("INV-2024-0042"), where, 1).values()) == [["inv 2024 0042"]]


def test_reranker_off_unquoted_in_yaml_means_off(tmp_path):
    from rag_search.config import load_settings

    config = tmp_path / "config.yaml"
    config.write_text("search:\n  reranker: off\n")  # YAML reads it as false
    assert load_settings(config).search.reranker == "off"


def test_a_query_starting_with_a_dash_says_to_use_double_dash(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from rag_search.cli.main import cli

    monkeypatch.setenv("LOCAL_RAG_HOME", str(tmp_path))
    result = CliRunner().invoke(cli, ["search", "--verbose flag meaning"])
    assert result.exit_code == 2 and "put -- before the query" in result.output


def test_an_english_model_leaves_a_chinese_query_to_the_keywords(store, builtin_embedder):
    """MiniLM reads English: its vector of a Chinese query is noise that pulled hybrid below keyword alone."""
    add_doc(store, builtin_embedder, "docs", "teleport.md", "Teleport 可以把全屏的模态框渲染到 body 下面。", title="Teleport")
    add_doc(store, builtin_embedder, "docs", "english.md", "A modal dialog rendered into the body.", title="Modal")
    result = SearchEngine(store, builtin_embedder).search(SearchRequest("全屏模态框"))
    assert result.vector_plan.startswith("skipped") and result.hits[0].key == "teleport.md"
    assert "vector" not in result.hits[0].item_ranks
    english = SearchEngine(store, builtin_embedder).search(SearchRequest("modal dialog"))
    assert not (english.vector_plan or "").startswith("skipped")


def test_names_are_stemmed_once_per_thread_and_match_as_before(store, builtin_embedder):
    """titles._stems keeps each text's stems (names come back query after query): a second search of the same words
    stems nothing again, and its names list is the first one's."""
    from rag_search.retrieval import titles

    notes(store, builtin_embedder)
    engine = SearchEngine(store, builtin_embedder)
    query = "how to use tags to organize notes"
    titles._known_stems().clear()
    first = engine.search(SearchRequest(query, mode="keyword"))
    assert any(h.item_ranks.get("title") for h in first.hits)  # the names list found some
    inserted: list[str] = []
    titles._stemmer().set_trace_callback(lambda s: inserted.append(s) if s.startswith("INSERT") else None)
    try:
        again = engine.search(SearchRequest(query, mode="keyword"))
    finally:
        titles._stemmer().set_trace_callback(None)
    assert not inserted
    assert [(h.key, h.item_ranks.get("title")) for h in again.hits] == [(h.key, h.item_ranks.get("title")) for h in first.hits]
