"""The sign bits of every chunk vector held in RAM by a long-running server, for Hamming candidate generation.

sqlite-vec's binary KNN costs grow with k (100k chunks here: 11 ms at k=100, 36 ms at k=300, 145 ms at k=900);
XOR + popcount over the same bits held column by column in numpy takes ~9 ms at 1M for any k (48 bytes a chunk:
48 MB at 1M chunks, plus 24 bytes of ids and row numbers). Loading reads every row of the vector table (about
1 s per 100k chunks), so only processes that answer many queries use it (`local-rag serve`, the search
socket), loading in a background thread while queries keep using sqlite-vec.

The matrix is never served stale: it is valid only while the database is unchanged since it was read — PRAGMA
data_version (commits by other connections) and the connection's own total_changes are compared on every query;
after any write queries go back to sqlite-vec and the matrix is read again in the background.

With the bits, each chunk's item and the row of its float vector in the embedding cache are read (`_Facts`): a
query's candidates then need no lookup of their chunk rows (300 candidates spread over 100k chunks: ~5 ms to read
their items from `chunks`, ~20 ms of CPU to join their vectors through `chunks.content_hash`, 3 ms by cache row).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

from rag_search.retrieval import held_vectors
from rag_search.retrieval.held import HeldInRam
from rag_search.retrieval.vector import nearest_of

# Hamming candidates per wanted one that the query's float vector re-orders by its dot product with their signs
# (bench/query_latency.py prints recall: real-like vectors at 100k, 300 wanted: Hamming alone 0.905, with this
# asymmetric step over 2,000-5,000 Hamming candidates 0.99).
SHORTLIST = 16
PARALLEL_ROWS = 50_000  # from this many rows, distances are computed in two halves at once (100k: ~1.3 -> ~1.0 ms)
PARALLEL_SIGNS = 2_000  # from this many shortlisted rows, their sign scores too
BLOCK = 1 << 15  # rows per block of the distance computation (~300 KB of buffers)
SHORTLIST_MAX = 10_000  # scoring 10k rows' signs costs ~4 ms; wider asks get Hamming order beyond k
# +1/-1 for each bit of each byte value, least significant bit first (sqlite-vec's order)
_BYTE_SIGNS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1, bitorder="little").astype(np.float32) * 2 - 1

_pool_of_two: list = []
_pool_lock = threading.Lock()


def _pool():
    """One worker for the second half of a long distance computation (shared by the process's matrices)."""
    from concurrent.futures import ThreadPoolExecutor

    with _pool_lock:
        if not _pool_of_two:
            _pool_of_two.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix="bit-half"))
        return _pool_of_two[0]


@dataclass
class _Bits:
    """Rows sorted by collection (a collection is a contiguous range), bits stored column by column: XOR +
    popcount over contiguous uint64 columns is ~5x faster than over [rows, 6] (1M rows: ~9 ms vs ~43 ms)."""

    ids: np.ndarray  # chunk id per row
    columns: np.ndarray  # uint64 [dims / 64, rows]: the sign bits as sqlite-vec stores them, one word column each
    ranges: dict[int, tuple[int, int]]  # collection id -> its rows [start, end)
    sorted_ids: np.ndarray  # every chunk id, ascending (ids grow with churn: no array indexed by id)
    sorted_rows: np.ndarray  # the row of each of sorted_ids
    centre: np.ndarray | None = None  # what the signs were taken relative to (store/vectors.py bits_centre)

    def rows_of(self, chunk_ids: np.ndarray) -> np.ndarray:
        """The rows of those chunk ids that are in the matrix."""
        if not len(self.sorted_ids):
            return np.zeros(0, dtype=np.int64)
        pos = np.searchsorted(self.sorted_ids, chunk_ids).clip(0, len(self.sorted_ids) - 1)
        return self.sorted_rows[pos[self.sorted_ids[pos] == chunk_ids]]

    def distances(self, q: np.ndarray, rows: slice | np.ndarray) -> np.ndarray:
        """Hamming distance of the query bits to the given rows (uint16). A long range of rows is done in blocks
        that stay in the CPU's cache, its two halves at once (numpy lets go of the GIL): 1M rows ~27 -> ~10 ms."""
        if isinstance(rows, slice) and rows.stop - rows.start >= PARALLEL_ROWS:
            mid = (rows.start + rows.stop) // 2
            upper = _pool().submit(self._blocks, q, mid, rows.stop)
            return np.concatenate([self._blocks(q, rows.start, mid), upper.result()])
        if isinstance(rows, slice):
            return self._blocks(q, rows.start, rows.stop)
        cols = self.columns
        d = np.bitwise_count(cols[0][rows] ^ q[0]).astype(np.uint16)
        for j in range(1, len(cols)):
            d += np.bitwise_count(cols[j][rows] ^ q[j])
        return d

    def _blocks(self, q: np.ndarray, start: int, stop: int) -> np.ndarray:
        """Distances of rows [start, stop), BLOCK rows at a time; three 64-bit words' counts (at most 192) summed
        in uint8, then into the uint16 result."""
        cols, out = self.columns, np.zeros(stop - start, dtype=np.uint16)
        word, count, part = (np.empty(BLOCK, dtype=t) for t in (np.uint64, np.uint8, np.uint8))
        for lo in range(start, stop, BLOCK):
            hi = min(lo + BLOCK, stop)
            w, c, p, o = word[:hi - lo], count[:hi - lo], part[:hi - lo], out[lo - start:hi - start]
            for first in range(0, len(cols), 3):
                np.bitwise_xor(cols[first, lo:hi], q[first], out=w)
                np.bitwise_count(w, out=p)
                for j in range(first + 1, min(first + 3, len(cols))):
                    np.bitwise_xor(cols[j, lo:hi], q[j], out=w)
                    np.bitwise_count(w, out=c)
                    np.add(p, c, out=p)
                np.add(o, p, out=o)
        return out

    def sign_scores(self, rows: np.ndarray, query: np.ndarray) -> np.ndarray:
        """The query's dot product with each row's signs, by table: per byte position, the 256 possible sums of
        the query's 8 values (unpacking the rows to floats costs ~8x more)."""
        q = query.astype(np.float32).reshape(-1, 8)  # [bytes, 8]
        table = np.ascontiguousarray((_BYTE_SIGNS @ q.T).T).ravel()  # byte position j's 256 sums at j * 256
        codes = np.ascontiguousarray(self.columns[:, rows].T).view(np.uint8)  # [rows, bytes]
        at = codes + (np.arange(codes.shape[1], dtype=np.uint16) << 8)  # flat positions: 2.4x a 2-d gather's speed
        return table.take(at).sum(axis=1, dtype=np.float32)  # take: ~0.7x the time of table[at], the same values


class _SignScores:
    """The query's sign scores of the rows scored so far, by position among the rows searched (BitMatrix.nearest's
    memo for one query): a wider shortlist scores only its new rows. Rows are gathered in ascending order (in the
    distance order they were scattered: 4,800 rows ~1.9 -> ~1.6 ms)."""

    def __init__(self, n: int):
        self.values = np.empty(n, dtype=np.float32)
        self.done = np.zeros(n, dtype=bool)  # untouched pages of both cost nothing

    def of(self, bits: _Bits, positions: np.ndarray, rows: np.ndarray | None, query: np.ndarray) -> np.ndarray:
        need = np.sort(positions[~self.done[positions]])
        if len(need):
            at = need if rows is None else rows[need]
            if len(at) >= PARALLEL_SIGNS:  # two halves at once (numpy lets go of the GIL): 4,800 rows ~1.8 -> ~0.9 ms
                mid = len(at) // 2
                upper = _pool().submit(bits.sign_scores, at[mid:], query)
                self.values[need[:mid]] = bits.sign_scores(at[:mid], query)
                self.values[need[mid:]] = upper.result()
            else:
                self.values[need] = bits.sign_scores(at, query)
            self.done[need] = True
        return self.values[positions]


PASSING_KEPT = 8  # filters whose passing rows are kept (1M chunks: ~1.2 MB and 12-23 ms to compute each)


@dataclass
class _Facts:
    """Per chunk (ascending id): its item, the rowid of its vector in embedding_cache (-1: not cached), its time
    (NaN: undated), its collection; per item (ascending id): its collection."""

    ids: np.ndarray
    items: np.ndarray
    cache_rows: np.ndarray
    ts: np.ndarray
    collections: np.ndarray
    item_ids: np.ndarray
    item_collections: np.ndarray

    def lookup(self, chunk_ids) -> tuple[np.ndarray, np.ndarray]:
        """(positions in `chunk_ids` of the known chunks, their rows in these arrays)."""
        wanted = np.asarray(chunk_ids, dtype=np.int64)
        if not len(self.ids) or not len(wanted):
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        pos = np.searchsorted(self.ids, wanted).clip(0, len(self.ids) - 1)
        known = np.flatnonzero(self.ids[pos] == wanted)
        return known, pos[known]


@dataclass
class DateTest:
    """filters.build_where's date conditions on _Facts.ts (NaN: undated, failing every comparison as NULL does):
    no read of the candidates' chunk rows (1,200 of 100k chunks: ~20 ms)."""

    facts: _Facts
    date_from: int | None
    date_to: int | None
    include_undated: bool

    def _mask(self, ts: np.ndarray) -> np.ndarray:
        ok = np.ones(len(ts), dtype=bool)
        undated = np.isnan(ts) if self.include_undated else np.zeros(len(ts), dtype=bool)
        with np.errstate(invalid="ignore"):
            if self.date_from is not None:
                ok &= undated | (ts >= self.date_from)
            if self.date_to is not None:
                ok &= undated | (ts <= self.date_to)
        if self.date_from is None and self.date_to is None and not self.include_undated:
            ok &= ~np.isnan(ts)
        return ok

    def passing(self, chunk_ids: list[int]) -> set[int]:
        known, rows = self.facts.lookup(chunk_ids)
        wanted = np.asarray(chunk_ids, dtype=np.int64)[known]
        return set(wanted[self._mask(self.facts.ts[rows])].tolist())

    def every(self) -> np.ndarray:
        """The ids of every chunk that passes."""
        return self.facts.ids[self._mask(self.facts.ts)]


class BitMatrix(HeldInRam):
    thread_name = "bit-matrix"

    def __init__(self, store: Any, vectors_mb: float = 0):
        """vectors_mb: also hold every chunk's float vector (held_vectors.py) when they fit in this many MiB."""
        super().__init__(store)
        self.vectors_budget = int(vectors_mb * 2**20)
        self._bits: _Bits | None = None
        self._facts: _Facts | None = None
        self._vectors: held_vectors.HeldVectors | None = None
        self._passing: dict[tuple, dict[str, np.ndarray]] = {}  # rows_passing's, per filter (emptied with new facts)

    def ready(self, stamp: tuple[int, int] | None = None) -> bool:
        """True when the matrix matches the database now (`stamp`: its state, if the caller read it already);
        otherwise starts a (re)load and returns False."""
        stamp = stamp or self.stamp()
        if self._bits is not None and stamp == self._stamp:
            return True
        self._start(stamp)
        return False

    def nearest(self, query_bits: bytes, k: int, collection_ids: tuple[int, ...] = (),
                chunk_ids: np.ndarray | None = None, query: np.ndarray | None = None,
                memo: dict | None = None) -> list[tuple[int, int]]:
        """(chunk id, Hamming distance) of the k nearest rows: among `chunk_ids` if given, else in the collections
        if given, else among all.

        With the float `query`, the SHORTLIST x k nearest by Hamming distance are ordered by the query's dot
        product with their signs (asymmetric: the query keeps its magnitudes) and the best k of those returned;
        else the k nearest by Hamming distance, nearest first.

        memo: a dict kept for one query (its bits and vector): a wider call of the same query and scope (the engine
        widening its candidates) reuses the distances and sign scores computed before instead of repeating them.
        """
        bits = self._bits
        assert bits is not None
        collection_ids = tuple(dict.fromkeys(collection_ids))  # a collection named twice is still searched once
        key = (query_bits, collection_ids) if chunk_ids is None and memo is not None else None
        if key is not None and key in memo:
            rows, dist, signs, cum = memo[key]
        else:
            rows, dist = self._distances(bits, query_bits, collection_ids, chunk_ids)
            signs, cum = _SignScores(len(dist)), _histogram(dist)
            if key is not None:
                memo[key] = rows, dist, signs, cum
        wide = max(k, min(k * SHORTLIST, SHORTLIST_MAX)) if query is not None else k
        part = _smallest(dist, wide, cum)
        order = part[np.lexsort((part, dist[part]))]  # nearest first; equal distance: the lower row first
        picked = order if rows is None else rows[order]
        if query is not None and len(picked) > k:
            centred = query if bits.centre is None else query - bits.centre
            best = _best_first(signs.of(bits, order, rows, centred), k)
            picked, order = picked[best], order[best]
        return list(zip(bits.ids[picked].tolist(), dist[order].tolist()))

    @staticmethod
    def _distances(bits: _Bits, query_bits: bytes, collection_ids: tuple[int, ...],
                   chunk_ids: np.ndarray | None) -> tuple[np.ndarray | None, np.ndarray]:
        """The rows searched (None: all of them, in order) and their Hamming distances to the query."""
        q = np.frombuffer(query_bits, dtype=np.uint8).view(np.uint64)
        if chunk_ids is not None:
            rows = bits.rows_of(np.asarray(chunk_ids, dtype=np.int64))
            if collection_ids:
                keep = np.zeros(len(rows), dtype=bool)
                for c in collection_ids:
                    lo, hi = bits.ranges.get(c, (0, 0))
                    keep |= (rows >= lo) & (rows < hi)
                rows = rows[keep]
            return rows, bits.distances(q, rows)
        if collection_ids:
            spans = [bits.ranges[c] for c in collection_ids if c in bits.ranges]
            rows = np.concatenate([np.arange(lo, hi) for lo, hi in spans]) if spans else np.zeros(0, dtype=np.int64)
            dist = np.concatenate([bits.distances(q, slice(lo, hi)) for lo, hi in spans]) if spans \
                else np.zeros(0, dtype=np.uint16)
            return rows, dist
        return None, bits.distances(q, slice(0, len(bits.ids)))

    def centre_of(self) -> np.ndarray | None:
        """The centre the matrix's signs were taken from (read with them)."""
        assert self._bits is not None
        return self._bits.centre

    def items_of(self, chunk_ids: list[int]) -> dict[int, int]:
        """chunk id -> item id of the given chunks the matrix knows (call only while ready())."""
        facts = self._facts
        assert facts is not None
        known, rows = facts.lookup(chunk_ids)
        return dict(zip(np.asarray(chunk_ids, dtype=np.int64)[known].tolist(), facts.items[rows].tolist()))

    def cache_rows(self, chunk_ids: list[int]) -> dict[int, int]:
        """chunk id -> rowid of its vector in embedding_cache, for the given chunks that have one."""
        facts = self._facts
        assert facts is not None
        known, rows = facts.lookup(chunk_ids)
        cache = facts.cache_rows[rows]
        has = cache >= 0
        return dict(zip(np.asarray(chunk_ids, dtype=np.int64)[known][has].tolist(), cache[has].tolist()))

    def vectors_of(self, chunk_ids: list[int]) -> dict[int, np.ndarray]:
        """chunk id -> its float vector, for the given chunks whose vectors are held in RAM (none if none are)."""
        facts, held = self._facts, self._vectors
        if held is None or facts is None or not chunk_ids:
            return {}
        known, rows = facts.lookup(chunk_ids)
        have, matrix = held.of(rows)
        return dict(zip(np.asarray(chunk_ids, dtype=np.int64)[known[have]].tolist(), matrix))

    def rescore(self, rows: list[tuple[int, Any]], query: np.ndarray, limit: int) -> list[tuple[int, float]] | None:
        """vector.rescore's ranking of these candidates (chunk id first) by the float vectors held, without reading
        them or building a dict of them (300 rows: 1.3 -> 0.7-1 ms); None unless all of them are held. The same rows in
        the same order (ascending id) go into the same product (vector.nearest_of), so the similarities are the same
        to the bit. `query`: the ranking query (store.vectors.ranking_query)."""
        facts, held = self._facts, self._vectors
        if held is None or facts is None:
            return None
        ids = np.unique(np.fromiter((c for c, _ in rows), dtype=np.int64, count=len(rows)))
        known, positions = facts.lookup(ids)
        have, vectors = held.of(positions)
        if len(have) < len(ids):
            return None
        return nearest_of(ids.tolist(), vectors, query, limit)

    @property
    def vectors_held(self) -> int:
        """Bytes of float vectors held (0: none: over the budget, or not read yet)."""
        return self._vectors.nbytes if self._vectors is not None else 0

    def date_test(self, filters: Any) -> DateTest | None:
        """A filter of dates only (collections aside), tested on the chunks' times in RAM; else None."""
        plain = _dates_of(filters)
        if plain is None or plain.is_empty():
            return None
        assert self._facts is not None
        return DateTest(self._facts, plain.date_from, plain.date_to, plain.include_undated)

    def rows_passing(self, filters: Any, collection_ids: tuple[int, ...],
                     facet_ids: Callable[[], np.ndarray] | None = None) -> dict[str, np.ndarray] | None:
        """A filter of dates, collections and facets (tags, metadata) only as, per FTS5 table, a flag per rowid of
        those it lets through (indexed by rowid; a rowid past the end does not pass), from the facts in RAM; None for
        any other filter (and for facets without `facet_ids`: it lists the chunk ids the filter's facets let through,
        called once per filter while the index is unchanged).
        As keyword.keyword_sql applies it: a chunk by its own time, collection and facets; an item by its collection
        alone when only collections are asked for, else when one of its chunks passes."""
        plain = _dates_of(filters, facets=facet_ids is not None)
        facets = _facet_key(filters)
        if plain is None or (plain.is_empty() and not collection_ids and not facets):
            return None
        facts = self._facts
        assert facts is not None
        key = (plain.date_from, plain.date_to, plain.include_undated, tuple(sorted(collection_ids)), facets)
        if key not in self._passing:  # a filter is often asked again (a page's filter while its query is typed)
            ids = facet_ids() if facets and facet_ids is not None else None
            if len(self._passing) >= PASSING_KEPT:
                self._passing.clear()
            self._passing[key] = self._rows_passing(facts, plain, collection_ids, ids)
        return self._passing[key]

    @staticmethod
    def _rows_passing(facts: _Facts, plain: Any, collection_ids: tuple[int, ...],
                      facet_ids: np.ndarray | None = None) -> dict[str, np.ndarray]:
        ok = np.ones(len(facts.ids), dtype=bool)
        if not plain.is_empty():
            ok &= DateTest(facts, plain.date_from, plain.date_to, plain.include_undated)._mask(facts.ts)
        if collection_ids:
            ok &= np.isin(facts.collections, collection_ids)
        if facet_ids is not None:
            ok &= np.isin(facts.ids, facet_ids)
        if plain.is_empty() and facet_ids is None:  # where.item_sql: the item's own collection
            items = facts.item_ids[np.isin(facts.item_collections, collection_ids)]
        else:
            items = facts.items[ok]
        return {"chunks_fts": _flags(facts.ids[ok]), "items_fts": _flags(items)}

    def _load(self, stamp: tuple[int, int]) -> None:
        from rag_search.store.connection import connect
        from rag_search.store.vectors import bits_centre

        try:
            conn = connect(str(self.store.path), readonly=True)
            try:
                conn.execute("BEGIN")  # one snapshot: bits and facts of the same index state
                rows = conn.execute("SELECT chunk_id, collection_id, embedding_bits FROM chunk_vec").fetchall()
                centre = bits_centre(conn)  # a re-embed in between changes the stamp: this load is then dropped
                facts = _read_facts(conn)
                vectors = held_vectors.read(conn, facts.cache_rows, self.vectors_budget)
                conn.execute("COMMIT")
            finally:
                conn.close()
            bits = _matrix(rows)
            bits.centre = centre
            with self.store.lock:
                if not getattr(self.store, "closed", False) and self.stamp() == stamp:  # nothing written meanwhile
                    self._bits, self._facts, self._vectors, self._stamp = bits, facts, vectors, stamp
                    self._passing = {}
        except Exception:  # the database is busy or gone: queries keep using sqlite-vec
            pass
        finally:
            with self._lock:
                self._loading = False


def _read_facts(conn: Any) -> _Facts:
    """Each chunk's item, cache row, time and collection; each item's collection. Of several cached vectors of
    equivalent embedders (store/vectors.py EQUIVALENT) the one fetch_vectors' join returns last is taken: the greatest
    embedder id."""
    from rag_search.store.vectors import equal_ids, recorded_embedder

    recorded = recorded_embedder(conn)
    ids = equal_ids(recorded[0]) if recorded else []
    marks = ",".join("?" * len(ids)) or "NULL"
    rows = conn.execute(
        f"SELECT c.id, c.item_id, coalesce((SELECT e.id FROM embedding_cache e WHERE e.embedder_id IN ({marks}) "
        "AND e.text_hash = c.content_hash ORDER BY e.embedder_id DESC LIMIT 1), -1), c.ts, c.collection_id "
        "FROM chunks c ORDER BY c.id",
        ids).fetchall()
    table = np.array([r[:3] + (r[4],) for r in rows], dtype=np.int64).reshape(-1, 4)
    ts = np.array([np.nan if r[3] is None else r[3] for r in rows], dtype=np.float64)
    items = np.array(conn.execute("SELECT id, collection_id FROM items ORDER BY id").fetchall(),
                     dtype=np.int64).reshape(-1, 2)
    return _Facts(np.ascontiguousarray(table[:, 0]), np.ascontiguousarray(table[:, 1]),
                  np.ascontiguousarray(table[:, 2]), ts, np.ascontiguousarray(table[:, 3]),
                  np.ascontiguousarray(items[:, 0]), np.ascontiguousarray(items[:, 1]))


def _dates_of(filters: Any, facets: bool = False) -> Any:
    """The filters without their collections (and with `facets`, without their tags and metadata) when nothing but
    dates is left (maybe nothing at all), else None."""
    plain = filters.without_collections()
    if facets:
        plain = replace(plain, tags=(), metadata={})
    dates = type(plain)(date_from=plain.date_from, date_to=plain.date_to, include_undated=plain.include_undated)
    return plain if plain == dates else None


def _facet_key(filters: Any) -> tuple:
    """What a filter asks of the chunks' facets (tags, metadata), hashable; () for nothing."""
    if not filters.tags and not filters.metadata:
        return ()
    return filters.tags, repr(sorted(filters.metadata.items()))


def _flags(ids: np.ndarray) -> np.ndarray:
    """A flag per id up to the largest of `ids`, set for those."""
    flags = np.zeros(int(ids.max(initial=-1)) + 1, dtype=bool)
    flags[ids] = True
    return flags


def _histogram(dist: np.ndarray) -> np.ndarray:
    """How many distances are at most each value (_smallest's; kept for a query's wider round)."""
    return np.cumsum(np.bincount(dist))


def _smallest(dist: np.ndarray, k: int, cum: np.ndarray | None = None) -> np.ndarray:
    """Positions of the k smallest distances, ascending (ties at the boundary: the lower positions). Distances are
    small integers, so a histogram (`cum`: _histogram's, if computed already) finds the boundary (~3x faster than
    argpartition over 1M values), and one pass lists the positions up to it."""
    if len(dist) <= k:
        return np.arange(len(dist))
    cum = _histogram(dist) if cum is None else cum
    edge = int(np.searchsorted(cum, k))  # the distance at which the k-th smallest lies
    near = np.flatnonzero(dist <= edge)
    at = dist[near] == edge
    room = k - (int(cum[edge - 1]) if edge else 0)  # how many of those at the edge fit
    return near[~at | (np.cumsum(at) <= room)]


def _best_first(scores: np.ndarray, k: int) -> np.ndarray:
    """np.argsort(-scores, kind="stable")[:k] (the k highest, highest first; equal scores: the lower position first)
    without sorting them all: the k-th highest found by partition, those above it and the first of those equal to it
    sorted (4,800 scores, k 300: 0.31 -> 0.05 ms; 8,000, k 500, a widened round: 0.65 -> 0.07)."""
    neg = -scores
    if len(neg) <= k:
        return np.argsort(neg, kind="stable")
    edge = np.partition(neg, k - 1)[k - 1]
    above = np.flatnonzero(neg < edge)
    picked = np.sort(np.concatenate([above, np.flatnonzero(neg == edge)[:k - len(above)]]))
    return picked[np.argsort(neg[picked], kind="stable")]


def _matrix(rows: list) -> _Bits:
    n = len(rows)
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=n)
    colls = np.fromiter((r[1] for r in rows), dtype=np.int64, count=n)
    raw = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.uint8)
    words = raw.reshape(n, -1).view(np.uint64) if n else np.zeros((0, 1), dtype=np.uint64)
    order = np.lexsort((ids, colls))
    ids, colls = ids[order], colls[order]
    columns = np.ascontiguousarray(words[order].T)
    ranges: dict[int, tuple[int, int]] = {}
    if n:
        starts = np.flatnonzero(np.r_[True, colls[1:] != colls[:-1]])
        ends = np.r_[starts[1:], n]
        ranges = {int(colls[a]): (int(a), int(b)) for a, b in zip(starts, ends)}
    by_id = np.argsort(ids, kind="stable")
    return _Bits(ids, columns, ranges, ids[by_id], by_id)
