"""`local-rag collections|status|reembed|compact|migrate-store`: looking after the index (`doctor`: doctor.py)."""

from __future__ import annotations

import sys

import click

from rag_search.cli.context import App, pass_app
from rag_search.cli.format import echo_json, render_collections, render_status
from rag_search.config import dagster_runs_possible
from rag_search.store import reads, writes
from rag_search.store.vectors import recorded_embedder


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
    if not dagster_runs_possible(app.paths, app.settings.dagster):
        return {}
    import dagster as dg  # only here: status is not on the search path

    from rag_pipelines.indexing.health import reap_dead_runs, stuck_runs
    from rag_pipelines.wiring.instance import ensure_instance

    ensure_instance(app.paths, app.settings.dagster)
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
