"""What the page reads from: the open index, the engine that searches it, the people directory, where files live."""

from __future__ import annotations

from dataclasses import dataclass

from rag_search.config import Paths
from rag_search.people import PeopleDirectory
from rag_search.retrieval import SearchEngine
from rag_search.store import Store


@dataclass(frozen=True)
class Backend:
    """The library objects a `local-rag serve` process already holds (mcp_server.RagContext has them all)."""

    paths: Paths
    store: Store
    engine: SearchEngine
    people: PeopleDirectory | None = None

    @classmethod
    def of(cls, context) -> Backend:
        """From any object with paths, store, engine and people (the MCP server's RagContext)."""
        return cls(context.paths, context.store, context.engine, getattr(context, "people", None))
