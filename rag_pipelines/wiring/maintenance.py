"""Index-wide maintenance asset: re-embed on an embedder change, prune the cache, optimise FTS."""


import dagster as dg

from rag_search.embedders.reembed import reembed
from rag_search.store.cache import prune_cache

from rag_pipelines.wiring.resources import RagResource


@dg.asset(
    key=dg.AssetKey(["index", "embeddings"]),
    group_name="index",
    description="All stored chunks embedded with the configured embedder. Materialise after changing the "
    "embedder: stored chunks are re-embedded (sources are not re-read). Also prunes the embedding cache "
    "and optimises the full-text index.",
    kinds={"sqlite"},
)
def embeddings(context: dg.AssetExecutionContext, rag: RagResource) -> dg.MaterializeResult:
    store, embedder = rag.store(), rag.embedder()
    meta: dict = {"embedder": embedder.id, "dimensions": embedder.dimensions}
    if store.embedder not in (None, (embedder.id, embedder.dimensions)):
        context.log.info(f"re-embedding from {store.embedder[0]} to {embedder.id}")
        meta.update(reembed(store, embedder))
    else:
        store.bind_embedder(embedder.id, embedder.dimensions)
    meta["cache_pruned"] = prune_cache(store, embedder.id)
    if not store.postgres:  # PostgreSQL's GIN indexes keep themselves (autovacuum)
        with store.transaction() as conn:
            conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('optimize')")
    meta["chunks"] = store.conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    return dg.MaterializeResult(metadata=meta)
