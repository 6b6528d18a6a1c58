"""The embedding cache: vectors keyed by (embedder id, text hash), so no text is embedded twice."""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from rag_search.store.database import Store
from rag_search.store.vectors import as_blob, from_blob

_LOOKUP_BATCH = 500


def cached_vectors(store: Store, embedder_id: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    unique = list(dict.fromkeys(hashes))
    with store.lock:
        for i in range(0, len(unique), _LOOKUP_BATCH):
            part = unique[i : i + _LOOKUP_BATCH]
            marks = ",".join("?" * len(part))
            rows = store.conn.execute(
                f"SELECT text_hash, vector FROM embedding_cache WHERE embedder_id = ? AND text_hash IN ({marks})",
                (embedder_id, *part),
            )
            out.update((h, from_blob(v)) for h, v in rows)
    return out


def cache_vectors(store: Store, embedder_id: str, pairs: Iterable[tuple[str, np.ndarray]]) -> None:
    with store.transaction() as conn:
        conn.executemany(
            "INSERT INTO embedding_cache(embedder_id, text_hash, vector) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            ((embedder_id, h, as_blob(v)) for h, v in pairs),
        )


def prune_cache(store: Store, embedder_id: str) -> int:
    """Drop cached vectors of this embedder whose text no chunk holds any more."""
    with store.transaction() as conn:
        cur = conn.execute(
            "DELETE FROM embedding_cache WHERE embedder_id = ? AND text_hash NOT IN "
            "(SELECT content_hash FROM chunks)",
            (embedder_id,),
        )
        return cur.rowcount
