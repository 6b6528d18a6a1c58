"""Rankings from RAM (pg/common_words.py) against the ranking statement without a row budget, on a bench copy.

    python bench/pg_held_check.py URL_OF_DATABASE [QUERIES]     # e.g. .../bench_synthetic_100000, 60

Reads the common words, then ranks each bench query (keyword mode's limits, no filter) on both tables with them and,
for every ranking that went to RAM, again by statement with ROW_BUDGET lifted: ids and scores must be equal.
"""
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from query_latency import queries
from rag_search.store import open_store
from rag_search.retrieval.pg.common_words import PgCommonWords
from rag_search.retrieval.pg import keyword as pg_keyword
from rag_search.retrieval.keyword import parse_terms
from rag_search.retrieval.filters import build_where
from rag_search.retrieval import Filters

url = sys.argv[1]
store = open_store(url)
held = PgCommonWords(store)
t0 = time.perf_counter()
with store.lock:
    held.ready()
held.wait()
print("load", round(time.perf_counter() - t0, 1), "s", held.size(), "maxrss MB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
conn = store.conn
n_chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
n_items = conn.execute("SELECT count(*) FROM items").fetchone()[0]
where = build_where(Filters())
same = diff = inram = 0
for q in queries(int(sys.argv[2]) if len(sys.argv) > 2 else 60):
    terms = parse_terms(q)
    for table, n in ((pg_keyword.CHUNKS, n_chunks), (pg_keyword.ITEMS, n_items)):
        limit = 150 if table == pg_keyword.CHUNKS else 50
        calls = []
        orig = held.rank
        def spy(*a, **k):
            r = orig(*a, **k); calls.append(r is not None); return r
        held.rank = spy
        with pg_keyword.index_scans(conn):
            a = pg_keyword.search(conn, terms, where, limit, n, {}, table, held=held)
        held.rank = orig
        if not any(calls):
            continue
        inram += 1
        old = pg_keyword.ROW_BUDGET
        pg_keyword.ROW_BUDGET = 10**7
        with pg_keyword.index_scans(conn):
            b = pg_keyword.search(conn, terms, where, limit, n, {}, table)
        pg_keyword.ROW_BUDGET = old
        if (a.ids, a.scores) == (b.ids, b.scores):
            same += 1
        else:
            diff += 1
            print("DIFF", table, q, a.expression, b.expression, a.ids[:5], b.ids[:5], a.scores[:3], b.scores[:3])
print("in RAM", inram, "identical to unbounded statement", same, "different", diff)
