"""`local-rag search` answered by a running `local-rag serve` on the same home (real processes, a real index):
the same output as in-process, and in-process whenever the server cannot answer exactly that."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import add_doc

from rag_search.store import Store

EXE = str(Path(sys.executable).with_name("local-rag"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory, builtin_embedder):
    home = tmp_path_factory.mktemp("served")
    store = Store.open(home / "rag.db")
    add_doc(store, builtin_embedder, "notes", "k8s.md", "kube-proxy crashed on node-7 after the upgrade",
            tags=("work/ops",), ts=1710000000, author="Ann Ops")
    add_doc(store, builtin_embedder, "notes", "bread.md", "Sourdough bread needs an active starter and time",
            tags=("food",), ts=1600000000)
    add_doc(store, builtin_embedder, "papers", "wal.pdf", "Write-ahead logging lets readers proceed",
            source_type="pdf", page=3)
    store.close()
    env = {**os.environ, "LOCAL_RAG_HOME": str(home)}
    env.pop("LOCAL_RAG_NO_SERVER", None)
    proc = subprocess.Popen([EXE, "serve", "--port", str(free_port())], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    sock = home / "search.sock"
    deadline = time.time() + 60
    while not sock.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert sock.exists(), proc.stderr.read() if proc.poll() is not None else "no socket"
    yield home, env, proc
    proc.terminate()
    proc.wait(timeout=30)
    assert not sock.exists()  # a stopped server removes its socket


def search(env, *args, server=True):
    env = dict(env) if server else {**env, "LOCAL_RAG_NO_SERVER": "1"}
    return subprocess.run([EXE, "search", *args], env=env, capture_output=True, text=True, timeout=120)


def test_the_server_answers_with_the_in_process_output(served):
    home, env, _ = served
    for args in (["readers starter node", "--json"], ["kube proxy", "--tag", "work", "--json"],
                 ["sourdough", "--mode", "keyword"], ["upgrade", "--after", "2024-01", "--no-undated", "--top", "1"]):
        via, local = search(env, *args), search(env, *args, server=False)
        assert via.returncode == local.returncode == 0, (via.stderr, local.stderr)
        assert via.stdout == local.stdout, args
    explained = json.loads(search(env, "kube-proxy", "--json", "--explain").stdout)["explain"]
    assert explained["answered_by"].startswith("local-rag serve, pid")
    assert "answered by this process" in search(env, "kube-proxy", "--explain", server=False).stdout
    assert stat.S_IMODE((home / "search.sock").stat().st_mode) == 0o600


def test_errors_and_usage_read_as_in_process(served):
    _, env, _ = served
    via, local = search(env, "x", "--collection", "nope"), search(env, "x", "--collection", "nope", server=False)
    assert via.returncode == local.returncode != 0 and via.stderr == local.stderr and "No collection" in via.stderr
    bad = search(env, "x", "--mode", "bogus")  # click's own usage message, printed by the in-process fallback
    assert bad.returncode == 2 and "Invalid value for '--mode'" in bad.stderr


def test_the_mcp_servers_bounds_apply_to_local_rag_search(served):
    """The same bounds as rag_search's (rag_search/retrieval/bounds.py), in-process and answered by the server."""
    _, env, _ = served
    for args, why in [(["word " * 500], "The query is 2,500 characters long; at most 2,000"),
                      (["x", "--after", "99999999999999999999d"], "reaches back more than 365,000 days"),
                      (["x", *["--tag", "t"] * 51], "51 tags given; one search combines at most 50"),
                      (["x", "--meta", "k=" + "v" * 300], "300 characters long; filter values have at most 200"),
                      (["x", "--days", str(10**12)], "Invalid value for '--days'")]:
        via, local = cli_search(env, *args), cli_search({**env, "LOCAL_RAG_NO_SERVER": "1"}, *args)
        assert via.exit_code == local.exit_code != 0 and why in local.output, (args[1:], local.output)
        assert via.output == local.output and len(local.output) < 600


def cli_search(env, *args):
    """`local-rag search ARGS` through click's CliRunner (this process; a running server may answer it)."""
    from click.testing import CliRunner

    from rag_search.cli.main import cli

    return CliRunner().invoke(cli, ["search", *args], env=env, catch_exceptions=False)


def test_another_database_or_a_broken_config_is_searched_in_process(served, tmp_path, fake_embedder):
    """An edited config.yaml is taken in by the running server at once; one with an error is left to in-process
    search, which says what is wrong."""
    home, env, _ = served
    other = tmp_path / "other.db"
    store = Store.open(other)
    add_doc(store, fake_embedder, "elsewhere", "only-here.md", "kube-proxy notes of another index")
    store.close()
    out = search({**env, "LOCAL_RAG_DB": str(other)}, "kube-proxy", "--mode", "keyword", "--json", "--explain")
    data = json.loads(out.stdout)
    assert [h["key"] for h in data["hits"]] == ["only-here.md"] and data["explain"]["answered_by"] == "this process"
    config = home / "config.yaml"
    config.write_text("search:\n  top_k: 1\n")
    try:
        data = json.loads(search(env, "kube-proxy", "--json", "--explain").stdout)
        assert data["explain"]["answered_by"].startswith("local-rag serve") and len(data["hits"]) == 1
        config.write_text("search:\n  top_k: many\n")
        broken = search(env, "kube-proxy", "--json", "--explain")
        assert broken.returncode != 0 and "search.top_k" in broken.stderr and not broken.stdout
    finally:
        config.unlink()
    data = json.loads(search(env, "kube-proxy", "--json", "--explain").stdout)
    assert data["explain"]["answered_by"].startswith("local-rag serve") and len(data["hits"]) > 1


def test_a_stale_socket_falls_back_and_is_replaced(tmp_path, builtin_embedder):
    home = tmp_path / "home"
    home.mkdir()
    store = Store.open(home / "rag.db")
    add_doc(store, builtin_embedder, "notes", "k8s.md", "kube-proxy crashed on node-7")
    store.close()
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(home / "search.sock"))  # bound, never listening: what a killed server leaves
    stale.close()
    env = {**os.environ, "LOCAL_RAG_HOME": str(home)}
    out = search(env, "kube-proxy", "--json", "--explain")
    assert out.returncode == 0 and json.loads(out.stdout)["explain"]["answered_by"] == "this process"
    from rag_search.cli.context import App
    from rag_search.cli.search_socket import SearchSocket

    app = App()
    app.paths = type(app.paths).from_env({"LOCAL_RAG_HOME": str(home)})
    server = SearchSocket(app, lambda: None)
    assert server.start()  # the stale file is replaced
    try:
        second = SearchSocket(app, lambda: None)
        assert second.start() is False  # a live server keeps the socket
    finally:
        server.stop()
    assert not (home / "search.sock").exists()
    app.close()


def test_a_second_server_checking_the_socket_leaves_nothing_in_the_first_ones_log(tmp_path, capfd):
    """A second `serve` on the same home checks whether search.sock is alive by connecting and hanging up: the
    first server answered that nothing with a reply to a closed socket, a BrokenPipeError traceback in its log."""
    from rag_search.cli.context import App
    from rag_search.cli.search_socket import SearchSocket

    app = App()
    app.paths = type(app.paths).from_env({"LOCAL_RAG_HOME": str(tmp_path)})
    first = SearchSocket(app, lambda: None)
    assert first.start()
    try:
        for _ in range(20):
            assert SearchSocket(app, lambda: None).start() is False  # what each later `serve` does
        gone = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # a client that leaves before the answer
        gone.connect(str(tmp_path / "search.sock"))
        gone.sendall(b'{"v": 1, "args": ["x"], "env": {}}\n')
        gone.close()
        settle_handlers()
    finally:
        first.stop()
    app.close()
    err = capfd.readouterr().err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def settle_handlers() -> None:
    """Wait until the socket server has handled every queued connection (its handler threads are daemons that
    stop() does not join): no handler thread alive at two checks 0.2 s apart."""
    quiet = 0
    while quiet < 2:
        busy = [t for t in threading.enumerate() if "process_request_thread" in t.name]
        for thread in busy:
            try:
                thread.join(timeout=10)
            except RuntimeError:  # listed between its creation and its start: the next round waits for it
                pass
        quiet = 0 if busy else quiet + 1
        time.sleep(0.2)
