"""The one error hierarchy of local-rag; every message says what to do next.

    RagError
    ├── ConfigError          a setting or config file is wrong (names file, section, field)
    │   └── RootRefused      an AI assistant asked to index a folder it may not (system, hidden, outside roots),
    │                        or a folder it added now leads there
    ├── StoreError           rag.db cannot be opened, migrated or written
    │   └── ExtensionError   sqlite-vec cannot be loaded into SQLite
    ├── EmbedderError        an embedder cannot load or answer
    │   ├── EmbedderUnavailable   e.g. Ollama not running, model not pulled
    │   └── EmbedderMismatch      the index was built with another embedder
    ├── QueryError           a search request is invalid (bad date, unknown collection, ...)
    └── NotFound             an item or collection asked for does not exist

Errors are translated only at the edges: the CLI prints the message and exits non-zero,
the MCP server returns it as a tool error, the pipelines record it on the item. A value the user gave
appears in a message through quote() (shortened, control characters escaped).
"""

from __future__ import annotations


class RagError(Exception):
    """Base of every error local-rag raises on purpose."""

    exit_code = 1


class ConfigError(RagError):
    exit_code = 2


class RootRefused(ConfigError):
    pass


class StoreError(RagError):
    exit_code = 3


class ExtensionError(StoreError):
    pass


class EmbedderError(RagError):
    exit_code = 4


class EmbedderUnavailable(EmbedderError):
    pass


class EmbedderMismatch(EmbedderError):
    pass


class QueryError(RagError):
    exit_code = 2


class NotFound(RagError):
    exit_code = 5


def quote(value: object, limit: int = 60) -> str:
    """A value a user or client gave, for a message: quoted, control characters escaped, at most `limit`
    characters of it (with its full length after a longer one) - a message never echoes a 1 MB argument."""
    text = str(value)
    shown = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text[:limit])
    return f"'{shown}'" if len(text) <= limit else f"'{shown}...' ({len(text):,} characters)"
