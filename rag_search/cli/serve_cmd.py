"""`local-rag serve`: the MCP server over stdio (Claude Desktop / Claude Code) or streamable HTTP (with TLS, keys,
and the search page at /)."""

from __future__ import annotations

import os
import signal
import sys

import click

from rag_search.cli.context import App, pass_app

DEFAULT_PORT = 8765


@click.command("serve")
@click.option("--http", "http", is_flag=True, help=f"Serve streamable HTTP (on --port, default {DEFAULT_PORT}) "
                                                   "instead of stdio.")
@click.option("--port", type=int, help=f"HTTP port (implies --http; default {DEFAULT_PORT}).")
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP bind address; off loopback, keys are "
                                                                      "required (`local-rag users add`).")
@click.option("--tls", is_flag=True, help="HTTPS, with --tls-cert/--tls-key (or server.tls_cert/tls_key), else a "
                                          "self-signed certificate made in the home; its fingerprint is printed.")
@click.option("--tls-cert", type=click.Path(dir_okay=False), help="Certificate (PEM) for --tls.")
@click.option("--tls-key", type=click.Path(dir_okay=False), help="Its private key (PEM).")
@click.option("--token", default=lambda: os.environ.get("LOCAL_RAG_MCP_TOKEN"),
              help="A key for the owner (sees everything; env LOCAL_RAG_MCP_TOKEN), besides the users' keys.")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="NAME",
              help="Also answer to this Host name (e.g. a LAN name); repeatable; adds to mcp.allowed_hosts.")
@click.option("--allow-origin", "allow_origins", multiple=True, metavar="ORIGIN",
              help="Also trust this browser Origin (e.g. http://localhost:5173); repeatable; adds to "
                   "mcp.allowed_origins.")
@click.option("--trusted-proxy", "proxies", multiple=True, metavar="ADDRESS",
              help="A reverse proxy (address or network) whose X-Forwarded-For/-Proto are believed; repeatable; "
                   "adds to server.trusted_proxies.")
@pass_app
def serve(app: App, http: bool, port: int | None, host: str, tls: bool, tls_cert: str | None, tls_key: str | None,
          token: str | None, allow_hosts: tuple[str, ...], allow_origins: tuple[str, ...],
          proxies: tuple[str, ...] = ()):
    """Run the MCP server: stdio by default (what Claude launches), or HTTP with --http / --port (and the search
    page at /)."""
    from rag_search.mcp import server as mcp_server
    from rag_search.cli.search_socket import SearchSocket

    http = http or port is not None
    if (tls or tls_cert or tls_key) and not http:
        raise click.UsageError("--tls is for the HTTP server: add --http (or --port N).")
    ctx = mcp_server.open_context(app.paths)
    app.__dict__.update(settings=ctx.settings, store=ctx.store, embedder=ctx.embedder)
    searches = SearchSocket(app, lambda: ctx.refresh(max_age=0))  # `local-rag search` on this home answers from here
    searches.start()
    # SIGTERM (a client closing the server, uvicorn re-raising it after its graceful stop) ends through `finally`
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        if not http:
            _query_log(app, on_by_default=False)
            mcp_server.serve_stdio()
            return
        _serve_http(app, host, port or DEFAULT_PORT, tls or bool(tls_cert or tls_key), tls_cert, tls_key, token,
                    allow_hosts, allow_origins, proxies)
    finally:
        searches.stop()
        mcp_server.close_context()


def _serve_http(app: App, host: str, port: int, tls: bool, tls_cert: str | None, tls_key: str | None,
                token: str | None, allow_hosts: tuple[str, ...], allow_origins: tuple[str, ...],
                proxies: tuple[str, ...] = ()) -> None:
    from rag_search.mcp import http as mcp_http
    from rag_search.access import http_keys
    from rag_search.mcp import server as mcp_server

    mcp_http.check_exposure(host, http_keys.has_keys(app.paths, token))
    hosts = [*app.settings.mcp.allowed_hosts, *allow_hosts]
    origins = [*app.settings.mcp.allowed_origins, *allow_origins]
    proxies = (*app.settings.server.trusted_proxies, *proxies)
    cert = _certificate(app, host, hosts, tls_cert, tls_key) if tls else None
    scheme = "https" if cert else "http"
    say = lambda line: click.echo(line, err=True)  # noqa: E731 - stdout stays clean
    say(f"local-rag MCP server on {scheme}://{_url_host(host)}:{port}/mcp (streamable HTTP); search page on "
        f"{scheme}://{_url_host(host)}:{port}/")
    if cert:
        for line in _tls_lines(cert):
            say(line)
    elif not mcp_http.is_loopback(host):
        say("Warning: without --tls, keys and queries cross the network unencrypted. Add --tls.")
    say(_keys_line(app, token))
    exposed = _readable_by_others(app)
    if exposed:
        say(f"Warning: other accounts on this machine can read {', '.join(map(str, exposed))} (keys' hashes, sign-ins, "
            f"the index). Run: chmod go= {' '.join(str(f) for f in exposed)}")
    if token and len(token) < http_keys.STRONG_KEY:
        say(f"Warning: the --token is {len(token)} characters long; a token under {http_keys.STRONG_KEY} can be "
            "guessed, so it waits with an address that sent wrong keys. `local-rag users add NAME` makes strong keys.")
    if proxies:
        say(f"Trusted proxies (their X-Forwarded-For counts): {', '.join(proxies)}")
    log = _query_log(app, on_by_default=True)
    say(f"Query log: {log}" if log else "Query log: off (server.query_log)")
    mcp_server.serve_http(host, port, token, hosts, origins, (str(cert.cert), str(cert.key)) if cert else None,
                          app.paths, proxies=proxies)


def _certificate(app: App, host: str, hosts: list[str], cert: str | None, key: str | None):
    from rag_search.mcp import http as mcp_http
    from rag_search.access import tls

    names = {*mcp_http.LOOPBACK_NAMES, "127.0.0.1", "::1", *mcp_http.machine_names(host), *hosts}
    names -= {n for n in names if n.strip("[]") in mcp_http.WILDCARDS}
    server = app.settings.server
    return tls.certificate(app.paths.home, names, cert or server.tls_cert, key or server.tls_key)


def _tls_lines(cert) -> list[str]:
    kind = "self-signed certificate" if cert.self_signed else "certificate"
    made = " (made now: clients that trusted an earlier one must trust this one)" if cert.made else ""
    return [f"TLS: {kind} {cert.cert}{made}",
            f"SHA-256 fingerprint: {cert.fingerprint}",
            "  (clients compare it with `openssl x509 -in <the certificate> -noout -fingerprint -sha256`)"]


def _keys_line(app: App, token: str | None) -> str:
    """Who can connect (check_exposure refused to serve off loopback without keys)."""
    from rag_search.access import users

    people = users.directory(app.paths).users.values()
    listed = "; ".join(f"{u.name}: " + ("all collections (admin)" if u.sees_all else ", ".join(sorted(u.collections or ()))
                                          or "no collections yet") for u in sorted(people, key=lambda u: u.name))
    if people or token:
        who = f"{len(people)} user(s) ({listed})" if people else "none"
        return f"Keys: every request needs `Authorization: Bearer <key>`; users: {who}" + \
            ("; --token: the owner" if token else "")
    return "Keys: none configured, so only this machine can connect (loopback), as the owner. " \
           "`local-rag users add NAME --collections ...` gives someone a key."


def _readable_by_others(app: App) -> list:
    """The home and the files in it holding secrets or the index that other accounts may read."""
    from rag_search.access.sessions import FILE as SESSIONS

    files = [app.paths.home, app.paths.config, app.paths.db, app.paths.home / SESSIONS]
    out = []
    for f in files:
        try:
            if f.stat().st_mode & 0o077:
                out.append(f)
        except OSError:
            continue
    return out


def _query_log(app: App, on_by_default: bool):
    """The query log, written while server.query_log (followed as config.yaml changes) says so (unset:
    `on_by_default`); its path when it is on now, else None."""
    from rag_search.mcp import server as mcp_server
    from rag_search.access.query_log import QueryLog

    log = QueryLog.from_settings(app.paths.home, app.settings.server)
    mcp_server.log_queries(log, on_by_default)
    return log.file if mcp_server.active_log() is not None else None


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
