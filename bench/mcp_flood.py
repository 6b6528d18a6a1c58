"""Small searches from concurrent MCP clients while another client floods the server with 1 MB queries.

    python bench/mcp_flood.py [--chunks 20000] [--clients 8] [--seconds 15] [--query-mb 1] [--rounds 3] [--control]

Serves a synthetic index (bench/out/flood-N.db: Zipf text, random unit vectors, labelled with the builtin
embedder's id, built once) with `local-rag serve --port` (streamable HTTP on 127.0.0.1), then runs `clients`
MCP sessions calling rag_search with short queries for `seconds`, twice per round: alone, and beside one more
session (a process of its own) posting a tools/call with a `query-mb` MB query back to back (encoded once, as
a hostile client would). Prints per phase the small searches answered per second, the big queries answered or
refused (time each, answer size) and the server's CPU time. --control adds a phase whose flooder posts the same
bytes to a path that answers 404: what the traffic alone costs the others on this machine.
The server under test is whatever `local-rag` imports: PYTHONPATH=<a checkout> measures another version.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from synthetic import build, queries

from rag_search.embedders.builtin import BuiltinEmbedder
from rag_search.store import Store

EXE = str(Path(sys.executable).with_name("local-rag"))
OUT = Path(__file__).parent / "out"


def flood_db(chunks: int) -> Path:
    """bench/out/flood-N.db, built once: synthetic chunks with random vectors under the builtin embedder's id."""
    path = OUT / f"flood-{chunks}.db"
    if not path.exists():
        OUT.mkdir(exist_ok=True)
        building = path.with_suffix(".building.db")
        building.unlink(missing_ok=True)
        base = np.random.default_rng(5).standard_normal((500, BuiltinEmbedder.dimensions)).astype(np.float32)
        store = Store.open(building)
        build(store, chunks, base / np.linalg.norm(base, axis=1, keepdims=True), embedder_id=BuiltinEmbedder.id)
        store.close()
        building.rename(path)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(home: Path, port: int) -> subprocess.Popen:
    import httpx

    proc = subprocess.Popen([EXE, "serve", "--port", str(port)], env={**os.environ, "LOCAL_RAG_HOME": str(home)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while True:
        try:
            httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
            return proc
        except httpx.TransportError:
            if time.time() > deadline or proc.poll() is not None:
                raise SystemExit("the server did not start")
            time.sleep(0.2)


async def client(url: str, until: float, make_args, log: list) -> None:
    """One MCP session calling rag_search with make_args() until `until`; logs (seconds, is_error, answer size)."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError

    async with httpx2.AsyncClient(timeout=600) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                while time.perf_counter() < until:
                    t0 = time.perf_counter()
                    try:
                        result = await s.call_tool("rag_search", make_args())
                        failed, size = result.is_error, len(result.content[0].text)
                    except MCPError as exc:  # e.g. an answer over the client's 1 MB limit for one event
                        failed, size = True, len(str(exc))
                    end = time.perf_counter()
                    log.append((end - t0, failed, size, end <= until))


HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "flood", "version": "1"}}}


async def flooder(url: str, until: float, body: bytes, log: list) -> None:
    """A hostile client: one session, then the same encoded tools/call (`body`) posted back to back (encoding
    1 MB of JSON per call would slow the flooder, not the server)."""
    import httpx

    async with httpx.AsyncClient(timeout=600) as http:
        headers = dict(HEADERS)
        if url.endswith("/mcp"):  # else the control: the same posts to a path that answers 404
            init = await http.post(url, json=INIT, headers=HEADERS)
            headers |= {"mcp-session-id": init.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
            await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        while time.perf_counter() < until:
            t0 = time.perf_counter()
            answer = (await http.post(url, content=body, headers=headers)).text
            end = time.perf_counter()
            log.append((end - t0, '"isError":true' in answer, len(answer), end <= until))


def flood_process(url: str, seconds: float, query_mb: float) -> None:
    """`--flood URL SECONDS MB`: the flooder in a process of its own (its work is not the small clients'), printing
    its log as JSON."""
    big = " ".join(queries(50_000))
    big = (big * (int(query_mb * 2**20) // len(big) + 1))[: int(query_mb * 2**20)]
    body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                       "params": {"name": "rag_search", "arguments": {"query": big}}}).encode()
    log: list = []
    asyncio.run(flooder(url, time.perf_counter() + seconds, body, log))
    print(json.dumps(log))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def phase(url: str, clients: int, seconds: float, query_mb: float | None, flood_url: str = "") -> tuple[list, list]:
    small_qs = queries(200)
    small: list = []
    until = time.perf_counter() + seconds
    tasks = [client(url, until, lambda i=i: {"query": small_qs[(i + len(small)) % len(small_qs)]}, small)
             for i in range(clients)]
    proc = None
    if query_mb is not None:
        proc = await asyncio.create_subprocess_exec(sys.executable, __file__, "--flood", flood_url or url, str(seconds),
                                                    str(query_mb), stdout=asyncio.subprocess.PIPE)
        tasks.append(proc.communicate())
    done = await asyncio.gather(*tasks)
    return small, json.loads(done[-1][0]) if proc else []


def describe(label: str, small: list, flood: list, seconds: float) -> None:
    small = [s for s in small if s[3]]  # answered within the phase
    times = sorted(t for t, *_ in small)
    errors = sum(1 for _, e, *_ in small if e)
    p95 = times[max(0, int(0.95 * len(times)) - 1)] * 1000 if times else float("nan")
    print(f"{label}: {len(small)} small searches in {seconds:.0f} s = {len(small) / seconds:.1f}/s, "
          f"{errors} errors, p50 {statistics.median(times) * 1000 if times else float('nan'):.0f} ms, p95 {p95:.0f} ms")
    if flood:
        ft = [t for t, *_ in flood]
        print(f"  big queries: {len(flood)} answered ({sum(1 for _, e, *_ in flood if e)} refused), "
              f"median {statistics.median(ft) * 1000:.0f} ms each, answer {max(n for _, _, n, _ in flood):,} chars max")


def main() -> None:
    if sys.argv[1:2] == ["--flood"]:
        return flood_process(sys.argv[2], float(sys.argv[3]), float(sys.argv[4]))
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=20_000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--query-mb", type=float, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--control", action="store_true",
                    help="a third phase: the same posts to a path that answers 404 (the cost of the traffic alone)")
    args = ap.parse_args()
    db = flood_db(args.chunks)
    home = Path(tempfile.mkdtemp(prefix="mcp-flood-"))
    shutil.copy(db, home / "rag.db")
    port = free_port()
    proc = start_server(home, port)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        asyncio.run(phase(url, 2, 3, None))  # warm up: the model and the caches
        print(f"{args.chunks:,} chunks, {args.clients} clients, streamable HTTP, {args.rounds} rounds "
              "(alternating, so a change in the machine's load hits both)")
        phases = [("alone", None, ""), (f"beside {args.query_mb:g} MB queries", args.query_mb, "")]
        if args.control:
            phases.append((f"beside {args.query_mb:g} MB posts to a 404 path (control)", args.query_mb,
                           url.removesuffix("/mcp") + "/not-mcp"))
        for _ in range(args.rounds):
            for label, mb, flood_url in phases:
                cpu = cpu_seconds(proc.pid)
                describe(label, *asyncio.run(phase(url, args.clients, args.seconds, mb, flood_url)), args.seconds)
                print(f"  server CPU {cpu_seconds(proc.pid) - cpu:.1f} s")
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
