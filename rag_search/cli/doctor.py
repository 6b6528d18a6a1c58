"""`local-rag doctor`: checks what this home is configured to use, and exits 1 when any check fails.

The SQLite extension, config.yaml, the store (rag.db's schema, or a PostgreSQL server: its connection, pgvector and
the store's schema version), the embedder and the index's, the Dagster instance (SQLite files or PostgreSQL: its
connection and schema) and OCR. Each failure says what to do.
"""

from __future__ import annotations

from typing import Callable

import click

from rag_search.cli.context import App, pass_app
from rag_search.errors import RagError, StoreError
from rag_search.store import is_url, migrations
from rag_search.store.connection import connect, versions
from rag_search.store.vectors import check_embedder, recorded_embedder


@click.command("doctor")
@click.option("--fix", is_flag=True, help="Apply pending schema migrations.")
@pass_app
def doctor(app: App, fix: bool):
    """Check the SQLite extension, the config, the store (rag.db or PostgreSQL), the embedder, the Dagster instance
    (SQLite or PostgreSQL) and OCR; exit 1 if any check fails."""
    results = [_check(name, fn) for name, fn in checks(app, fix)]
    for ok, name, detail in results:
        mark = click.style("ok  ", fg="green") if ok else click.style("FAIL", fg="red")
        click.echo(f"{mark} {name}: {detail}")
    if not all(ok for ok, _, _ in results):
        raise SystemExit(1)


def _check(name: str, fn: Callable[[], str]) -> tuple[bool, str, str]:
    try:
        return True, name, fn()
    except RagError as exc:
        return False, name, str(exc)
    except Exception as exc:  # a check must report, never crash the doctor
        return False, name, f"{type(exc).__name__}: {exc}"


def checks(app: App, fix: bool) -> list[tuple[str, Callable[[], str]]]:
    def sqlite() -> str:
        conn = connect(":memory:")
        sqlite_v, vec_v = versions(conn)
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
        return f"SQLite {sqlite_v}, sqlite-vec {vec_v}, FTS5 available"

    def config() -> str:
        app.settings
        where = app.paths.config if app.paths.config.exists() else "defaults (no config file)"
        return f"{where}; embedder {app.settings.embedder.provider}"

    def store() -> str:
        if is_url(app.settings.store):
            return pg_store(app.settings.store, fix)
        return sqlite_store(app, fix)

    def embedder() -> str:
        emb = app.embedder
        if hasattr(emb, "ping"):
            models = emb.ping()
            if not any(m.split(":")[0] == emb.model.split(":")[0] for m in models):
                raise RagError(f"Ollama runs but has no '{emb.model}'. Pull it: `ollama pull {emb.model}`.")
        vec = emb.embed_query("local-rag doctor")
        return f"{emb.id} loads and embeds ({len(vec)} dims)"

    def match() -> str:
        conn, where = _store_connection(app)
        if conn is None:
            return "no index yet"
        try:
            if recorded_embedder(conn) is None:
                return "index has no vectors yet"
            check_embedder(conn, app.embedder.id, app.embedder.dimensions, where)
        finally:
            conn.close()
        return f"index built with {app.embedder.id}"

    def dagster() -> str:
        from rag_pipelines.wiring.instance import describe_instance  # Dagster only here: doctor is not search

        return describe_instance(app.paths, app.settings.dagster)

    def ocr() -> str:
        from rag_pipelines.parsers.ocr import status as ocr_status
        from rag_pipelines.parsers.ocr.engines import OcrFailed

        try:
            return ocr_status.self_test()
        except OcrFailed as exc:
            raise RagError(f"OCR does not work: {exc}") from exc

    return [("sqlite", sqlite), ("config", config), ("store", store), ("embedder", embedder),
            ("index embedder", match), ("dagster", dagster), ("ocr", ocr)]


def sqlite_store(app: App, fix: bool) -> str:
    if not app.paths.db.exists():
        return f"{app.paths.db} does not exist yet; it is created by the first index run"
    conn = connect(app.paths.db)
    todo = migrations.pending(conn)
    if todo and fix:
        migrations.migrate(conn)
        return f"{app.paths.db}: applied {', '.join(todo)}"
    if todo:
        raise RagError(f"{app.paths.db}: {len(todo)} pending migrations ({', '.join(todo)}). Run `local-rag doctor "
                       "--fix`.")
    return f"{app.paths.db} (SQLite) at schema v{migrations.SCHEMA_VERSION}"


def pg_store(url: str, fix: bool) -> str:
    """The PostgreSQL store: the server answers, pgvector is there, the store's schema is one this version reads."""
    from rag_search.store.pg import schema
    from rag_search.store.pg.connection import PgConnection, redact

    conn = PgConnection.connect(url)  # a StoreError that says what to check
    try:
        server = conn.execute("SHOW server_version").fetchone()[0]
        where = f"{redact(url)} (PostgreSQL {server.split()[0]})"
        vector = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        if vector is None:
            return f"{where}: {_no_pgvector(conn)}"
        version = _store_schema(conn)
        if version is None:
            return f"{where}, pgvector {vector[0]}: no index tables yet; the first `local-rag index` (or " \
                   "`local-rag migrate-store`) creates them"
        if version > schema.SCHEMA_VERSION:
            raise StoreError(f"{where} holds a store of schema v{version}, made by a newer local-rag (this one reads "
                             f"v{schema.SCHEMA_VERSION}): upgrade local-rag.")
        if version < schema.SCHEMA_VERSION and fix:
            schema.migrate(conn)
        elif version < schema.SCHEMA_VERSION:
            raise StoreError(f"{where} is at store schema v{version}: run `local-rag doctor --fix`.")
        return f"{where}, pgvector {vector[0]}, store schema v{schema.SCHEMA_VERSION}"
    finally:
        conn.close()


def _no_pgvector(conn) -> str:
    available = conn.execute("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    if available is None:
        raise StoreError("pgvector is not installed on the PostgreSQL server (no extension `vector`): install it "
                         "there (e.g. the postgresql-NN-pgvector package, or an image that ships it), then run "
                         "`local-rag doctor` again.")
    return (f"pgvector {available[0]} is installed on the server, not yet in this database; the first `local-rag "
            "index` creates it (CREATE EXTENSION vector: the role must own the database or be allowed to)")


def _store_schema(conn) -> int | None:
    if not conn.execute("SELECT to_regclass('meta') IS NOT NULL").fetchone()[0]:
        return None
    row = conn.execute("SELECT value FROM meta WHERE key = 'pg_schema_version'").fetchone()
    return int(row[0]) if row else None


def _store_connection(app: App):
    """(a connection to the configured store, how to name it), or (None, ...) when there is no index yet."""
    url = app.settings.store
    if is_url(url):
        from rag_search.store.pg.connection import PgConnection, redact

        conn, where = PgConnection.connect(url), redact(url)
        found = conn.execute("SELECT to_regclass('meta') IS NOT NULL").fetchone()[0]
    elif app.paths.db.exists():
        conn, where = connect(app.paths.db), str(app.paths.db)
        found = bool(migrations.applied(conn))
    else:
        return None, str(app.paths.db)
    if not found:
        conn.close()
        return None, where
    return conn, where
