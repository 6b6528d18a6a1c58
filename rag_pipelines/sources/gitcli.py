"""The git command line, read-only and offline: what a repository tracks, its changes, its commits.

Every call is `git --no-pager -c core.quotepath=off -c core.fsmonitor=false ... -c safe.directory=<repo> -C <repo>`
(OVERRIDES: the user's config cannot add signatures, colours or another encoding to what is parsed) with LC_ALL=C, GIT_OPTIONAL_LOCKS=0 (status never rewrites the index), no prompts, and GIT_ALLOW_PROTOCOL
empty so no command can reach a remote (a partial clone's missing blobs are not fetched: its history is
read without diffs). Output is NUL-separated (`-z`) wherever git offers it. Reference:
../shared/reference/sources.md §9.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

TIMEOUT = 600  # seconds any one git command may take
ENV = {"LC_ALL": "C", "LANG": "C", "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "GIT_ALLOW_PROTOCOL": "",
       "GIT_PAGER": "cat", "GIT_NO_REPLACE_OBJECTS": "1"}
# the user's config may not change what we parse nor run programs: signatures, colours, output encoding, fsmonitor
OVERRIDES = ("core.quotepath=off", "core.fsmonitor=false", "log.showSignature=false", "color.ui=false",
             "i18n.logOutputEncoding=UTF-8")
META = "%H%x1f%P%x1f%aN%x1f%aE%x1f%at%x1f%ai%x1f%cN%x1f%cE%x1f%ct%x1f%B"  # fields of one commit
_OCTAL = re.compile(rb"\\([0-7]{3}|[abtnvfr\"\\])")
_ESCAPES = {b"a": b"\a", b"b": b"\b", b"t": b"\t", b"n": b"\n", b"v": b"\v", b"f": b"\f", b"r": b"\r",
            b'"': b'"', b"\\": b"\\"}


class GitError(Exception):
    """A git command failed; the message is git's own (stderr)."""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return {**env, **ENV}


def _cmd(root: Path, args: Iterable[str]) -> list[str]:
    config = [part for item in (*OVERRIDES, f"safe.directory={root}") for part in ("-c", item)]
    return ["git", "--no-pager", *config, "-C", str(root), *args]


def git(root: Path, *args: str, stdin: bytes | None = None) -> bytes:
    """stdout of one git command; GitError with git's message when it fails."""
    try:
        proc = subprocess.run(_cmd(root, args), input=stdin, capture_output=True, env=_env(), timeout=TIMEOUT)
    except FileNotFoundError as exc:
        raise GitError("the git command is not installed (or not on PATH)") from exc
    except subprocess.TimeoutExpired as exc:
        raise GitError(f"git {args[0]} took over {TIMEOUT} s") from exc
    if proc.returncode != 0:
        message = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(" ".join(message[-3:]) or f"git {args[0]} failed with status {proc.returncode}")
    return proc.stdout


def stream(root: Path, *args: str, stdin: bytes | None = None) -> Iterator[bytes]:
    """stdout lines of a long-running git command (diffs of many commits), without holding them all."""
    proc = subprocess.Popen(_cmd(root, args), stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    try:
        if stdin is not None:
            import threading

            def feed():
                try:
                    proc.stdin.write(stdin)
                    proc.stdin.close()
                except (BrokenPipeError, OSError):
                    pass

            threading.Thread(target=feed, daemon=True).start()
        assert proc.stdout is not None
        yield from proc.stdout
        err = proc.stderr.read() if proc.stderr else b""
        if proc.wait(timeout=TIMEOUT) != 0:
            raise GitError(" ".join(err.decode("utf-8", "replace").strip().splitlines()[-3:]) or f"git {args[0]} failed")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe:
                pipe.close()


def _split0(data: bytes) -> list[str]:
    return [p.decode("utf-8", "surrogateescape") for p in data.split(b"\0") if p]


def unquote(path: str) -> str:
    """A path as git prints it outside -z output: C-quoted ("a\\303\\244.txt") when it has odd characters."""
    if not (len(path) >= 2 and path[0] == path[-1] == '"'):
        return path
    raw = path[1:-1].encode("utf-8", "surrogateescape")
    out = _OCTAL.sub(lambda m: bytes([int(m.group(1), 8)]) if len(m.group(1)) == 3 else _ESCAPES[m.group(1)], raw)
    return out.decode("utf-8", "surrogateescape")


# -- the repository ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Repo:
    root: Path  # the working tree (or the git dir of a bare repository)
    bare: bool
    git_dir: Path  # where info/, shallow and objects live (a linked worktree's common dir)


def open_repo(path: Path) -> Repo:
    """The repository at path; GitError when it is none (or git cannot read it)."""
    out = git(path, "rev-parse", "--is-bare-repository", "--git-common-dir").decode("utf-8", "surrogateescape")
    bare, common = (out.splitlines() + ["", ""])[:2]
    git_dir = (path / common.strip()).resolve()
    if bare.strip() == "true":
        return Repo(git_dir, True, git_dir)
    top = git(path, "rev-parse", "--show-toplevel").decode("utf-8", "surrogateescape").strip()
    return Repo(Path(top), False, git_dir)


def head(root: Path) -> str | None:
    """The commit HEAD points at; None in a repository without commits."""
    try:
        return git(root, "rev-parse", "--verify", "-q", "HEAD^{commit}").decode().strip() or None
    except GitError:
        return None


def tracked(root: Path) -> dict[str, tuple[str, str]]:
    """path → (mode, blob sha) of every file in the index (the last stage of a conflicted path)."""
    out = {}
    for entry in _split0(git(root, "ls-files", "-s", "-z")):
        meta, _, path = entry.partition("\t")
        mode, sha, _stage = meta.split(" ")
        out[path] = (mode, sha)
    return out


def untracked(root: Path) -> list[str]:
    """Files git does not track and does not ignore (.gitignore, info/exclude, the user's excludes)."""
    return _split0(git(root, "ls-files", "-z", "--others", "--exclude-standard"))


def worktree_changes(root: Path) -> tuple[set[str], set[str]]:
    """(modified, deleted): tracked paths whose working-tree file differs from the index, or is gone."""
    fields = _split0(git(root, "status", "--porcelain=v1", "-z", "--untracked-files=no", "--ignore-submodules=all"))
    modified, deleted, i = set(), set(), 0
    while i < len(fields):
        entry = fields[i]
        x, y, path = entry[0], entry[1], entry[3:]
        i += 2 if x in "RC" else 1  # a rename is followed by its old path
        if y == "D" or (x == "D" and y == " "):
            deleted.add(path)
        elif y != " " or "U" in (x, y) or x + y in ("AA", "DD"):
            modified.add(path)
    return modified, deleted


def attributes(root: Path, paths: list[str], names: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """path → {attribute: value} for the attributes that are set (set, unset, or a value) on it."""
    if not paths:
        return {}
    data = git(root, "check-attr", "-z", "--stdin", *names, stdin=b"\0".join(p.encode("utf-8", "surrogateescape")
                                                                           for p in paths) + b"\0")
    fields = data.split(b"\0")
    out: dict[str, dict[str, str]] = {}
    for i in range(0, len(fields) - 2, 3):
        path, name, value = (f.decode("utf-8", "surrogateescape") for f in fields[i : i + 3])
        if value != "unspecified":
            out.setdefault(path, {})[name] = value
    return out


def has_attributes(repo: Repo, paths: Iterable[str]) -> bool:
    """Whether any .gitattributes (tracked, or info/attributes) can set attributes at all."""
    return (repo.git_dir / "info" / "attributes").is_file() or any(
        p == ".gitattributes" or p.endswith("/.gitattributes") for p in paths)


# -- history ---------------------------------------------------------------------------------------


def commits_since(root: Path, since: int) -> list[str]:
    """Commits reachable from HEAD committed at or after `since` (unix seconds), newest first."""
    if head(root) is None:
        return []
    return git(root, "rev-list", f"--since={since}", "HEAD").decode().split()


def shallow(repo: Repo) -> set[str]:
    """Commits whose parents a shallow clone does not have (their diff would be the whole tree)."""
    try:
        return set((repo.git_dir / "shallow").read_text().split())
    except OSError:
        return set()


def partial(root: Path) -> bool:
    """A partial clone (a promisor remote): old blobs are missing and reading them would need the network."""
    try:
        found = git(root, "config", "--get-regexp", r"^(extensions\.partialclone|remote\..*\.promisor)$")
    except GitError:  # status 1: none of these keys is set
        return False
    return any(line.split(" ", 1)[-1].strip().lower() not in ("", "false") for line in found.decode().splitlines())


def existing(root: Path, shas: list[str]) -> set[str]:
    """The commits among shas that the repository still has (a rewritten history's may be pruned)."""
    if not shas:
        return set()
    out = git(root, "cat-file", "--batch-check", stdin=("\n".join(shas) + "\n").encode()).decode("utf-8", "replace")
    return {line.split()[0] for line in out.splitlines() if line.split()[1:2] == ["commit"]}


@dataclass(frozen=True)
class CommitMeta:
    sha: str
    parents: tuple[str, ...]
    author_name: str
    author_email: str
    author_ts: int
    author_date: str  # ISO with the author's offset, as git prints %ai
    committer_name: str
    committer_email: str
    commit_ts: int
    message: str


def commit_meta(root: Path, shas: list[str]) -> dict[str, CommitMeta]:
    """Author, dates, parents and message of each commit (mailmap applied, messages re-encoded to UTF-8)."""
    if not shas:
        return {}
    data = git(root, "log", "--no-walk=unsorted", "--stdin", "-z", f"--format={META}", "--no-color",
               stdin=("\n".join(shas) + "\n").encode())
    out = {}
    for record in data.split(b"\0"):
        f = record.decode("utf-8", "replace").split("\x1f")
        if len(f) < 10:
            continue
        sha, parents = f[0].strip(), tuple(f[1].split())
        out[sha] = CommitMeta(sha, parents, f[2], f[3], _int(f[4]), f[5], f[6], f[7], _int(f[8]), "\x1f".join(f[9:]))
    return out


@dataclass
class RawChange:
    status: str  # A, M, D, R, C, T (git's letter)
    path: str
    old_path: str | None
    old_mode: str
    new_mode: str
    patch: list[bytes]  # its lines of the patch (trimmed by the reader)
    added: int = 0
    removed: int = 0
    binary: bool = False


def commit_changes(root: Path, commits: list[tuple[str, str | None]], patches: bool, max_lines: int
                   ) -> Iterator[tuple[str, list[RawChange]]]:
    """(sha, its changed files with up to max_lines patch lines each) per (commit, first parent or None).

    One `git diff-tree --stdin` for all of them: a merge is compared with its first parent only; a root
    commit with the empty tree. Lines over max_lines are counted (+/-) but not kept.
    """
    lines = "".join(f"{sha} {parent}\n" if parent else f"{sha}\n" for sha, parent in commits).encode()
    args = ["diff-tree", "--stdin", "-r", "--root", "--always", "--raw", "--no-color", "--no-ext-diff", "--no-textconv"]
    args += ["-M", "-p", "--unified=2"] if patches else ["--no-renames"]  # rename detection reads blobs
    order = [sha for sha, _ in commits]
    current, changes, patch_index = None, [], -1
    for line in stream(root, *args, stdin=lines):
        text = line.rstrip(b"\n")
        if len(order) and text.decode("ascii", "replace") == order[0]:
            if current is not None:
                yield current, changes
            current, changes, patch_index = order.pop(0), [], -1
            continue
        if current is None:
            continue
        if text.startswith(b":"):
            changes.append(_raw(text))
        elif text.startswith(b"diff --git "):
            patch_index += 1
        elif 0 <= patch_index < len(changes):
            _patch_line(changes[patch_index], text, max_lines)
    if current is not None:
        yield current, changes
    for sha in order:  # diff-tree printed nothing for them (cannot happen with --always; kept safe)
        yield sha, []


def _raw(line: bytes) -> RawChange:
    meta, _, paths = line.decode("utf-8", "surrogateescape").partition("\t")
    old_mode, new_mode, _old, _new, status = meta[1:].split(" ")[:5]
    names = [unquote(p) for p in paths.split("\t")]
    old, new = (names[0], names[1]) if len(names) > 1 else (None, names[0])
    return RawChange(status[0], new, old, old_mode, new_mode, [])


def _patch_line(change: RawChange, line: bytes, max_lines: int) -> None:
    if line.startswith(b"Binary files ") or line.startswith(b"GIT binary patch"):
        change.binary = True
        return
    if line.startswith((b"+++ ", b"--- ", b"index ", b"new file mode", b"deleted file mode", b"old mode", b"new mode",
                        b"similarity index", b"dissimilarity index", b"rename from", b"rename to", b"copy from",
                        b"copy to")):
        return
    if line.startswith(b"+"):
        change.added += 1
    elif line.startswith(b"-"):
        change.removed += 1
    if len(change.patch) < max_lines:
        change.patch.append(line[:500].rstrip(b"\r"))


def last_commit_times(root: Path, wanted: set[str]) -> dict[str, int]:
    """path → author time of the newest commit (from HEAD) that touched it, for the wanted paths found."""
    if not wanted or head(root) is None:
        return {}
    out: dict[str, int] = {}
    when = 0
    for line in stream(root, "log", "--format=%x1f%at", "--name-only", "--no-renames", "-z", "HEAD"):
        for part in line.split(b"\0"):
            text = part.strip(b"\n")
            if text.startswith(b"\x1f"):
                when = _int(text[1:].decode())
            elif text:
                path = text.decode("utf-8", "surrogateescape")
                if path in wanted and path not in out:
                    out[path] = when
        if len(out) == len(wanted):
            break  # the rest of history cannot change what was found
    return out


def _int(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        return 0
