"""The asset checks of a collection, evaluated at the end of every run that changes it.

They are declared as check specs of the items asset (so a materialisation evaluates them, even when
some items failed and the run fails) and logged by the sync op too; the UI can also run them alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import dagster as dg

from rag_pipelines.config import CollectionConfig
from rag_pipelines.indexing.scan import scan_collection
from rag_pipelines.wiring.resources import RagResource
from rag_pipelines.wiring.shards import Layout

CHECKS = {
    "fts_rows_match_chunks": "Every chunk is in the FTS index.",
    "vectors_match_chunks": "Every chunk has a vector.",
    "dimensions_match_embedder": "Stored vectors have the embedder's dims.",
    "partitions_match_files": "One partition per item in the sources.",
    "no_failed_items": "Items that could not be indexed (warning).",
}


@dataclass(frozen=True)
class Outcome:
    name: str
    passed: bool
    metadata: dict
    severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR


def check_specs(key: dg.AssetKey) -> list[dg.AssetCheckSpec]:
    return [dg.AssetCheckSpec(name, asset=key, description=text) for name, text in CHECKS.items()]


def evaluate(cfg: CollectionConfig, layout: Layout, shard: int, rag: RagResource, instance: dg.DagsterInstance,
             names: set[str] | None = None) -> list[Outcome]:
    """The named checks (all when None) of one shard's asset, in CHECKS order."""
    return evaluate_shards(cfg, layout, [shard], rag, instance, names)[shard]


def evaluate_shards(cfg: CollectionConfig, layout: Layout, shards: list[int], rag: RagResource,
                    instance: dg.DagsterInstance, names: set[str] | None = None) -> dict[int, list[Outcome]]:
    """The named checks of these shards' assets: the collection-wide ones evaluated once, the partitions one per
    shard (from one scan)."""
    wanted = [n for n in CHECKS if names is None or n in names]
    shared = _evaluate(cfg, rag, [n for n in wanted if n != "partitions_match_files"])
    if "partitions_match_files" not in wanted:
        return {i: shared for i in shards}
    scan = scan_collection(cfg)
    out = {}
    for i in shards:
        part = _partitions(scan, layout, i, instance)
        out[i] = sorted([*shared, part], key=lambda o: list(CHECKS).index(o.name))
    return out


def _evaluate(cfg: CollectionConfig, rag: RagResource, wanted: list[str]) -> list[Outcome]:
    out: list[Outcome] = []
    counted = _counts(cfg, rag) if {"fts_rows_match_chunks", "vectors_match_chunks"} & set(wanted) else {}
    for name in wanted:
        if name == "fts_rows_match_chunks":
            out.append(Outcome(name, counted["fts_rows"] == counted["chunks"], counted))
        elif name == "vectors_match_chunks":
            out.append(Outcome(name, counted["vectors"] == counted["chunks"], counted))
        elif name == "dimensions_match_embedder":
            recorded, emb = rag.store().embedder, rag.embedder()
            ok = recorded is None or recorded == (emb.id, emb.dimensions)
            out.append(Outcome(name, ok, {"index": str(recorded), "configured": f"{emb.id} ({emb.dimensions})"}))
        elif name == "no_failed_items":
            out.append(_failures(cfg, rag))
    return out


def as_results(outcomes: list[Outcome], key: dg.AssetKey) -> list[dg.AssetCheckResult]:
    return [dg.AssetCheckResult(asset_key=key, check_name=o.name, passed=o.passed, metadata=o.metadata,
                                severity=o.severity) for o in outcomes]


def as_evaluations(outcomes: list[Outcome], key: dg.AssetKey) -> list[dg.AssetCheckEvaluation]:
    return [dg.AssetCheckEvaluation(asset_key=key, check_name=o.name, passed=o.passed, metadata=o.metadata,
                                    severity=o.severity) for o in outcomes]


def _counts(cfg: CollectionConfig, rag: RagResource) -> dict[str, int]:
    store = rag.store()
    coll = store.collection_id(cfg.name)
    q = lambda sql: store.conn.execute(sql, (coll,)).fetchone()[0]  # noqa: E731
    return {
        "chunks": q("SELECT count(*) FROM chunks WHERE collection_id = ?"),
        "fts_rows": q("SELECT count(*) FROM chunks WHERE collection_id = ? AND tsv IS NOT NULL" if store.postgres else
                      "SELECT count(*) FROM chunks_fts_docsize WHERE id IN (SELECT id FROM chunks WHERE collection_id = ?)"),
        "vectors": q("SELECT count(*) FROM chunk_vec WHERE collection_id = ?"),
        "failed": q("SELECT count(*) FROM items WHERE collection_id = ? AND status = 'failed'"),
    }


def _partitions(scan, layout: Layout, shard: int, instance: dg.DagsterInstance) -> Outcome:
    """This shard's partitions are exactly the items of the sources whose key hashes to it."""
    in_sources = {k for k in scan.items if layout.index(k) == shard}
    parts = set(instance.get_dynamic_partitions(layout.partitions_name(shard)))
    return Outcome("partitions_match_files", in_sources == parts and not scan.unavailable, {
        "items": len(in_sources), "partitions": len(parts), "missing_partitions": len(in_sources - parts),
        "stale_partitions": len(parts - in_sources), "unavailable_sources": len(scan.unavailable)})


def _failures(cfg: CollectionConfig, rag: RagResource) -> Outcome:
    from rag_search.store import reads

    failed = reads.failures(rag.store(), collection=cfg.name, limit=20)  # the first 20 for the table
    store = rag.store()
    count = store.conn.execute("SELECT count(*) FROM items WHERE collection_id = ? AND status = 'failed'",
                               (store.collection_id(cfg.name),)).fetchone()[0]
    table = "\n".join(f"| `{f.key}` | {f.error_kind} | {f.message} |" for f in failed)
    return Outcome("no_failed_items", not count, {
        "failed": count, "items": dg.MetadataValue.md("| item | kind | reason |\n|---|---|---|\n" + table)},
        dg.AssetCheckSeverity.WARN)
