"""The MCP server's one warm context: paths, settings (followed while the server runs), the store, the embedder,
the engine and the people directory, shared by every session, tool and page of a `local-rag serve` process."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rag_search.config import LiveSettings, Paths, Settings
from rag_search.embedders import Embedder, load_embedder
from rag_search.errors import RagError
from rag_search.people import PeopleDirectory
from rag_search.retrieval import SearchEngine
from rag_search.retrieval.rerank import load_reranker
from rag_search.store import Store


@dataclass
class RagContext:
    paths: Paths
    settings: Settings
    store: Store
    embedder: Embedder
    engine: SearchEngine
    people: PeopleDirectory | None = None
    live: LiveSettings | None = None  # the config file, followed while the server runs

    def refresh(self, max_age: float | None = None) -> RagContext:
        """Take in an edited config file (looked at once a second, or when older than `max_age`): search
        settings, reranker, embedder and people apply to the next call; a broken edit changes nothing."""
        if self.live is not None and self.live.check(max_age):
            try:
                self._apply(self.live.settings)
            except RagError as exc:  # e.g. a people file that cannot be read
                self.live.error = f"{exc} (the settings loaded before stay in use)"
        return self

    def _apply(self, new: Settings) -> None:
        people = PeopleDirectory.from_settings(new)
        if new.embedder != self.settings.embedder:
            self.embedder = self.engine.embedder = load_embedder(new.embedder, self.paths)
        if new.search != self.settings.search:
            self.engine.settings, self.engine.reranker = new.search, load_reranker(new.search)
        self.settings, self.people = new, people

    def config_state(self) -> dict[str, Any]:
        return self.live.state() if self.live is not None else {"file": str(self.paths.config)}
