"""Two users with keys over TLS: the full leak probe through a real server, and what wrong keys can try.

    python bench/user_isolation.py [--per-tool 50] [--guess-seconds 20]

Builds the household index of tests/household.py (ann: ann-family + shared-garden; bob: bob-work +
shared-garden; owner-diary is the owner's) in a temp home, starts `local-rag serve --http --tls`, and runs the
probe set as each user through the MCP SDK's streamable HTTP client, pinning the printed certificate: every
tool `per-tool` times (naming every collection, item id, key, path, tag and metadata value of the index, the
other user's included), every resource, tools/list. Prints calls per tool, leaks (markers of a collection not
granted to the caller in an answer), and the time per call. Then one client sends wrong keys back to back for
`guess-seconds`: how many requests it sent, and how many keys the server actually checked (the others were
answered "try again in N s" without looking at the key).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))

from household import RESOURCES, build_index, leaks, probe_calls, start_server, write_config  # noqa: E402

from rag_search.embedders.builtin import BuiltinEmbedder  # noqa: E402


async def probe(server, key: str, per_tool: int) -> list[tuple[str, dict, str, bool, float]]:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    out = []
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, verify=server.ssl_context(),
                                  timeout=120) as http:
        async with streamable_http_client(server.url, http_client=http) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                for tool, calls in probe_calls(per_tool).items():
                    for args in calls:
                        t0 = time.perf_counter()
                        r = await s.call_tool(tool.split(" ")[0], args)
                        out.append((tool, args, " ".join(c.text for c in r.content), r.is_error,
                                    time.perf_counter() - t0))
                for i in range(per_tool * 2):
                    uri = RESOURCES[i % len(RESOURCES)]
                    t0 = time.perf_counter()
                    text = (await s.read_resource(uri)).contents[0].text
                    out.append((uri, {}, text, False, time.perf_counter() - t0))
                t0 = time.perf_counter()
                listed = (await s.list_tools()).model_dump_json()
                out.append(("tools/list", {}, listed, False, time.perf_counter() - t0))
    return out


def guess(server, seconds: float) -> Counter:
    client = httpx.Client(transport=httpx.HTTPTransport(verify=server.ssl_context(), local_address="127.0.0.9"))
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "guess", "version": "1"}}}
    statuses: Counter = Counter()
    end, n = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        n += 1
        r = client.post(server.url, json=init, headers={"Authorization": f"Bearer lrag_guess{n}",
                                                        "Accept": "application/json, text/event-stream"})
        statuses[r.status_code] += 1
    return statuses


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-tool", type=int, default=50)
    ap.add_argument("--guess-seconds", type=float, default=20.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        build_index(home, BuiltinEmbedder())
        keys = write_config(home)
        server = start_server(home)
        try:
            print(f"server {server.url}, certificate fingerprint {server.fingerprint[:23]}...")
            for user in ("ann", "bob"):
                answers = asyncio.run(probe(server, keys[user], args.per_tool))
                per_kind = Counter("resources" if "://" in a[0] else a[0] for a in answers)
                found = [(a[0], a[1], leaks(a[2], a[1], user)) for a in answers if leaks(a[2], a[1], user)]
                ms = sorted(a[4] * 1000 for a in answers)
                print(f"\n{user}: {len(answers)} calls, {sum(a[3] for a in answers)} answered with an error "
                      f"(the other user's names and ids), leaks: {len(found)}; per call median "
                      f"{ms[len(ms) // 2]:.1f} ms, p95 {ms[int(len(ms) * 0.95)]:.1f} ms")
                print("  calls: " + ", ".join(f"{k} {v}" for k, v in sorted(per_kind.items())))
                for tool, call, what in found[:10]:
                    print(f"  LEAK {tool} {call}: {what}")
            statuses = guess(server, args.guess_seconds)
            sent = sum(statuses.values())
            print(f"\nwrong keys from one address for {args.guess_seconds:.0f} s: {sent} requests "
                  f"({sent / args.guess_seconds:.0f}/s), keys checked {statuses.get(403, 0)} (403), "
                  f"refused unchecked {statuses.get(429, 0)} (429); other statuses: "
                  f"{ {k: v for k, v in statuses.items() if k not in (403, 429)} }")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
