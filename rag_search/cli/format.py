"""Human-readable terminal output for hits, collections and status; `--json` bypasses all of this."""

from __future__ import annotations

import json
import re
from typing import Any

import click

from rag_search.records import iso_utc
from rag_search.retrieval import SearchResult
from rag_search.retrieval.snippets import MARK_CLOSE, MARK_OPEN

STALE_LABELS = {"unchecked": "not checked: its source is not visible here"}  # others: "<mark> since indexed"
_MARKED = re.compile(re.escape(MARK_OPEN) + r"(.+?)" + re.escape(MARK_CLOSE))


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2, default=str))


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


def _bold_marks(text: str) -> str:
    return _MARKED.sub(lambda m: click.style(m.group(1), bold=True, fg="yellow"), text)


def render_hits(result: SearchResult, explain: bool = False, floor: float = 0.0) -> str:
    """The hits for a person: those whose relevance reaches `floor`, the weaker ones counted (folded away), and
    "nothing found" when none reaches it."""
    lines: list[str] = []
    if explain:
        lines.append(click.style("explain", dim=True))
        lines.append(f"  mode: {result.request.mode}   chunks in scope: {result.chunks_in_index}")
        skipped = "(skipped: every word is in too many chunks to rank)" if result.keyword_dropped else None
        lines.append(f"  keyword MATCH: {result.keyword_expression or skipped or '(no searchable terms)'}")
        if result.keyword_dropped and result.keyword_expression:
            lines.append(f"  common words left out of MATCH: {', '.join(result.keyword_dropped)}")
        lines.append(f"  vector plan: {result.vector_plan or '(not run)'}")
        if result.exact_terms:
            lines.append(f"  put first (a term only they hold): {', '.join(result.exact_terms)}")
        if result.reranker:
            lines.append(f"  reranker: {result.reranker}" + (f" ({result.rerank_note})" if result.rerank_note else ""))
        lines.append("  timings ms: " + ", ".join(f"{k} {v:.1f}" for k, v in result.timings_ms.items()))
        lines.append("")
    shown = [h for h in result.hits if (h.relevance or 0.0) >= floor]
    weaker = len(result.hits) - len(shown)
    folded = click.style(f"{weaker} weaker match{'es' if weaker != 1 else ''} not shown (relevance below {floor:g}): "
                         "--all lists them.", dim=True) if weaker else ""
    if not shown:
        if result.chunks_in_index == 0:
            lines.append("The index is empty (in this scope). Index a folder first: `local-rag index project NAME PATH`.")
        else:
            lines.append(f"Nothing found for “{result.request.query}”. Try other words, --mode semantic, or fewer "
                         "filters." + (f"\n{folded}" if folded else ""))
        return "\n".join(lines)
    for n, hit in enumerate(shown, start=1):
        title = click.style(hit.title or hit.key, bold=True)
        stale = click.style(f"  [{STALE_LABELS.get(hit.stale, hit.stale + ' since indexed')}]",
                            fg="yellow" if hit.stale == "unchecked" else "red") if hit.stale else ""
        lines.append(f"{n}. {title}  {click.style(hit.collection, fg='cyan')} · {hit.uri}#{hit.chunk_index}{stale}")
        where = []
        if hit.heading_path:
            where.append(" > ".join(hit.heading_path))
        if hit.page is not None:
            where.append(f"p. {hit.page}")
        if hit.ts is not None:
            where.append((iso_utc(hit.ts) or "")[:10])
        if hit.author:
            where.append(hit.author)
        if where:
            lines.append("   " + click.style(" · ".join(where), dim=True))
        lines.append("   " + _bold_marks(hit.snippet))
        if hit.also_matches():
            lines.append("   " + click.style(f"also matches: {', '.join(hit.also_matches())}", dim=True))
        if explain:
            lines.append("   " + click.style(explain_ranks(hit), dim=True))
        lines.append("")
    if folded:
        lines.append(folded)
    return "\n".join(lines).rstrip()


def explain_ranks(hit) -> str:
    """Each retriever's rank of the item and of the shown chunk, the fused and the rerank score."""
    item = "  ".join(f"{name} #{rank}" for name, rank in sorted(hit.item_ranks.items())) or "-"
    chunk = f"vector #{hit.vector_rank or '-'}  keyword #{hit.keyword_rank or '-'}"
    rerank = f"  rerank {hit.rerank_score:.4f}" if hit.rerank_score is not None else ""
    relevance = f" · relevance {hit.relevance:.2f}" if hit.relevance is not None else ""
    return f"item: {item} · chunk: {chunk} · fused {hit.score:.5f}{rerank}{relevance}"


def render_collections(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "No collections yet. Index a folder: `local-rag index project NAME PATH`."
    header = f"{'collection':<24} {'kind':<8} {'items':>7} {'chunks':>8} {'failed':>6}  last indexed"
    lines = [header, "-" * len(header)]
    for c in rows:
        lines.append(
            f"{c['name']:<24} {c['kind']:<8} {c['items']:>7} {c['chunks']:>8} {c['failed']:>6}  {c['last_indexed'] or '-'}"
        )
    return "\n".join(lines)


def render_status(st: dict[str, Any]) -> str:
    emb = st["embedder"]
    lines = [
        f"index:      {st['db_path']} ({human_bytes(st['db_bytes'])}, schema v{st['schema_version']})",
        f"embedder:   {emb['id'] + ' (' + str(emb['dimensions']) + ' dims)' if emb else 'none yet (nothing indexed)'}",
        f"totals:     {st['totals']['collections']} collections, {st['totals']['items']} items, "
        f"{st['totals']['chunks']} chunks, {st['totals']['failed']} failed",
        f"last index: {st['last_indexed'] or 'never'}",
        "",
        render_collections(st["collections"]),
    ]
    if st.get("sources"):
        lines += ["", f"{'source':<32} {'type':<9} {'matched':>8} {'indexed':>8} {'failed':>7} {'chunks':>8}  last scan"]
        for src in st["sources"]:
            name = f"{src['collection']}/{src['source']}"[:32]
            lines.append(f"{name:<32} {src['type']:<9} {src['matched']:>8} {src['indexed']:>8} {src['failed']:>7} "
                         f"{src['chunks']:>8}  {src['scanned_at']}")
            if src["error"]:
                lines.append(f"  unavailable: {src['error']}")
    if st.get("runs_reaped"):
        lines += ["", f"marked {len(st['runs_reaped'])} Dagster run(s) failed: their process was gone (killed?); "
                      "the next index run redoes what they had not written"]
    if st.get("runs"):
        lines += ["", "Dagster runs in progress:"]
        for r in st["runs"]:
            state = "running" if r.get("alive") else ("its process is gone" if r.get("stuck") else "waiting / unknown")
            lines.append(f"  {r['job_name']} {r['run_id'][:8]} {r['status']} ({state}) {r.get('reason') or ''}".rstrip())
    if st["recent_failures"]:
        lines += ["", "recent failures (re-run the index to retry them):"]
        for f in st["recent_failures"]:
            lines.append(f"  {f['collection']}: {f['uri']}  [{f['error_kind']}] {f['message']}")
    return "\n".join(lines)
