"""A question in another language than the notes, with a multilingual embedder: the words the index does not hold
do not let the keyword side (or a foreign word one note happens to hold) push the vector side's answer down."""

from __future__ import annotations

import numpy as np
from conftest import add_doc

from rag_search.embedders.base import l2_normalise
from rag_search.retrieval import SearchEngine, SearchRequest
from rag_search.retrieval.keyword import parse_terms
from rag_search.retrieval.unmatched import found_share, scaled

NOTES = {
    "export.md": "Export a note to PDF: install pandoc, then run the export command on the open note.",
    "licence.md": "Foam is released under the MIT licence; contributions are welcome.",
    "graph.md": "The graph view shows how notes link to each other.",
    "tags.md": "Tags group notes; nested tags use a slash.",
}
QUERY = "Wie exportiere ich meine Notiz mit Druckfunktion"  # German: only "mit" is a word of the notes


class Meanings:
    """A stand-in multilingual model: each note has its own direction, the German question is near the export note."""

    id, dimensions, max_input_tokens = "test/meanings", 8, 512

    def __init__(self, languages: str = "multi"):
        self.languages = languages
        self.axes = {text: np.eye(8, dtype=np.float32)[n] for n, text in enumerate(NOTES.values())}

    def count_tokens(self, text):
        return len(text.split())

    def embed_documents(self, texts, progress=None):
        return np.vstack([self.axes[t] for t in texts])

    def embed_query(self, text):
        return l2_normalise((self.axes[NOTES["export.md"]] + 0.3 * np.eye(8, dtype=np.float32)[7])[None, :])[0]


def _engine(store, languages):
    model = Meanings(languages)
    for key, text in NOTES.items():
        add_doc(store, model, "notes", key, text)
    return SearchEngine(store, model)


def test_a_foreign_question_is_answered_by_the_vector_side_not_by_a_word_one_note_holds(store):
    engine = _engine(store, "multi")
    hits = engine.search(SearchRequest(QUERY, top_k=3)).hits
    assert hits[0].key == "export.md", [h.key for h in hits]


def test_the_share_of_found_words_scales_only_the_keyword_sides(store):
    engine = _engine(store, "multi")
    terms = parse_terms(QUERY)
    assert found_share(terms, engine.item_df, engine.embedder) == 1 / len(terms)
    assert found_share(parse_terms("export the note to pdf"), engine.item_df, engine.embedder) == 1.0
    weights = scaled({"vector": 0.5, "keyword": 0.5, "keyword_chunks": 0.2, "title": 0.4}, 0.25)
    assert weights == {"vector": 0.5, "keyword": 0.125, "keyword_chunks": 0.05, "title": 0.1}


def test_an_english_only_model_keeps_the_keyword_weights(store):
    engine = _engine(store, "en")
    assert found_share(parse_terms(QUERY), engine.item_df, engine.embedder) == 1.0
