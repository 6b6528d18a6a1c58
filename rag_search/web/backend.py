"""What the page reads from: the open index, the engine that searches it, the people directory, where files live."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rag_search.config import Paths, Settings
from rag_search.people import PeopleDirectory
from rag_search.retrieval import SearchEngine
from rag_search.store import Store


@dataclass(frozen=True)
class Backend:
    """The library objects a `local-rag serve` process already holds (mcp/context.RagContext has them all).

    `context`: that RagContext, followed while the server runs: its config file is re-read (at most once a second),
    so the people directory and the settings the page uses are the current ones."""

    paths: Paths
    store: Store
    engine: SearchEngine
    directory: PeopleDirectory | None = None
    context: Any = None

    @classmethod
    def of(cls, context) -> Backend:
        """From any object with paths, store, engine and people (the MCP server's RagContext)."""
        return cls(context.paths, context.store, context.engine, getattr(context, "people", None), context)

    @property
    def people(self) -> PeopleDirectory | None:
        if self.context is not None and hasattr(self.context, "refresh"):
            return self.context.refresh().people
        return self.directory

    @property
    def settings(self) -> Settings | None:
        """The server's settings now (None: a page mounted without a server's context)."""
        if self.context is not None and hasattr(self.context, "refresh"):
            return self.context.refresh().settings
        return None
