"""`local-rag index|watch|ui`: the pipeline commands, loaded lazily by the `local-rag` CLI."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import click

from rag_search.cli.context import App, pass_app
from rag_search.cli.format import echo_json
from rag_search.errors import ConfigError

from rag_pipelines.config import (CollectionConfig, load_collections, register_collection, source_paths,
                                   validate_collection)
from rag_pipelines.sources.registry import SourceType, source_types
from rag_pipelines.indexing.runs import RunSummary, index_collections


def _run(app: App, names: list[str] | None, force: bool, as_json: bool,
         keys: dict[str, list[str]] | None = None) -> None:
    from rag_pipelines.indexing import progress

    shown: dict = {}

    def on_plan(name, plan):
        _close_progress(shown)
        total = len(plan.new) + len(plan.changed) + len(plan.deleted)
        click.echo(f"{name}: {len(plan.entries)} items; {len(plan.new)} new, {len(plan.changed)} changed, "
                   f"{len(plan.deleted)} deleted", err=True)
        if total:  # a redrawn line on a terminal, a line every 10 s in a log (stderr: --json stays clean)
            shown["reporter"] = progress.Reporter(f"indexing {name}", total, stream=sys.stderr).__enter__()

    try:
        summaries = index_collections(app.paths, names, force=force, on_plan=on_plan, keys=keys,
                                      on_wait=lambda m: click.echo(m, err=True))
    finally:
        _close_progress(shown)
    _report(summaries, as_json)


def _close_progress(shown: dict) -> None:
    reporter = shown.pop("reporter", None)
    if reporter is not None:
        reporter.__exit__(None, None, None)


# Exit statuses of `index` beyond the errors' own (1-5): the run finished, but not everything is indexed.
EXIT_ITEMS_FAILED = 6  # some items failed (each recorded with its reason); the others were indexed
EXIT_SOURCE_SKIPPED = 7  # a source could not be read at all (its items were kept); takes precedence over 6


def _report(summaries: list[RunSummary], as_json: bool) -> None:
    if as_json:
        echo_json([{**s.__dict__, "unchanged": s.unchanged} for s in summaries])
    else:
        for s in summaries:
            click.echo(s.line())
            for f in s.failures:
                click.echo(f"  failed: {f['uri']}  [{f['error_kind']}] {f['message']}")
        if any(s.failures for s in summaries):
            click.echo("Failed items are retried on the next run; fix or remove them, or see `local-rag status`.")
    if any(s.unavailable for s in summaries):
        sys.exit(EXIT_SOURCE_SKIPPED)
    if any(s.failures for s in summaries):
        sys.exit(EXIT_ITEMS_FAILED)


def _register(app: App, cfg: CollectionConfig, replace: bool = False) -> None:
    """Record a collection made on the command line; re-pointing an existing one needs --replace."""
    configured = load_collections(app.paths)
    existing = configured.get(cfg.name)
    if existing and existing.sources != cfg.sources:
        if cfg.name in app.settings.collections:
            raise ConfigError(f"Collection '{cfg.name}' is defined in {app.paths.config} with other sources. "
                              f"Edit it there, or pick another name.")
        if not replace:
            now = ", ".join(source_paths(existing)) or "other sources"
            raise ConfigError(f"Collection '{cfg.name}' already indexes {now}. Pass --replace to point it at the new "
                              "location (items found there unchanged keep their vectors and move to their new paths; "
                              "items not found there leave the index), or pick another name.")
    if existing is None or existing.sources != cfg.sources:
        register_collection(app.paths, cfg)


def _validate(body: dict) -> CollectionConfig:
    return validate_collection(body, "the command line")


@click.group("index")
def index():
    """Index sources into rag.db through the Dagster pipelines (runs appear in `local-rag ui`)."""


_force = click.option("--force", is_flag=True, help="Re-chunk and re-embed unchanged items too (cached vectors are reused).")
_json = click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
_replace = click.option("--replace", is_flag=True, help="Re-point an existing collection of this name to the new location.")


@index.command("project")
@click.argument("name")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--description", default="", help="What the collection holds (shown to AI assistants).")
@_replace
@_force
@_json
@pass_app
def index_project(app: App, name: str, paths: tuple[Path, ...], description: str, replace: bool, force: bool,
                  as_json: bool):
    """Index folders as the project collection NAME (registered, so sensors and `index all` keep it fresh)."""
    cfg = _validate({"name": name, "kind": "project", "description": description,
                     "sources": [{"type": "project", "paths": [str(p) for p in paths]}]})
    _register(app, cfg, replace)
    _run(app, [cfg.name], force, as_json)


@index.command("obsidian")
@click.option("--vault", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="The vault folder (registers it as a collection if it is not configured).")
@click.option("--name", default="notes", show_default=True, help="Collection name for --vault.")
@_replace
@_force
@_json
@pass_app
def index_obsidian(app: App, vault: Path | None, name: str, replace: bool, force: bool, as_json: bool):
    """Index Obsidian vaults: the configured ones, or the one given with --vault."""
    if vault:
        cfg = _validate({"name": name, "kind": "system", "description": f"Obsidian vault {vault.name}",
                         "sources": [{"type": "obsidian", "paths": [str(vault)]}]})
        _register(app, cfg, replace)
        names = [cfg.name]
    else:
        names = _configured_of_type(app, "obsidian", "`local-rag index obsidian --vault PATH`")
    _run(app, names, force, as_json)


def _configured_of_type(app: App, type_: str, hint: str) -> list[str]:
    names = [n for n, c in load_collections(app.paths).items() if any(s.type == type_ for s in c.sources)]
    if not names:
        raise ConfigError(f"No {type_} source is configured. Pass one: {hint}, or add it to {app.paths.config}.")
    return names


def _source_command(spec: SourceType) -> click.Command:
    """`local-rag index <type>` for a source module: its own options, a --name, --force and --json."""

    def run(app: App, name: str, replace: bool, force: bool, as_json: bool, **values):
        body = spec.cli_source(**values) if spec.cli_source else None
        if body is None:
            names = _configured_of_type(app, spec.type, f"`local-rag index {spec.type} --help`")
        else:
            cfg = _validate({"name": name, "kind": spec.kind, "sources": [{"type": spec.type, **body}]})
            _register(app, cfg, replace)
            names = [cfg.name]
        _run(app, names, force, as_json)

    params = list(spec.cli_params) + [
        click.Option(["--name"], default=spec.collection, show_default=True, help="Collection name."),
        click.Option(["--replace"], is_flag=True, help="Re-point an existing collection of this name."),
        click.Option(["--force"], is_flag=True, help="Re-chunk and re-embed unchanged items too."),
        click.Option(["--json", "as_json"], is_flag=True, help="Print the summary as JSON."),
    ]
    callback = pass_app(run)
    return click.Command(spec.type, callback=callback, params=params, help=spec.summary, short_help=spec.summary)


for _spec in source_types().values():
    if _spec.type not in index.commands and _spec.collection:
        index.add_command(_source_command(_spec))


@index.command("group")
@click.argument("name", required=False)
@click.option("--history", is_flag=True, help="Also index the commits of the last git_history_in_months months.")
@_force
@_json
@pass_app
def index_group(app: App, name: str | None, history: bool, force: bool, as_json: bool):
    """Index the git repositories of code group NAME (every group without NAME): their files, and their
    commits with --history (`index all` includes both)."""
    from rag_pipelines.sources.code_groups import code_collections, file_keys

    collections = load_collections(app.paths)
    names = code_collections(collections, name)
    keys = None
    if not history:  # files only; commits already indexed stay as they are
        keys = {n: file_keys(collections[n], app.store) for n in names}
    _run(app, names, force, as_json, keys=keys)


@index.command("all")
@_force
@_json
@pass_app
def index_all(app: App, force: bool, as_json: bool):
    """Index every configured and registered collection."""
    if not load_collections(app.paths):
        raise ConfigError("Nothing is configured yet. Start with `local-rag index project NAME PATH`.")
    _run(app, None, force, as_json)


@click.command("watch")
@click.argument("collections", nargs=-1)
@click.option("--debounce", default=2.0, show_default=True, help="Seconds of quiet before changes are indexed.")
@pass_app
def watch(app: App, collections: tuple[str, ...], debounce: float):
    """Index changes seconds after files are saved (near-real-time; Ctrl-C or SIGTERM to stop)."""
    from rag_pipelines.indexing.stop_signals import stop_on_signals
    from rag_pipelines.indexing.watch import watch_collections

    # Started in the background by a script, SIGINT is ignored, and Dagster points SIGTERM at SIGINT's handler at
    # every run: `kill` would be ignored too. Either signal stops the watcher (through its cleanup).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    stop = threading.Event()  # set by a signal Dagster's handler lost (see stop_signals): stops after the run
    try:
        with stop_on_signals(stop):
            watch_collections(app.paths, list(collections) or None, debounce,
                              echo=lambda m: click.echo(m, err=True), stop=stop)
    except KeyboardInterrupt:
        pass
    click.echo("stopped watching (what was saved before is indexed; later saves are caught up on the next "
               "`local-rag watch` or `local-rag index`)", err=True)


@click.command("record-index")
@click.argument("collections", nargs=-1)
@pass_app
def record_index(app: App, collections: tuple[str, ...]):
    """Record what the index holds in the Dagster instance, without re-indexing: after moving Dagster (e.g. to
    PostgreSQL) the UI shows every item Missing until this gives each indexed item a materialisation."""
    import dagster as dg

    from rag_pipelines.wiring.instance import ensure_instance
    from rag_pipelines.wiring.record import record_index as record

    configured = load_collections(app.paths)
    unknown = [n for n in collections if n not in configured]
    if unknown:
        raise ConfigError(f"No configured collection named {', '.join(unknown)} (configured: "
                          f"{', '.join(sorted(configured)) or 'none'}).")
    ensure_instance(app.paths)
    instance = dg.DagsterInstance.get()
    try:
        for done in record(instance, app.store, list(collections) or sorted(configured)):
            click.echo(done.line())
    finally:
        instance.dispose()


@click.command("ui")
@click.option("--port", default=3000, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True)
@pass_app
def ui(app: App, port: int, host: str):
    """Open the Dagster UI (webserver + daemon for sensors and schedules) on local-rag's instance."""
    import threading

    from rag_pipelines.wiring.instance import ensure_instance
    from rag_pipelines.wiring.reload import follow_config

    home = ensure_instance(app.paths)
    click.echo(f"Dagster UI on http://{host}:{port}  (DAGSTER_HOME={home}); Ctrl-C stops it.", err=True)
    env = {**os.environ, "DAGSTER_HOME": str(home), "LOCAL_RAG_HOME": str(app.paths.home)}
    cmd = [sys.executable, "-m", "rag_pipelines.wiring.ui_server", str(home / "workspace.yaml"), host, str(port)]
    local = "127.0.0.1" if host in ("0.0.0.0", "::") else f"[{host}]" if ":" in host else host
    follow_config(app.paths, f"http://{local}:{port}", lambda m: click.echo(m, err=True), threading.Event())
    raise SystemExit(run_until_signal(cmd, env))


def run_until_signal(cmd: list[str], env: dict) -> int:
    """Run Dagster's webserver and daemon (wiring/ui_server.py) in their own process group; SIGINT/SIGTERM/SIGHUP to us stop the whole group
    (webserver, daemon, code servers), politely first, then by force after 15 s."""
    import signal

    def defaults():  # a shell's background job ignores SIGINT; the child must not inherit that
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)

    proc = subprocess.Popen(cmd, env=env, start_new_session=True, preexec_fn=defaults)
    stopping: list[int] = []

    def stop(signum, _frame):
        stopping.append(signum)
        _signal_group(proc.pid, signal.SIGTERM)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)
    try:
        while True:
            try:
                code = proc.wait(timeout=15 if stopping else None)
                break
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
    finally:
        _signal_group(proc.pid, signal.SIGKILL)  # nothing of the group outlives the command
    return 0 if stopping else code


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


COMMANDS = {"index": index, "watch": watch, "ui": ui, "record-index": record_index}
