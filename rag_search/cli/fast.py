"""The `local-rag` entry point: `search` goes to a running `local-rag serve` when there is one (stdlib only here,
so nothing heavy is imported first); everything else, and any search the server cannot answer, runs in-process.

LOCAL_RAG_NO_SERVER=1 always searches in-process.
"""

from __future__ import annotations

import gc
import json
import os
import socket
import sys

TIMEOUT_SECONDS = 30.0
ENV_KEYS = ("LOCAL_RAG_HOME", "LOCAL_RAG_DB", "LOCAL_RAG_CONFIG", "DAGSTER_HOME", "OLLAMA_HOST")


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["search"] and not os.environ.get("LOCAL_RAG_NO_SERVER"):
        reply = ask_server(args[1:])
        if reply is not None:
            if "out" in reply:
                sys.stdout.write(reply["out"] + "\n")
                sys.exit(0)
            sys.stderr.write(reply["error"] + "\n")
            sys.exit(reply.get("code", 1))
    from rag_search.cli.main import cli

    try:
        cli()
    finally:
        # One collection now (closing what only cycles still hold, e.g. a server's connections: their WAL is folded
        # in), then none at exit: the interpreter's own shutdown collections walk every object Dagster and the model
        # left behind, 0.25-0.45 s after each command; this costs ~0.1 s.
        gc.collect()
        gc.freeze()


def ask_server(args: list[str]) -> dict | None:
    """The server's answer, or None (no server for this home, or it says to search in-process)."""
    if any(a in ("-h", "--help") for a in args):
        return None
    home = os.path.expanduser(os.environ.get("LOCAL_RAG_HOME") or "~/.local-rag")
    path = os.path.join(home, "search.sock")
    if not os.path.exists(path):
        return None
    request = {"v": 1, "args": args, "env": {k: os.environ[k] for k in ENV_KEYS if k in os.environ},
               "tty": sys.stdout.isatty()}
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(TIMEOUT_SECONDS)
    try:
        conn.connect(path)
        conn.sendall(json.dumps(request).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            block = conn.recv(1 << 16)
            if not block:
                break
            data += block
        reply = json.loads(data)
    except (OSError, ValueError):  # stale socket, server gone mid-answer: search in-process
        return None
    finally:
        conn.close()
    return None if reply.get("fallback") else reply
