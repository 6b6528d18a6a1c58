"""Glob patterns over relative POSIX paths: `**` any depth, `*` one segment, `?` one character."""

from __future__ import annotations

import re
from functools import lru_cache


@lru_cache(maxsize=512)
def glob_regex(pattern: str) -> re.Pattern:
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
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
    return re.compile("^" + "".join(out) + "$", re.IGNORECASE)


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
