"""Glob patterns over relative POSIX paths: `**` any depth, `*` one segment, `?` one character,
and `(?<name>...)` named captures (for path patterns whose captures become metadata)."""

from __future__ import annotations

import re
from functools import lru_cache


def translate(pattern: str) -> str:
    """A glob as regex source; named captures `(?<name>re)` pass through as `(?P<name>re)`."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("(?<", i):
            depth, j = 0, i
            while j < len(pattern):
                depth += {"(": 1, ")": -1}.get(pattern[j], 0)
                j += 1
                if depth == 0:
                    break
            out.append("(?P<" + pattern[i + 3 : j])
            i = j
        elif pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return "".join(out)


@lru_cache(maxsize=512)
def glob_regex(pattern: str) -> re.Pattern:
    return re.compile("^" + translate(pattern) + "$", re.IGNORECASE)


class GlobSet:
    """Include/exclude decisions for files and whole folders."""

    def __init__(self, include: tuple[str, ...], exclude: tuple[str, ...]):
        self.include = [glob_regex(p) for p in include]
        self.exclude = [glob_regex(p) for p in exclude]

    def wants_file(self, rel: str) -> bool:
        return any(r.match(rel) for r in self.include) and not any(r.match(rel) for r in self.exclude)

    def skips_folder(self, rel_dir: str) -> bool:
        probe = rel_dir + "/"
        return any(r.match(probe) for r in self.exclude)
