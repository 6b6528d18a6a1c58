"""`.ragignore` files: gitignore patterns in any folder of a folder source, applied like `exclude`.

Matched as git matches .gitignore (tests/test_ragignore.py compares with `git ls-files` on a table of patterns):
a pattern without a slash (besides a trailing one) matches a name at any depth below its file's folder, one with
a slash is anchored there; a trailing `/` matches folders only; `*` `?` `[a-z]` `[!a]` never match `/`; `**`
as a whole part matches any depth (`**/x`, `a/**/b`, `a/**`); `!` re-includes what an earlier pattern excluded,
and the last matching pattern wins, those of a deeper file before those above it; `#` starts a comment; `\\`
escapes the next character; trailing spaces are dropped unless escaped. As in git, nothing inside an excluded
folder can be re-included (the walk never enters it), and matching is case-sensitive.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

RAGIGNORE = ".ragignore"
MAX_BYTES = 256 * 1024  # a real ignore file is a few KB; past this it is refused, not half-read
MAX_RULES = 2_000
_CLASSES = {"alnum": "a-zA-Z0-9", "alpha": "a-zA-Z", "blank": " \\t", "cntrl": "\\x00-\\x1f\\x7f",
            "digit": "0-9", "graph": "!-~", "lower": "a-z", "print": " -~", "punct": "!-/:-@\\[-`{-~",
            "space": " \\t\\n\\r\\f\\v", "upper": "A-Z", "xdigit": "0-9a-fA-F"}


class IgnoreFileError(ValueError):
    """A .ragignore that cannot be used (too large, too many patterns)."""


@dataclass(frozen=True)
class Rules:
    """The patterns of one .ragignore: `base` is its folder relative to the source's root ('' or 'a/b/')."""

    base: str
    patterns: tuple[tuple[re.Pattern, bool, bool], ...]  # (regex over the path below base, negated, folders only)
    any_file: re.Pattern  # does any pattern that applies to files match? (one regex: the common miss is cheap)
    any_dir: re.Pattern

    def verdict(self, rel: str, is_dir: bool) -> bool | None:
        """True: ignored, False: re-included (`!`), None: no pattern of this file matches `rel`."""
        below = rel[len(self.base):]
        if not (self.any_dir if is_dir else self.any_file).fullmatch(below):
            return None
        for regex, negated, dir_only in reversed(self.patterns):
            if (is_dir or not dir_only) and regex.fullmatch(below):
                return not negated
        return None


def parse(text: str, base: str = "") -> Rules:
    """The rules of a .ragignore's text (IgnoreFileError past MAX_RULES patterns)."""
    patterns = [p for p in (_pattern(line) for line in text.split("\n")) if p is not None]
    if len(patterns) > MAX_RULES:
        raise IgnoreFileError(f"it has {len(patterns):,} patterns; at most {MAX_RULES:,} are read")
    files = [p[0].pattern for p in patterns if not p[2]] or ["(?!)"]
    dirs = [p[0].pattern for p in patterns] or ["(?!)"]
    return Rules(base, tuple(patterns), _compile("|".join(f"(?:{r})" for r in files)),
                 _compile("|".join(f"(?:{r})" for r in dirs)))


def load(file: Path, base: str = "") -> Rules:
    """The rules of a .ragignore file (OSError if it cannot be read, IgnoreFileError if it is not usable)."""
    fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK)  # a named pipe called .ragignore must not block the scan
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise IgnoreFileError("it is not a file")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(MAX_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        raise IgnoreFileError(f"it is larger than {MAX_BYTES:,} bytes")
    return parse(data.decode("utf-8", errors="replace"), base)


def problem(file: Path, exc: Exception) -> tuple[str, str]:
    """The failed item a .ragignore that cannot be used becomes; its folder is not indexed meanwhile."""
    why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return ("unreadable" if isinstance(exc, OSError) else "invalid",
            f"cannot use {file} ({why}), so nothing in its folder is indexed (it could name files you want kept "
            "out); fix or remove the file")


class Cache:
    """.ragignore rules by folder, read again when a file changes: for the watcher, which asks about each event."""

    def __init__(self):
        self._rules: dict[Path, tuple[tuple[int, int, int], Rules | None]] = {}

    def ignores(self, root: Path, rel: str) -> bool:
        """Whether the .ragignore files from `root` down to the path `rel` ignore it or a folder on its way."""
        parts = rel.split("/")
        stack: tuple[Rules, ...] = ()
        for depth in range(len(parts)):
            base = "".join(f"{p}/" for p in parts[:depth])
            rules = self._folder(root / base, base)
            stack += (rules,) if rules is not None else ()
            if ignored(stack, "/".join(parts[:depth + 1]), depth < len(parts) - 1):
                return True
        return False

    def _folder(self, folder: Path, base: str) -> Rules | None:
        file = folder / RAGIGNORE
        try:
            st = file.stat()
        except OSError:
            return None
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if file not in self._rules or self._rules[file][0] != stamp:
            try:
                rules = load(file, base)
            except (OSError, IgnoreFileError):
                rules = parse("*", base)  # as the scan: a folder whose .ragignore cannot be used is not indexed
            self._rules[file] = (stamp, rules)
        return self._rules[file][1]


def ignored(stack: tuple[Rules, ...], rel: str, is_dir: bool) -> bool:
    """Whether the .ragignore files on the way to `rel` (root first) ignore it: the deepest that has a say wins."""
    for rules in reversed(stack):
        verdict = rules.verdict(rel, is_dir)
        if verdict is not None:
            return verdict
    return False


def _pattern(line: str) -> tuple[re.Pattern, bool, bool] | None:
    line = _trim(line.removesuffix("\r"))
    if not line or line.startswith("#"):
        return None
    negated = line.startswith("!")
    line = line[1:] if negated else line
    dir_only = line.endswith("/")
    line = line[:-1] if dir_only else line
    if not line:
        return None
    anchored = "/" in line
    body = translate(line.removeprefix("/"))
    return _compile(body if anchored else f"(?:.*/)?{body}"), negated, dir_only


def _trim(line: str) -> str:
    """Drop trailing spaces, except one escaped with a backslash (as git's trim_trailing_spaces)."""
    last_space, i = None, 0
    while i < len(line):
        if line[i] == " ":
            last_space = i if last_space is None else last_space
        else:
            i += line[i] == "\\"
            last_space = None
        i += 1
    return line if last_space is None else line[:last_space]


def translate(pattern: str) -> str:
    """A gitignore pattern (without `!`, trailing `/` or leading `/`) as regex source over a relative path."""
    parts = pattern.split("/")
    out: list[str] = []
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part == "**":
            out.append(".*" if last else "(?:.*/)?")
        else:
            out.append(_part(part) + ("" if last else "/"))
    return "".join(out)


def _part(part: str) -> str:
    """One path part: `*`, `?`, `[...]` and `\\` escapes (a `**` inside a part is a `*`)."""
    out, i = [], 0
    while i < len(part):
        ch = part[i]
        if ch == "*":
            out.append("[^/]*")
            while i + 1 < len(part) and part[i + 1] == "*":
                i += 1
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            cls, i = _bracket(part, i)
            out.append(cls)
        elif ch == "\\":
            if i + 1 == len(part):
                return "(?!)"  # a pattern ending in a lone backslash matches nothing (git)
            i += 1
            out.append(re.escape(part[i]))
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def _bracket(part: str, start: int) -> tuple[str, int]:
    """`[...]` from part[start] as a regex class that never matches `/`; (source, index of its `]`)."""
    i = start + 1
    negated = i < len(part) and part[i] in "!^"
    i += negated
    items, first = [], True
    while i < len(part) and (first or part[i] != "]"):
        first = False
        if part.startswith("[:", i) and part.find(":]", i + 2) > 0:
            end = part.find(":]", i + 2)
            items.append(_CLASSES.get(part[i + 2:end], ""))
            i = end + 2
            continue
        ch, i = _class_char(part, i)
        if ch is None:
            return "(?!)", len(part)
        if i + 1 < len(part) and part[i] == "-" and part[i + 1] != "]":
            hi, i = _class_char(part, i + 1)
            if hi is None:
                return "(?!)", len(part)
            items.append(f"{re.escape(ch)}-{re.escape(hi)}" if ch <= hi else "")
        else:
            items.append(re.escape(ch))
    if i >= len(part):
        return "(?!)", len(part)  # unterminated: the whole pattern matches nothing (git's wildmatch aborts)
    body = "".join(items)
    return (f"[^/{body}]" if negated else f"(?:(?!/)[{body}])" if body else "(?!)"), i


def _class_char(part: str, i: int) -> tuple[str | None, int]:
    """The character at part[i] inside a bracket (a backslash escapes), and the index after it."""
    if part[i] == "\\":
        return (part[i + 1], i + 2) if i + 1 < len(part) else (None, i + 1)
    return part[i], i + 1


def _compile(source: str) -> re.Pattern:
    return re.compile(source, re.DOTALL)
