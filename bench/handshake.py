"""How long an MCP client waits for `local-rag serve` (stdio): to the initialize answer, and to the first search.

    python bench/handshake.py [--runs 3] [--cold]

Spawns `local-rag serve` on a small index the way Claude does and times, from the spawn, the answer to
`initialize` (the handshake) and to a first rag_search. --cold points the model cache at an empty folder, so
the fast model is derived first (what the first start on a machine does, several seconds). The server under
test is whatever `local-rag` imports: PYTHONPATH=<a checkout> measures another version.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))

from household import EXE, build_index  # noqa: E402

from rag_search.embedders.builtin import BuiltinEmbedder  # noqa: E402


async def once(home: Path, cache: str | None) -> tuple[float, float]:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    env = {**os.environ, "LOCAL_RAG_HOME": str(home)} | ({"LOCAL_RAG_MODEL_CACHE": cache} if cache else {})
    t0 = time.perf_counter()
    with open(os.devnull, "w") as errlog:
        async with stdio_client(StdioServerParameters(command=EXE, args=["serve"], env=env), errlog=errlog) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                handshake = time.perf_counter() - t0
                await s.call_tool("rag_search", {"query": "tomatoes in the garden"})
                return handshake, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cold", action="store_true", help="an empty model cache: the model is derived first")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        build_index(home, BuiltinEmbedder())
        times = []
        for i in range(args.runs):
            cache = str(Path(tmp) / f"cache{i}") if args.cold else None
            times.append(asyncio.run(once(home, cache)))
        hs, first = zip(*times)
        print(f"{'cold' if args.cold else 'warm'} model cache, {args.runs} runs: initialize answered after "
              f"{statistics.median(hs):.2f} s (median; {', '.join(f'{t:.2f}' for t in hs)}), first search after "
              f"{statistics.median(first):.2f} s ({', '.join(f'{t:.2f}' for t in first)})")


if __name__ == "__main__":
    main()
