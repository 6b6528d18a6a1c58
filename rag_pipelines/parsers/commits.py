"""A commit → Document: its message, author and dates, the files it touched and their diff hunks, trimmed.

One section for the message (with the short sha, author and date, so they are searchable), one listing the
files with their +/- counts, then one per file with its hunks: at most MAX_FILE_LINES lines per file and
MAX_COMMIT_LINES per commit. Lock files, generated and vendored files, binary files and huge diffs are only
summarised (their counts). A merge lists what it brought relative to its first parent, without hunks; a
shallow clone's boundary commit has no diff (its parents are missing).
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime, timezone

from rag_search.people import participant
from rag_search.records import Chunk, Document, Section
from rag_search.retrieval.identifiers import code_terms

from rag_pipelines.chunking.prose import ChunkSpec, TokenCounter, chunk_document
from rag_pipelines.sources.gitcli import CommitMeta, RawChange

MAX_FILE_LINES = 40  # patch lines kept per file
MAX_COMMIT_LINES = 200  # patch lines kept per commit (about 8 chunks of MiniLM's window at most)
HUGE_DIFF = 1_000  # changed lines over which a file's diff is only summarised
MAX_FILES_META = 50  # paths listed in metadata.files (filter values)
LOCK_FILES = frozenset({"package-lock.json", "yarn.lock", "pnpm-lock.yaml", "npm-shrinkwrap.json", "Cargo.lock",
                        "poetry.lock", "Pipfile.lock", "uv.lock", "Gemfile.lock", "composer.lock", "go.sum",
                        "mix.lock", "pubspec.lock", "Podfile.lock", "packages.lock.json", "flake.lock",
                        "bun.lockb", "gradle.lockfile", "conda-lock.yml", "pdm.lock"})
STATUS = {"A": "added", "M": "modified", "D": "deleted", "R": "renamed", "C": "copied", "T": "type changed"}
_TRAILER = re.compile(r"^co-authored-by:\s*(.+?)\s*<([^<>]+)>\s*$", re.IGNORECASE | re.MULTILINE)


def summary_reason(change: RawChange, skipped) -> str | None:
    """Why a file's hunks are not shown: lock file, generated/vendored, binary, huge; None to show them."""
    name = change.path.rsplit("/", 1)[-1]
    if name in LOCK_FILES or name.endswith(".lock"):
        return "lock file"
    if change.binary:
        return "binary file"
    if "160000" in (change.old_mode, change.new_mode):
        return "submodule"
    reason = skipped(change.path)
    if reason:
        return reason
    if change.added + change.removed > HUGE_DIFF:
        return "huge diff"
    return None


def commit_document(meta: CommitMeta, changes: list[RawChange], *, shallow: bool = False,
                    skipped=lambda path: None, extra: dict | None = None) -> Document:
    """The Document of one commit; `skipped(path)` names why a path is not code worth showing (or None)."""
    message = meta.message.strip() or "(no message)"
    subject = message.splitlines()[0].strip()[:200]
    author = participant(meta.author_name, meta.author_email)
    committer = participant(meta.committer_name, meta.committer_email)
    merge = len(meta.parents) > 1
    date = meta.author_date or _iso(meta.author_ts)
    head = f"commit {meta.sha[:12]} by {author} on {date}"
    if merge:
        head += f" (merge of {', '.join(p[:12] for p in meta.parents)})"
    body = message.split("\n", 1)[1].strip() if "\n" in message else ""  # the subject is the title
    sections = [Section(f"{body}\n\n{head}" if body else head)]
    if shallow:
        sections.append(Section("The diff of this commit is not available: its parents are not in this shallow "
                                "clone.", ("Files changed",)))
        changes = []
    if changes:
        sections.append(Section(_file_list(changes), ("Files changed",)))
    sections += _hunks(changes, skipped, show=not merge)
    people = [author] + [p for p in [committer, *_co_authors(message)] if p and p != author]
    files = [c.path for c in changes]
    metadata = {"sha": meta.sha, "parents": list(meta.parents), "merge": merge, "committer": committer,
                "commit_date": _iso(meta.commit_ts), "files": files[:MAX_FILES_META],
                "files_changed": len(files), "additions": sum(c.added for c in changes),
                "deletions": sum(c.removed for c in changes), **(extra or {})}
    return Document(title=subject, sections=tuple(sections), ts=meta.author_ts or None, author=author or None,
                    participants=tuple(dict.fromkeys(p for p in people if p)), metadata=metadata)


def commit_chunks(doc: Document, count: TokenCounter, spec: ChunkSpec) -> list[Chunk]:
    """Chunks as any structured document, plus the split identifiers of their diffs as keywords."""
    return [replace(c, keywords=code_terms(c.text)) for c in chunk_document(doc, count, spec)]


def _file_list(changes: list[RawChange]) -> str:
    lines = []
    for c in changes:
        path = f"{c.old_path} → {c.path}" if c.old_path and c.old_path != c.path else c.path
        counts = f" (+{c.added} −{c.removed})" if c.added or c.removed else ""
        lines.append(f"{STATUS.get(c.status, c.status)}: {path}{counts}")
    return "\n".join(lines)


def _hunks(changes: list[RawChange], skipped, show: bool) -> list[Section]:
    out, budget = [], MAX_COMMIT_LINES
    for c in changes:
        reason = summary_reason(c, skipped)
        if not show or not c.patch:
            continue
        if reason:
            out.append(Section(f"{reason}: {STATUS.get(c.status, c.status)}, +{c.added} −{c.removed} lines "
                               "(diff not shown)", (c.path,)))
            continue
        if budget <= 0:
            out.append(Section(f"+{c.added} −{c.removed} lines (diff not shown: the commit's diff is over "
                               f"{MAX_COMMIT_LINES} lines)", (c.path,)))
            continue
        lines = [ln.decode("utf-8", "replace") for ln in c.patch[:min(MAX_FILE_LINES, budget)]]
        budget -= len(lines)
        shown = sum(1 for ln in lines if ln[:1] in "+-")
        if shown < c.added + c.removed:
            lines.append(f"… {c.added + c.removed - shown} more changed lines not shown")
        out.append(Section("\n".join(lines), (c.path,)))
    return out


def _co_authors(message: str) -> list[str]:
    return [participant(name, email) for name, email in _TRAILER.findall(message)]


def _iso(ts: int) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat().replace("+00:00", "Z") if ts else ""
