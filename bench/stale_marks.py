"""What a search pays for stale-result marks: one keyed read of the hits' item rows + one stat() per hit.

    python bench/stale_marks.py [--items 20000] [--trials 2000]

Writes --items small Markdown files and indexes them (one chunk each, the tests' hash embedder: vectors do not
matter here) in a temporary home; edits 10% and deletes 5% of them; then times rag_search.retrieval.stale.stale_marks for 10
random items at a time (what one page of hits costs). Prints p50 / p95 / max in ms and the marks found.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))

from fakes import HashEmbedder  # noqa: E402

from rag_search.store.item_writer import ParsedItem, write_items  # noqa: E402
from rag_search.records import Chunk, Fingerprint, ItemRef  # noqa: E402
from rag_search.retrieval.stale import stale_marks  # noqa: E402
from rag_search.store import Store, writes  # noqa: E402


def build(root: Path, n: int) -> Store:
    docs = root / "docs"
    docs.mkdir()
    store = Store.open(root / "rag.db")
    writes.ensure_collection(store, "notes")
    items = []
    for i in range(n):
        path = docs / f"note-{i:06d}.md"
        path.write_text(f"# Note {i}\nSome text of note {i}.\n", encoding="utf-8")
        st = path.stat()
        items.append(ParsedItem(ItemRef("notes", path.name, str(path), "markdown"),
                                Fingerprint(st.st_size, st.st_mtime_ns, "x"), path.stem,
                                [Chunk(index=0, text=f"Some text of note {i}.", title=path.stem)]))
    write_items(store, HashEmbedder(), items)
    rng = random.Random(7)
    for path in rng.sample(sorted(docs.iterdir()), n // 10):
        with path.open("a") as f:
            f.write("edited\n")
    for path in rng.sample(sorted(docs.iterdir()), n // 20):
        path.unlink()
    return store


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=20_000)
    ap.add_argument("--trials", type=int, default=2_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = build(Path(tmp), args.items)
        ids = [r[0] for r in store.conn.execute("SELECT id FROM items")]
        rng = random.Random(1)
        times, marks = [], 0
        for _ in range(args.trials):
            page = rng.sample(ids, 10)
            t0 = time.perf_counter()
            found = stale_marks(store, page)
            times.append((time.perf_counter() - t0) * 1000)
            marks += len(found)
        times.sort()
        print(f"stale marks for 10 hits, {args.items:,} indexed files ({os.cpu_count()} cores), {args.trials} pages: "
              f"p50 {statistics.median(times):.3f} ms, p95 {times[int(len(times) * 0.95)]:.3f} ms, "
              f"max {times[-1]:.3f} ms; {marks / args.trials:.2f} marked per page (15% of files edited or deleted)")
        store.close()


if __name__ == "__main__":
    main()
