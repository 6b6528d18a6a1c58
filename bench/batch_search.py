"""Ten queries in one rag_batch_search call vs ten rag_search calls in a row, through a real MCP client (stdio).

    python bench/batch_search.py [--set dendron] [--passes 3] [--mirror /work/.mirror]

The judged set's index (bench/quality_sets.py builds it once) is copied into a temporary LOCAL_RAG_HOME and
served by `local-rag serve`. Each round takes the next ten queries of the set and answers them both ways (which
way goes first alternates, so neither gains from a warmer cache); the hits must be the same. --passes goes over
the set's queries that many times (the machine is shared: more rounds, a steadier median). Prints per-round and
median wall times for the ten queries, client side.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import quality_sets as qs

EXE = str(Path(sys.executable).with_name("local-rag"))


async def measure(home: Path, queries: list[str], rounds: int) -> list[tuple[float, float]]:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=EXE, args=["serve"], env={**os.environ, "LOCAL_RAG_HOME": str(home)})
    with open(os.devnull, "w") as err:
        async with stdio_client(params, errlog=err) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                for q in queries[-5:]:  # warm up (model, caches)
                    await s.call_tool("rag_search", {"query": q})
                out = []
                for r in range(rounds):
                    ten = queries[r * 10:(r + 1) * 10]
                    ways = [singles, batched] if r % 2 == 0 else [batched, singles]
                    got = {}
                    for way in ways:
                        t0 = time.perf_counter()
                        got[way.__name__] = await way(s, ten)
                        got[way.__name__ + "_ms"] = (time.perf_counter() - t0) * 1000
                    for q, a, b in zip(ten, got["singles"], got["batched"]):
                        assert a == b, (r, q, a, b)
                    out.append((got["singles_ms"], got["batched_ms"]))
                return out


async def singles(s, queries: list[str]) -> list[list[str]]:
    return [keys(await s.call_tool("rag_search", {"query": q})) for q in queries]


async def batched(s, queries: list[str]) -> list[list[str]]:
    result = await s.call_tool("rag_batch_search", {"queries": queries})
    assert not result.is_error, result.content[0].text
    return [[h["item_id"] for h in r["hits"]] for r in json.loads(result.content[0].text)["results"]]


def keys(result) -> list[str]:
    assert not result.is_error, result.content[0].text
    return [h["item_id"] for h in json.loads(result.content[0].text)["hits"]]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", default="dendron")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--mirror", default="/work/.mirror")
    args = ap.parse_args()
    bench = qs.load(args.set, args.mirror)
    source = qs.ensure_index(bench)
    queries = list(bench.queries.values())
    per_pass = (len(queries) - 5) // 10
    queries = queries[:per_pass * 10] * args.passes + queries[-5:]
    rounds = per_pass * args.passes
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        for name in ("rag.db", "config.yaml"):
            if (source / name).exists():
                shutil.copy(source / name, home / name)
        times = asyncio.run(measure(home, queries, rounds))
    for n, (one, many) in enumerate(times, start=1):
        print(f"round {n}: 10 x rag_search {one:7.1f} ms   1 x rag_batch_search(10) {many:7.1f} ms")
    one, many = statistics.median(t[0] for t in times), statistics.median(t[1] for t in times)
    print(f"{args.set}, {len(times)} rounds of 10 queries, median: 10 single calls {one:.0f} ms, one batch call "
          f"{many:.0f} ms ({one / many:.2f}x faster, {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
