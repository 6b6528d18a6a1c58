"""The `local-rag` command: search, look after the index, index sources, serve MCP and the search page."""

from __future__ import annotations

import click

from rag_search import __version__
from rag_search.cli import admin
from rag_search.cli.doctor import doctor
from rag_search.cli.context import RagGroup
from rag_search.cli.search_cmd import search
from rag_search.cli.serve_cmd import serve
from rag_search.cli.users_cmd import users_group
from rag_search.cli.web_cmd import web


class LocalRag(RagGroup):
    """The top-level group: pipeline commands (`index`, `watch`, `ui`, `record-index`) load lazily, so search never
    imports Dagster."""

    LAZY = ("index", "watch", "ui", "record-index")

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(self.LAZY))

    def get_command(self, ctx, name):
        if name in self.LAZY:
            from rag_pipelines.cli import COMMANDS

            return COMMANDS[name]
        return super().get_command(ctx, name)


@click.group(cls=LocalRag, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="local-rag")
def cli():
    """local-rag: private hybrid search over your notes, documents and mail. Nothing leaves this machine.

    Where things live: LOCAL_RAG_HOME (default ~/.local-rag), LOCAL_RAG_CONFIG, LOCAL_RAG_DB,
    DAGSTER_HOME, OLLAMA_HOST.
    """


cli.add_command(search)
cli.add_command(admin.collections)
cli.add_command(admin.status)
cli.add_command(doctor)
cli.add_command(admin.reembed)
cli.add_command(admin.compact)
cli.add_command(admin.migrate_store)
cli.add_command(serve)
cli.add_command(users_group)
cli.add_command(web)
