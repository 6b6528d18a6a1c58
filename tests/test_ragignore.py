""".ragignore files in folder sources: gitignore syntax, matched as git matches (git itself is the oracle), applied
like excludes by scans, plans (an edit re-plans: newly ignored items leave the index, re-included ones come back)
and the watcher's path → key mapping."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from pipeline_env import make_home

from rag_pipelines.sources import ragignore
from rag_pipelines.sources.files import FileOptions, FileSource

TREE = ["root.md", "keep.log", "debug.log", "1note.md", "abc.md", "bbc.md", "Upper.MD", "upper.md", "#hash.md",
        "!bang.md", "[x].md", "trail.md", "notes/a.md", "notes/b.log", "notes/keep.log", "notes/deep/c.log",
        "build/out.md", "build/sub/x.md", "docs/guide.md", "docs/api/ref.md", "docs/api/deep/more.md",
        "src/build/gen.md", "src/main.md", "src/tmp/t.md", "tmp/t.md", "a/b.md", "a/x/b.md", "a/x/y/b.md",
        "foo/bar.md", "foo/baz.md", "foo/sub/bar.md", "zoo/bar.md", "x/a/b/c.md"]

# (the .gitignore/.ragignore files by folder, what the case is about)
CASES = [
    ({"": "*.log"}, "a name at any depth"),
    ({"": "*.log\n!keep.log"}, "negation re-includes"),
    ({"": "build/"}, "a folder at any depth, folders only"),
    ({"": "/build/"}, "anchored by a leading slash"),
    ({"": "docs/*.md"}, "a middle slash anchors; * stops at /"),
    ({"": "docs/**/*.md"}, "** in the middle: zero or more folders"),
    ({"": "**/tmp"}, "leading **/"),
    ({"": "a/**/b.md"}, "a/**/b matches a/b too"),
    ({"": "foo/**\n!foo/bar.md"}, "trailing /** leaves the folder itself, so a file in it can come back"),
    ({"": "foo/\n!foo/bar.md"}, "nothing comes back from inside an excluded folder"),
    ({"": "\\#hash.md\n\\!bang.md"}, "escaped # and !"),
    ({"": "# a comment\n\n   \ntrail.md   "}, "comments, blank lines, trailing spaces"),
    ({"": "[ab]bc.md\n[!a]x.md"}, "bracket classes"),
    ({"": "[!a]bc.md"}, "a negated class"),
    ({"": "[[:digit:]]*"}, "a POSIX class"),
    ({"": "\\[x\\].md"}, "escaped brackets"),
    ({"": "[x.md"}, "an unterminated bracket matches nothing"),
    ({"": "*.MD"}, "case-sensitive"),
    ({"": "?oo/"}, "? is one character"),
    ({"": "/*\n!/docs\n!/notes/"}, "everything at the top but two folders"),
    ({"": "*/"}, "every folder"),
    ({"": "a/x"}, "an anchored folder without a trailing slash"),
    ({"": "src/*/"}, "folders one level down"),
    ({"": "*.md\n!docs/**"}, "re-include a folder's contents"),
    ({"": "**"}, "** alone: everything"),
    ({"": "x/**/c.md\nbar.md\n!foo/bar.md"}, "last match wins"),
    ({"": "keep.log", "notes": "*.log\n!keep.log"}, "a deeper file re-includes what one above excludes"),
    ({"": "!notes/b.log", "notes": "*.log"}, "a deeper file wins over one above"),
    ({"notes": "/deep/\n/a.md"}, "anchored in a subfolder's file"),
    ({"docs": "api/deep\nguide.md", "docs/api": "!deep/"}, "a folder excluded above cannot be re-included below"),
    ({"": "foo/**/bar.md"}, "/**/ matching no folder"),
    ({"": "doc[s]/api/"}, "a class in a folder pattern"),
    ({"": "*.md\n!*/\n!**/b.md"}, "only b.md files, at any depth"),
]


def make_tree(root: Path, ignores: dict[str, str], name: str) -> None:
    for rel in TREE:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x")
    for folder, text in ignores.items():
        (root / folder / name).write_text(text)


def git_visible(root: Path) -> set[str]:
    """The files git does not ignore (its own .gitignore files aside)."""
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q", str(root)], check=True, env=env)
    out = subprocess.run(["git", "-C", str(root), "-c", "core.excludesFile=/dev/null", "-c", "core.quotePath=false",
                          "ls-files", "-o", "--exclude-standard", "-z"], check=True, env=env, capture_output=True)
    return {p for p in out.stdout.decode().split("\0") if p and not p.endswith(".gitignore")}


def scanned(root: Path) -> set[str]:
    src = FileSource(FileOptions(type="project", paths=(root,), include=("**/*",)))
    return {Path(stamp.uri).relative_to(root).as_posix() for stamp in src.scan().items.values()}


@pytest.mark.parametrize("ignores,about", CASES, ids=[c[1] for c in CASES])
def test_ragignore_matches_what_git_ignores(tmp_path, ignores, about):
    git_root, ours = tmp_path / "git", tmp_path / "ours"
    make_tree(git_root, ignores, ".gitignore")
    make_tree(ours, ignores, ragignore.RAGIGNORE)
    expected = git_visible(git_root)
    assert expected != set(TREE) or about.startswith("an unterminated"), "the case ignores nothing"
    assert scanned(ours) == expected


def test_the_watcher_maps_ignored_paths_to_no_key(tmp_path):
    make_tree(tmp_path, {"": "*.log\n!keep.log", "notes": "deep/", "docs": "api/"}, ragignore.RAGIGNORE)
    src = FileSource(FileOptions(type="project", paths=(tmp_path,), include=("**/*",)))
    for rel, wanted in [("debug.log", False), ("keep.log", True), ("notes/a.md", True), ("notes/keep.log", True),
                        ("notes/deep/c.md", False), ("docs/api/ref.md", False), ("docs/guide.md", True)]:
        assert (src.key_for_path(tmp_path / rel) is not None) == wanted, rel
    assert src.replans(tmp_path / "notes" / ".ragignore") and src.replans(tmp_path / ".ragignore")
    assert not src.replans(tmp_path / "notes" / "a.md") and not src.replans(tmp_path / ".git" / ".ragignore")
    (tmp_path / "notes" / ".ragignore").write_text("a.md\n")  # read again once changed
    assert src.key_for_path(tmp_path / "notes" / "a.md") is None
    assert src.key_for_path(tmp_path / "notes" / "deep" / "c.md") is not None


def test_a_ragignore_that_cannot_be_used_is_a_failed_item_and_its_folder_is_not_indexed(tmp_path):
    make_tree(tmp_path, {}, ragignore.RAGIGNORE)
    (tmp_path / "notes" / ".ragignore").write_text("#" * (ragignore.MAX_BYTES + 1))
    (tmp_path / "docs" / ".ragignore").write_text("\n".join(f"name{i}.md" for i in range(ragignore.MAX_RULES + 1)))
    os.mkfifo(tmp_path / "foo" / ".ragignore")  # reading it must not block the scan
    result = FileSource(FileOptions(type="project", paths=(tmp_path,), include=("**/*",))).scan()
    keys = set(result.items)
    assert not any(k.startswith(("notes/", "docs/", "foo/")) for k in keys) and "root.md" in keys
    problems = result.problems
    assert problems["notes/.ragignore"][0] == "invalid" and "larger than" in problems["notes/.ragignore"][1]
    assert "2,001 patterns" in problems["docs/.ragignore"][1] and "not a file" in problems["foo/.ragignore"][1]
    assert "nothing in its folder is indexed" in problems["docs/.ragignore"][1]


def test_a_ragignore_edit_replans_the_collection(tmp_path, monkeypatch):
    """Real runs: newly ignored items leave the index, re-included ones are indexed again, the rest untouched."""
    from rag_pipelines.indexing import runs
    from rag_pipelines.wiring import resources
    from rag_search.store import reads

    paths, vault = make_home(tmp_path, monkeypatch)
    try:
        runs.index_collections(paths, ["notes"])
        store = resources.RagResource().store()
        before = set(reads.item_states(store, "notes"))
        assert {"Archive/bad yaml.md", "Board.canvas", "Projects/Runbook.md"} <= before
        (vault / ".ragignore").write_text("*.canvas\nArchive/*\n!Archive/bad yaml.md\n")
        (vault / "Projects" / ".ragignore").write_text("Runbook*.md\n")
        [summary] = runs.index_collections(paths, ["notes"])
        gone = {k for k in before if k.endswith(".canvas") or k.startswith("Projects/Runbook")
                or (k.startswith("Archive/") and k != "Archive/bad yaml.md")}
        assert set(reads.item_states(store, "notes")) == before - gone and len(gone) == 6
        assert summary.outcomes == {"deleted": 6}, summary.outcomes
        (vault / "Projects" / ".ragignore").unlink()
        (vault / ".ragignore").write_text("*.canvas\n")
        [summary] = runs.index_collections(paths, ["notes"])
        assert set(reads.item_states(store, "notes")) == before - {"Board.canvas"}
        assert summary.outcomes.get("indexed") == 5 and "deleted" not in summary.outcomes
    finally:
        resources.close_all()
