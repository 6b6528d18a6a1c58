"""`local-rag web`: `local-rag serve` over HTTP (MCP at /mcp, the search page at /) and the page opened in a browser,
or its address printed when this machine has no graphical browser."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time

import click

from rag_search.cli.serve_cmd import serve

WAIT_SECONDS = 120.0  # for the server to listen (it loads the model first)


@click.command("web")
@click.option("--port", type=int, default=8765, show_default=True, help="HTTP port.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Bind address (off loopback a key is required: --token, or `local-rag users add`).")
@click.option("--token", default=lambda: os.environ.get("LOCAL_RAG_MCP_TOKEN"),
              help="Token the login page asks for (env LOCAL_RAG_MCP_TOKEN); required off loopback.")
@click.option("--no-browser", is_flag=True, help="Only print the page's address.")
@click.pass_context
def web(ctx: click.Context, port: int, host: str, token: str | None, no_browser: bool):
    """Search in a browser: serve the search page (and MCP) and open it."""
    url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::', '') else host}:{port}/"
    threading.Thread(target=_open_when_listening, args=(url, host, port, not no_browser), daemon=True).start()
    ctx.invoke(serve, port=port, host=host, token=token, allow_hosts=(), allow_origins=(), proxies=())


def _open_when_listening(url: str, host: str, port: int, browse: bool) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1" if host in ("0.0.0.0", "") else host.strip("[]"), port), 1):
                break
        except OSError:
            time.sleep(0.2)
    else:
        return  # the server did not start: serve has said why
    if browse and has_display() and _open(url):
        click.echo(f"Opened {url} in your browser; Ctrl-C stops the server.", err=True)
    else:
        click.echo(f"Open {url} in a browser; Ctrl-C stops the server.", err=True)


def has_display() -> bool:
    """A graphical browser can open: macOS and Windows always; elsewhere only with an X or Wayland display (the
    console browsers Python would pick instead would take over this terminal)."""
    return sys.platform in ("darwin", "win32") or bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def _open(url: str) -> bool:
    import webbrowser

    try:
        return webbrowser.open(url, new=2)
    except webbrowser.Error:
        return False
