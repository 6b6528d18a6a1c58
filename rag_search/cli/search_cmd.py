"""`local-rag search`: parse options → one SearchRequest → print hits. Never imports Dagster."""

from __future__ import annotations

import click

from rag_search.retrieval.bounds import MAX_DAYS, MAX_TOP_K, check_query
from rag_search.retrieval.filters import check_filters
from rag_search.cli.context import App, pass_app
from rag_search.cli.format import render_hits
from rag_search.errors import QueryError
from rag_search.people import PeopleDirectory, resolve_filters
from rag_search.retrieval import Filters, SearchRequest, parse_date
from rag_search.retrieval import search_engine
from rag_search.retrieval.engine import MODES
from rag_search.retrieval.relevance import at_least, search_with_relevance
from rag_search.retrieval.stale import mark_hits


def parse_meta(pairs: tuple[str, ...]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for pair in pairs:
        if "=" not in pair:
            raise QueryError(f"--meta takes KEY=VALUE (got '{pair}'), e.g. --meta area=work.")
        key, value = pair.split("=", 1)
        out.setdefault(key.strip(), []).append(value.strip())
    return out


class SearchCommand(click.Command):
    """A query that starts with '-' reads as an option: the error says to put `--` before it."""

    def parse_args(self, ctx, args):
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:
            exc.message += (f". If it is part of your query, put -- before the query: "
                            f"local-rag search [OPTIONS] -- {exc.option_name} ...")
            raise


@click.command("search", cls=SearchCommand)
@click.argument("query", nargs=-1, required=True)
@click.option("--collection", "-c", "collections", multiple=True, help="Only this collection (repeatable).")
@click.option("--type", "source_types", multiple=True, help="Only this source type, e.g. markdown, pdf (repeatable).")
@click.option("--after", "--since", "after",
              help="On or after: YYYY, YYYY-MM, YYYY-MM-DD, ISO time, 7d/2w/3m/1y, '3 days ago', today, "
                   "yesterday, 'last week', 'this month'... (the item's own date: sent, event start, recorded).")
@click.option("--before", "--until", "before", help="On or before this date (same forms as --after).")
@click.option("--days", type=click.IntRange(1, MAX_DAYS), help="Within the last N days (same as --after Nd).")
@click.option("--no-undated", is_flag=True, help="With --after/--before, also drop items that have no date.")
@click.option("--from", "author", help="Who wrote it: author or sender contains this text, or wrote in the chat window (people-file names too).")
@click.option("--with", "participants", multiple=True,
              help="With this person: a name, address, phone number or chat id; a people file (config `people`) "
                   "maps all of a person's ids to one name (repeatable, all must match).")
@click.option("--tag", "tags", multiple=True, help="Has this tag; #a also matches #a/b (repeatable, all must match).")
@click.option("--path-prefix", help="Path or URI starts with this (absolute, ~, or relative to the source root).")
@click.option("--meta", "meta", multiple=True, help="Metadata KEY=VALUE (repeatable; same key = any of the values).")
@click.option("--top", "top_k", type=click.IntRange(1, MAX_TOP_K), help="How many hits (default from config, 10).")
@click.option("--mode", type=click.Choice(MODES), default="hybrid", show_default=True)
@click.option("--min-score", type=click.FloatRange(0, 1),
              help="Leave out hits whose relevance (0..1, the same scale for every query) is below this, e.g. 0.5.")
@click.option("--all", "show_all", is_flag=True,
              help="Also list the weaker matches (relevance below search.weaker_below), which are otherwise folded "
                   "away; --json always lists every hit.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--explain", is_flag=True, help="Show per-retriever ranks, the FTS expression and timings.")
@click.option("--chunks", "chunk_hits", is_flag=True,
              help="One hit per matching chunk (several per item) instead of one per item.")
@click.option("--rerank/--no-rerank", default=None, help="Rerank the fused top items (default: config search.reranker).")
@pass_app
def search(app: App, **params):
    """Search the index: keyword + semantic, fused (quote "exact phrases"; word* for prefixes)."""
    click.echo(search_text(app, **params))


def search_text(app: App, query, collections, source_types, after, before, days, no_undated, author, participants,
                tags, path_prefix, meta, top_k, mode, as_json, explain, chunk_hits, rerank, min_score=None,
                show_all=False, engine=None, answered_by: str = "this process") -> str:
    """What `local-rag search` prints (also answered by a running `local-rag serve`, see search_socket.py)."""
    import json

    if days and after:
        raise QueryError("Give --days or --after, not both (--days 7 is --after 7d).")
    after = f"{days}d" if days else after
    filters = Filters(
        collections=collections, source_types=source_types, date_from=parse_date(after),
        date_to=parse_date(before, end=True), include_undated=not no_undated, author=author,
        participants=participants, tags=tags, path_prefix=path_prefix, metadata=parse_meta(meta),
    )
    query = check_query(" ".join(query))
    filters = resolve_filters(check_filters(filters), PeopleDirectory.from_settings(app.settings))
    if engine is None or mode == "keyword":
        engine = search_engine(app.store, None if mode == "keyword" else app.embedder, app.settings.search)
    result = search_with_relevance(engine, SearchRequest(query, top_k=top_k, mode=mode, filters=filters,
                                                         chunks=chunk_hits, rerank=rerank))
    result.hits = mark_hits(app.store, at_least(result.hits, min_score))
    if as_json:
        payload = {"query": result.request.query, "mode": mode, "hits": [h.to_dict() for h in result.hits]}
        if explain:
            payload["explain"] = {
                "keyword_expression": result.keyword_expression,
                "keyword_dropped": result.keyword_dropped,
                "vector_plan": result.vector_plan,
                "chunks_in_scope": result.chunks_in_index,
                "exact_terms": result.exact_terms,
                "reranker": result.reranker,
                "rerank_note": result.rerank_note,
                "timings_ms": result.timings_ms,
                "answered_by": answered_by,
            }
        return json.dumps(payload, indent=2, ensure_ascii=False, default=str)
    text = render_hits(result, explain, floor=0.0 if show_all else engine.settings.weaker_below)
    return text + (click.style(f"\n(answered by {answered_by})", dim=True) if explain else "")
