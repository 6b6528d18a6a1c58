"""rag_search latency through the MCP server (a real client over stdio) on a 100k-chunk index.

    python bench/mcp_latency.py [--chunks 100000] [--queries 50]

Reuses bench/out/synthetic-N.db from query_latency.py (built there if missing), copied into a temporary
LOCAL_RAG_HOME and labelled with the builtin embedder's id (same 384 dims), so `local-rag serve` accepts it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from query_latency import OUT, open_db
from synthetic import real_embeddings
from synthetic import queries

from rag_search.embedders.builtin import BuiltinEmbedder
from rag_search.store.connection import connect

EXE = str(Path(sys.executable).with_name("local-rag"))


async def measure(home: Path, n_queries: int) -> list[float]:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=EXE, args=["serve"], env={**os.environ, "LOCAL_RAG_HOME": str(home)})
    with open(os.devnull, "w") as err:
        async with stdio_client(params, errlog=err) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                qs = queries(n_queries + 10)
                for q in qs[:10]:  # warm up
                    await session.call_tool("rag_search", {"query": q})
                times = []
                for q in qs[10:]:
                    t0 = time.perf_counter()
                    result = await session.call_tool("rag_search", {"query": q})
                    times.append((time.perf_counter() - t0) * 1000)
                    assert not result.is_error, result.content[0].text
                return sorted(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=50)
    args = ap.parse_args()
    open_db(args.chunks, real_embeddings(OUT)[0]).close()
    home = Path(tempfile.mkdtemp())
    shutil.copy(OUT / f"synthetic-v3-{args.chunks}.db", home / "rag.db")
    conn = connect(home / "rag.db")
    conn.execute("UPDATE meta SET value = ? WHERE key = 'embedder_id'", (BuiltinEmbedder.id,))
    conn.close()
    times = asyncio.run(measure(home, args.queries))
    p95 = times[max(0, int(0.95 * len(times)) - 1)]
    print(f"rag_search through `local-rag serve` (stdio, real MCP client), {args.chunks:,} chunks, {len(times)} "
          f"queries: p50 {statistics.median(times):.0f} ms, p95 {p95:.0f} ms, max {times[-1]:.0f} ms")


if __name__ == "__main__":
    main()
