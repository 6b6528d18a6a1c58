"""`local-rag collections|status|doctor|reembed`: looking after the index."""

from __future__ import annotations

import sys
from typing import Callable

import click

from rag_search.cli.context import App, pass_app
from rag_search.cli.format import echo_json, render_collections, render_status
from rag_search.errors import RagError
from rag_search.store import migrations, reads, writes
from rag_search.store.connection import connect, versions
from rag_search.store.vectors import check_embedder, recorded_embedder


@click.group("collections")
def collections():
    """List, inspect and delete collections."""


@collections.command("list")
@click.option("--json", "as_json", is_flag=True)
@pass_app
def collections_list(app: App, as_json: bool):
    """Every collection with item and chunk counts."""
    rows = [c.to_dict() for c in reads.list_collections(app.store)]
    echo_json(rows) if as_json else click.echo(render_collections(rows))


@collections.command("info")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
@pass_app
def collections_info(app: App, name: str, as_json: bool):
    """One collection: items by type, chunks, failures, sample titles."""
    info = reads.collection_info(app.store, name)
    if as_json:
        echo_json(info)
        return
    click.echo(render_collections([info]))
    click.echo("\nitems by type: " + ", ".join(f"{k} {v}" for k, v in info["items_by_source_type"].items()))
    if info["sample_titles"]:
        click.echo("recent titles: " + "; ".join(info["sample_titles"]))
    for f in info["failures"]:
        click.echo(f"failed: {f['uri']}  [{f['error_kind']}] {f['message']}")


@collections.command("delete")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@pass_app
def collections_delete(app: App, name: str, yes: bool):
    """Remove a collection's items, chunks and vectors from the index (sources are untouched)."""
    app.store.collection_id(name)  # fails with the known names if it does not exist
    if not yes:
        click.confirm(f"Delete collection '{name}' from the index?", abort=True)
    n = writes.delete_collection(app.store, name)
    click.echo(f"Deleted collection '{name}' ({n} items). Its source files were not touched.")


@click.command("status")
@click.option("--json", "as_json", is_flag=True)
@pass_app
def status(app: App, as_json: bool):
    """Collections, counts, index size, embedder, last index times and failures."""
    st = reads.status(app.store)
    st.update(_runs(app))
    st["ocr"] = _ocr(app)
    echo_json(st) if as_json else click.echo(render_status(st) + "\n\n" + _ocr_lines(st["ocr"]))


def _ocr(app: App) -> dict:
    """The OCR engines there are, and the one each folder source uses (status is not on the search path)."""
    from rag_pipelines.parsers.ocr import status as ocr_status

    return {"engines": ocr_status.engines(), "sources": ocr_status.sources(app.paths)}


def _ocr_lines(ocr: dict) -> str:
    lines = ["ocr engines: " + "; ".join(ocr["engines"].values())]
    for src in ocr["sources"]:
        use = ("off" if not src["enabled"] else
               f"{src['engine']} ({', '.join(src['languages'])})" if src["engine"] else "no engine")
        lines.append(f"  {src['collection']}/{src['source']}: {use}" + (f"; {src['missing']}" if src["missing"] else ""))
    return "\n".join(lines)


def _runs(app: App) -> dict:
    """Dagster runs still marked active (dead ones are marked failed first); nothing when no instance exists."""
    if not (app.paths.dagster_home / "history" / "runs.db").exists():
        return {}
    import dagster as dg  # only here: status is not on the search path

    from rag_pipelines.indexing.health import reap_dead_runs, stuck_runs
    from rag_pipelines.wiring.instance import ensure_instance

    ensure_instance(app.paths)
    instance = dg.DagsterInstance.get()
    return {"runs_reaped": [i.to_dict() for i in reap_dead_runs(instance)],
            "runs": [i.to_dict() for i in stuck_runs(instance)]}


@click.command("reembed")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@pass_app
def reembed(app: App, yes: bool):
    """Re-embed every stored chunk with the configured embedder (sources are not re-read)."""
    from rag_search.embedders.reembed import reembed as run_reembed

    recorded = recorded_embedder(app.store.conn)
    target = app.embedder
    if recorded == (target.id, target.dimensions):
        click.echo(f"The index already uses {target.id}; nothing to do.")
        return
    if not yes:
        click.confirm(f"Re-embed the index from {recorded[0] if recorded else 'nothing'} to {target.id}?", abort=True)
    bar: dict = {}

    def total(n: int) -> None:
        bar["bar"] = click.progressbar(length=n, label="embedding chunks", file=sys.stderr)
        bar["bar"].__enter__()

    stats = run_reembed(app.store, target, progress=lambda n: bar["bar"].update(n), total=total)
    if "bar" in bar:
        bar["bar"].__exit__(None, None, None)
    click.echo(f"Re-embedded with {target.id}: {stats['embedded']} texts embedded, {stats['reused']} from cache, "
               f"{stats['vectors']} vectors written.")


@click.command("doctor")
@click.option("--fix", is_flag=True, help="Apply pending schema migrations.")
@pass_app
def doctor(app: App, fix: bool):
    """Check the SQLite extension, the index schema, the embedder (and Ollama if configured) and OCR."""
    results = [_check(name, fn) for name, fn in _checks(app, fix)]
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


def _checks(app: App, fix: bool) -> list[tuple[str, Callable[[], str]]]:
    def sqlite() -> str:
        conn = connect(":memory:")
        sqlite_v, vec_v = versions(conn)
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
        return f"SQLite {sqlite_v}, sqlite-vec {vec_v}, FTS5 available"

    def config() -> str:
        app.settings
        where = app.paths.config if app.paths.config.exists() else "defaults (no config file)"
        return f"{where}; embedder {app.settings.embedder.provider}"

    def schema() -> str:
        if not app.paths.db.exists():
            return f"{app.paths.db} does not exist yet; it is created by the first index run"
        conn = connect(app.paths.db)
        todo = migrations.pending(conn)
        if todo and fix:
            migrations.migrate(conn)
            return f"applied {', '.join(todo)}"
        if todo:
            raise RagError(f"{len(todo)} pending migrations ({', '.join(todo)}). Run `local-rag doctor --fix`.")
        return f"{app.paths.db} at schema v{migrations.SCHEMA_VERSION}"

    def embedder() -> str:
        emb = app.embedder
        if hasattr(emb, "ping"):
            models = emb.ping()
            if not any(m.split(":")[0] == emb.model.split(":")[0] for m in models):
                raise RagError(f"Ollama runs but has no '{emb.model}'. Pull it: `ollama pull {emb.model}`.")
        vec = emb.embed_query("local-rag doctor")
        return f"{emb.id} loads and embeds ({len(vec)} dims)"

    def match() -> str:
        if not app.paths.db.exists():
            return "no index yet"
        conn = connect(app.paths.db)
        if not migrations.applied(conn) or recorded_embedder(conn) is None:
            return "index has no vectors yet"
        check_embedder(conn, app.embedder.id, app.embedder.dimensions, str(app.paths.db))
        return f"index built with {app.embedder.id}"

    def ocr() -> str:
        from rag_pipelines.parsers.ocr import status as ocr_status
        from rag_pipelines.parsers.ocr.engines import OcrFailed

        try:
            return ocr_status.self_test()
        except OcrFailed as exc:
            raise RagError(f"OCR does not work: {exc}") from exc

    return [("sqlite", sqlite), ("config", config), ("schema", schema), ("embedder", embedder),
            ("index embedder", match), ("ocr", ocr)]


@click.command("compact")
@pass_app
def compact(app: App):
    """Return the index's free pages to the disk (SQLite VACUUM). Stop `local-rag serve`, `ui` and `watch` first."""
    from pathlib import Path

    store = app.store
    path = Path(store.path)
    page = store.conn.execute("PRAGMA page_size").fetchone()[0]
    free = store.conn.execute("PRAGMA freelist_count").fetchone()[0] * page
    before = path.stat().st_size
    click.echo(f"{store.path}: {before / 1e6:,.0f} MB, of which {free / 1e6:,.0f} MB free pages; compacting "
               "(rewrites the file: needs about its size free on the disk) ...", err=True)
    try:
        with store.lock:
            store.conn.execute("VACUUM")
            store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except Exception as exc:
        raise click.ClickException(f"Could not compact {store.path}: {exc}. Stop the processes that have it open "
                                   "(`local-rag serve`, `ui`, `watch`, a running index) and try again.") from exc
    click.echo(f"{store.path}: {before / 1e6:,.0f} MB -> {path.stat().st_size / 1e6:,.0f} MB")


@click.command("migrate-store")
@click.option("--from", "source", type=click.Path(dir_okay=False), help="The rag.db to copy (default: LOCAL_RAG_DB).")
@click.option("--to", "url", help="The PostgreSQL store's URL (default: `store:` in config.yaml).")
@pass_app
def migrate_store(app: App, source: str | None, url: str | None):
    """Copy a rag.db into an empty PostgreSQL store (pgvector), vectors included: nothing is re-embedded."""
    from rag_search.store import is_url
    from rag_search.store.pg.connection import redact
    from rag_search.store.pg.migrate import migrate_store as copy_store

    url = url or app.settings.store
    if not is_url(url):
        raise click.UsageError("Say where to copy to: --to postgresql://user:password@host:5432/db, or set "
                               "`store: postgresql://...` in config.yaml.")
    source = source or str(app.paths.db)
    report = copy_store(source, url, progress=lambda m: click.echo(m, err=True))
    rows = ", ".join(f"{n:,} {t}" for t, n in report.rows.items() if t in ("items", "chunks", "chunk_vec"))
    click.echo(f"Copied {source} to {redact(url)} in {report.seconds:.1f} s: {rows}.")
    if not app.settings.store:
        click.echo(f"To search it, set in {app.paths.config}:  store: {redact(url)}  (with the password)", err=True)
