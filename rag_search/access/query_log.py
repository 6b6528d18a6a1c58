"""The query log: one JSON line per MCP tool call (time, user, tool, query, filters, hit keys, latency), rotated.

So a person can see what their assistants asked. It lives in the home (query-log.jsonl, readable only by its
owner: queries are private), is on by default for the HTTP server and off for stdio (`server.query_log`), and
is rotated by size: query-log.jsonl → query-log.1.jsonl → ... → query-log.N.jsonl, the oldest dropped.
A key never appears in it (the user's name does); the query is cut at MAX_QUERY characters.
"""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

FILE = "query-log.jsonl"
MAX_QUERY = 2_000
MAX_KEYS = 200  # hit keys per line
MAX_VALUE = 500  # characters of one logged filter value
HIT_LISTS = ("hits", "items", "similar", "results")


class QueryLog:
    """Appends to query-log.jsonl in `home`; thread-safe; rotates past `max_bytes`, keeping `keep` old files."""

    def __init__(self, home: Path, max_bytes: int = 10 << 20, keep: int = 5):
        self.file, self.max_bytes, self.keep = home / FILE, max_bytes, keep
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, home: Path, server) -> QueryLog:
        return cls(home, int(server.query_log_max_mb * (1 << 20)), server.query_log_files)

    def record(self, user: str, tool: str, arguments: dict[str, Any], answer: Any, started: float,
               error: str | None = None) -> None:
        """One line for a call that started at time.perf_counter() `started` and answered `answer` (its JSON)."""
        ms = round((time.perf_counter() - started) * 1000, 1)
        query = arguments.get("query")
        entry = {"time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"), "user": user,
                 "tool": tool, "query": query[:MAX_QUERY] if isinstance(query, str) else query,
                 "filters": {k: _short(v) for k, v in arguments.items() if k != "query" and v not in (None, [], {})},
                 "hits": hit_keys(answer), "ms": ms}
        if error is not None:
            entry["error"] = error[:300]
        self._append(json.dumps(entry, ensure_ascii=False, default=str) + "\n")

    def _append(self, line: str) -> None:
        data = line.encode("utf-8")
        with self._lock:
            try:
                if self.file.stat().st_size + len(data) > self.max_bytes:
                    self._rotate()
            except FileNotFoundError:
                pass
            fd = os.open(self.file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)

    def _rotate(self) -> None:
        for n in range(self.keep, 0, -1):
            older = self.file.with_name(f"query-log.{n}.jsonl")
            newer = self.file if n == 1 else self.file.with_name(f"query-log.{n - 1}.jsonl")
            if newer.exists():
                os.replace(newer, older)


def hit_keys(answer: Any, depth: int = 0) -> list[str]:
    """The keys of the items a tool's answer lists (search hits, recent or tagged items, similar items)."""
    keys: list[str] = []
    if not isinstance(answer, dict) or depth > 2:
        return keys
    for name in HIT_LISTS:
        entries = answer.get(name)
        for entry in entries if isinstance(entries, list) else ():
            if isinstance(entry, dict) and isinstance(entry.get("key"), str):
                keys.append(entry["key"])
            else:
                keys += hit_keys(entry, depth + 1)  # a batch: one answer per query
    return keys[:MAX_KEYS]


def _short(value: Any) -> Any:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return value if len(text) <= MAX_VALUE else text[:MAX_VALUE] + "..."
