"""A running `local-rag serve` answers `local-rag search` too: a Unix socket in the home, readable only by its owner.

The MCP server already holds the store open and the model loaded, so a search through it skips the CLI's imports
and model load (measured in bench/cli_cold_start.py). The client (cli/fast.py) sends the command's arguments and
the environment that chooses the index; the server parses them with the same click command, runs the same
`search_text`, and returns the text in-process search would print. The server looks at its config file on every
request and answers with the settings in it (an edit is taken in at once, see config.LiveSettings). Whenever it
cannot answer exactly as in-process search would (another database or config file, a config file with an error,
a usage error, --help), it says "fallback" and the client runs the search itself.

One server per home binds the socket (`search.sock`); others leave a live one alone (they check it by connecting
and hanging up, which its server answers with nothing). The file is created with mode 0600 and removed when its
server stops; a stale file (no one listening) is replaced.
"""

from __future__ import annotations

import json
import os
import socket
import socketserver
import threading
from pathlib import Path

import click

from rag_search.config import Paths

SOCKET_NAME = "search.sock"
PROTOCOL = 1
MAX_REQUEST = 1 << 20


def socket_path(home: Path) -> Path:
    return home / SOCKET_NAME


class SearchSocket:
    """Serves `local-rag search` for one home from a server's open App and engine, in a background thread."""

    def __init__(self, app, context_of):
        self.app = app
        self.context_of = context_of  # () -> the server's RagContext, its config file looked at just now
        self.path = socket_path(app.paths.home)
        self.server: socketserver.ThreadingUnixStreamServer | None = None
        self.inode = -1

    def start(self) -> bool:
        """Bind and serve (False: another live server has the socket, or the path cannot hold one)."""
        if _alive(self.path):
            return False
        try:
            self.path.unlink(missing_ok=True)
            old = os.umask(0o177)
            try:
                self.server = _Server(str(self.path), _handler(self))
            finally:
                os.umask(old)
            self.inode = self.path.stat().st_ino
        except OSError:  # a read-only home, a path longer than a socket name may be: in-process search still works
            return False
        threading.Thread(target=self.server.serve_forever, name="search-socket", daemon=True).start()
        return True

    def stop(self) -> None:
        if self.server is None:
            return
        self.server.shutdown()
        self.server.server_close()
        try:
            if self.path.stat().st_ino == self.inode:  # ours, not one a later server bound
                self.path.unlink()
        except OSError:
            pass
        self.server = None

    def answer(self, request: dict) -> dict:
        from rag_search.cli.search_cmd import search, search_text
        from rag_search.errors import RagError

        paths = Paths.from_env(request.get("env", {}))
        mine = self.app.paths
        if request.get("v") != PROTOCOL or (paths.db, paths.config) != (mine.db, mine.config):
            return {"fallback": True}
        ctx = self.context_of()
        if ctx.live is not None and ctx.live.error:
            return {"fallback": True}  # in-process search reports the broken config file
        app = type(self.app)(mine)
        app.__dict__.update(settings=ctx.settings, store=ctx.store, embedder=ctx.embedder)
        args = list(request.get("args", []))
        try:
            cmd = search.make_context("local-rag search", args, obj=app)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            return {"fallback": True}  # usage errors and --help print best in-process
        try:
            text = search_text(app, **cmd.params, engine=ctx.engine, answered_by=f"local-rag serve, pid {os.getpid()}")
        except RagError as exc:
            return {"error": f"error: {exc}", "code": exc.exit_code}
        return {"out": text if request.get("tty") else click.unstyle(text)}


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    request_queue_size = 64  # searches and other servers' checks arriving at once wait, not fail


def _handler(owner: SearchSocket):
    class Handler(socketserver.StreamRequestHandler):
        def handle(self):
            line = self.rfile.readline(MAX_REQUEST)
            if not line.strip():  # a probe (another server checking this one is alive) hung up: nothing to answer
                return
            try:
                reply = owner.answer(json.loads(line))
            except Exception as exc:  # never take the server down; the client falls back
                reply = {"fallback": True, "why": f"{type(exc).__name__}: {exc}"}
            try:
                self.wfile.write(json.dumps(reply, ensure_ascii=False).encode() + b"\n")
                self.wfile.flush()
            except OSError:  # the client left before the answer (Ctrl-C, its timeout): it searches in-process
                pass

    return Handler


def _alive(path: Path) -> bool:
    """Whether a server listens on the socket file: only a refused connection means no one (a stale file); one
    that is busy (its queue full, slow to accept) is alive and keeps its socket."""
    if not path.exists():
        return False
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(0.5)
    try:
        probe.connect(str(path))
        return True
    except (ConnectionRefusedError, FileNotFoundError):
        return False
    except OSError:
        return True
    finally:
        probe.close()
