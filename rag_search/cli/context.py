"""What every CLI command needs, opened lazily: paths, settings, the store, the embedder."""

from __future__ import annotations

import sys
from functools import cached_property

import click

from rag_search.config import Paths, Settings, load_settings
from rag_search.embedders import Embedder, load_embedder
from rag_search.errors import RagError
from rag_search.store import Store, open_store


class App:
    def __init__(self, paths: Paths | None = None):
        self.paths = paths or Paths.from_env()

    @cached_property
    def settings(self) -> Settings:
        return load_settings(self.paths.config)

    @cached_property
    def store(self) -> Store:
        return open_store(self.settings.store_location(self.paths))

    @cached_property
    def embedder(self) -> Embedder:
        return load_embedder(self.settings.embedder, self.paths)

    def close(self) -> None:
        if "store" in self.__dict__:
            self.store.close()


pass_app = click.make_pass_decorator(App, ensure=True)


class RagGroup(click.Group):
    """Translates local-rag errors into a message on stderr and an exit code; no tracebacks."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except RagError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)
