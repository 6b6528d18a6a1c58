"""The code source over real git repositories: which files, stamps, documents, commits, rewrites, faults, config."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

import git_fixture as fx
from rag_pipelines.chunking.prose import ChunkSpec
from rag_pipelines.config import load_collections
from rag_pipelines.sources import gitcli
from rag_pipelines.sources.base import SourceUnavailable
from rag_pipelines.sources.code_groups import group_collections
from rag_pipelines.sources.git import GitOptions, GitSource, file_key, skip_reason, window_start
from rag_search.cli.main import cli
from rag_search.config import Paths, Settings

FILES = {"./commit/" + "ab" * 20, ".gitattributes", ".gitignore", ".mailmap", "README.md", "data/dump.sql",
         "data/model.weights", "docs/über.md", "infra/main.tf", "server/main.go", "server/retry.go",
         "server/wire.go", "src/settings.py", "tools/deploy", "vendor/ours/patch.js", "web/cart.ts", "web/config.ts",
         "web/discount.ts", "win.txt"}
IN_WINDOW = ("rename", "feature", "main", "merge", "empty", "latin1", "skew", "coauthor")


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> fx.Built:
    return fx.build(tmp_path_factory.mktemp("git"))


@pytest.fixture
def fresh(tmp_path) -> fx.Built:
    return fx.build(tmp_path)


def source(path: Path, **options) -> GitSource:
    return GitSource(GitOptions(type="code", path=path, max_file_kb=32, **options))


def loaded(src: GitSource, keys) -> dict:
    out = {}
    for item in src.load(sorted(keys)):
        assert item.error is None and not item.gone, (item.key, item.error)
        out[item.key] = (item, item.parse())
    return out


# -- files -------------------------------------------------------------------------------------------------


def test_scan_lists_what_git_tracks_without_vendored_generated_binary_links_or_submodules(repo):
    scan = source(repo.path).scan()
    assert set(scan.items) == FILES and not scan.problems
    assert scan.items["src/settings.py"].uri == str(repo.path / "src/settings.py")
    untracked = set(source(repo.path, include_untracked=True).scan().items) - FILES
    assert untracked == {"notes.txt"}  # secret.env and build/ are ignored


def test_skip_rules_by_name():
    assert skip_reason("a/vendor/b.go") == "vendored" and skip_reason("web/node_modules/x/index.js") == "vendored"
    assert skip_reason("web/app.min.js") == "generated" and skip_reason("api/types.pb.go") == "generated"
    assert skip_reason("Cargo.lock") == skip_reason("web/package-lock.json") == "lock file"
    assert skip_reason("img/a.PNG") == "binary" and skip_reason("src/vendor.go") is None
    assert file_key("commit/" + "0" * 40) == "./commit/" + "0" * 40 and file_key("docs/über.md") == "docs/über.md"


def test_stamps_follow_blobs_so_rescans_and_branch_switches_read_nothing(fresh, monkeypatch):
    src = source(fresh.path)
    first = {k: s.value for k, s in src.scan().items.items()}
    blob = gitcli.tracked(fresh.path)["src/settings.py"][1]
    assert first["src/settings.py"].startswith(blob + ":")
    fx.git(fresh.path, "checkout", "-q", fresh.sha("rename"))  # away and back: mtimes change, blobs do not
    fx.git(fresh.path, "checkout", "-q", "main")
    os.utime(fresh.path / "web/cart.ts", (time.time() + 5, time.time() + 5))  # touched, not changed
    monkeypatch.setattr(Path, "open", lambda *a, **k: pytest.fail("a no-op rescan opened a file"))
    assert {k: s.value for k, s in src.scan().items.items()} == first
    monkeypatch.undo()
    (fresh.path / "web/cart.ts").write_text(fx.CART_TS + "// edited\n")
    edited = src.scan().items["web/cart.ts"].value
    assert edited.startswith("wt:") and edited != first["web/cart.ts"]
    (fresh.path / "web/cart.ts").unlink()  # deleted in the working tree: gone from the scan
    assert "web/cart.ts" not in src.scan().items


def test_file_documents_language_dates_group_and_path_only_items(repo):
    src = source(repo.path, group="work", metadata={"team": "shop"})
    docs = loaded(src, FILES)
    item, doc = docs["src/settings.py"]
    assert item.source_type == "code" and item.chunker is not None and doc.title == "src/settings.py"
    assert doc.ts == repo.authored["coauthor"]  # the author date of its last commit
    assert doc.tags == ("work",) and doc.metadata == {"language": "python", "path": "src/settings.py",
                                                      "group": "work", "team": "shop"}
    assert docs["docs/über.md"][1].ts == repo.authored["rename"]
    assert docs["server/retry.go"][1].ts == repo.authored["skew"]
    assert docs["infra/main.tf"][1].metadata["language"] == "terraform"
    assert "\r" not in docs["win.txt"][1].sections[0].text
    skipped = {k: d.metadata.get("skipped", "") for k, (_, d) in docs.items() if d.metadata.get("skipped")}
    assert skipped.keys() == {"server/wire.go", "data/dump.sql", "data/model.weights"}
    assert skipped["server/wire.go"] == "generated" and "LFS" in skipped["data/model.weights"]
    assert skipped["data/dump.sql"].startswith("too large")
    assert "INSERT" not in docs["data/dump.sql"][1].sections[0].text
    assert docs["./commit/" + "ab" * 20][1].title == "commit/" + "ab" * 20
    hashes = {k: i.content_hash for k, (i, _) in docs.items()}
    assert hashes == {i.key: i.content_hash for i in src.load(sorted(FILES))}  # stable


def test_a_changed_file_is_dated_by_its_mtime_and_a_gone_one_is_gone(fresh):
    src = source(fresh.path)
    src.scan()
    (fresh.path / "server/main.go").write_text(fx.SERVER_GO + "// wip\n")
    os.utime(fresh.path / "server/main.go", (1_800_000_000, 1_800_000_000))
    src.scan()
    (item, doc), = loaded(src, ["server/main.go"]).values()
    assert doc.ts == 1_800_000_000 and item.stamp.startswith("wt:")
    (fresh.path / "server/main.go").unlink()
    [gone] = src.load(["server/main.go"])
    assert gone.gone


def test_code_files_are_chunked_along_their_syntax(repo):
    src = source(repo.path)
    (item, doc), = loaded(src, ["src/settings.py"]).values()
    small = ChunkSpec(max_tokens=40, overlap_tokens=0, window=40)
    chunks = item.chunker(doc, lambda s: len(s.split()), small)
    assert [c.metadata["lines"] for c in chunks] == ["1-8", "11-15", "17-22", "25-26"]
    assert [c.metadata.get("symbol") for c in chunks] == [
        "parse_config", "SettingsLoader", "SettingsLoader.read_pairs", "config_path"]
    assert chunks[2].heading_path == ("class SettingsLoader:",) and chunks[2].metadata["kind"] == "method"
    assert chunks[2].text.startswith("src/settings.py > class SettingsLoader:\n\n    def read_pairs(self, text):")
    assert chunks[1].keywords == "settings loader" and all(c.metadata["language"] == "python" for c in chunks)


# -- history ----------------------------------------------------------------------------------------------


def test_history_holds_the_commits_of_the_window(repo):
    scan = source(repo.path, files=False, history_months=6).scan()
    assert set(scan.items) == {f"commit/{repo.sha(label)}" for label in IN_WINDOW}
    sha = repo.sha("merge")
    assert scan.items[f"commit/{sha}"].uri == f"git:{repo.path}#{sha}"
    assert set(source(repo.path, files=False, history_months=24).scan().items) >= {f"commit/{repo.sha('root')}"}
    assert window_start(6, now=1_787_000_000) < 1_787_000_000 - 180 * fx.DAY


def test_commit_documents(repo):
    src = source(repo.path, files=False, history_months=6, group="work")
    docs = {label: loaded(src, [f"commit/{repo.sha(label)}"]).popitem()[1][1] for label in IN_WINDOW}
    rename = docs["rename"]
    assert rename.title == "Rename the config loader to settings"
    assert rename.author == "Bob Builder <bob@example.com>"  # .mailmap applied, address in its normal form
    assert rename.ts == repo.authored["rename"] and rename.tags == ("work",)
    files = rename.sections[1].text.splitlines()
    assert files == ["added: docs/über.md (+3 −0)", "deleted: old_notes.txt (+0 −1)",
                     "renamed: src/config_loader.py → src/settings.py (+1 −1)"]
    hunk = next(s.text for s in rename.sections if s.heading_path == ("src/settings.py",))
    assert '+    """Loads settings for the checkout and billing services."""' in hunk
    merge = docs["merge"]
    assert merge.metadata["merge"] and len(merge.metadata["parents"]) == 2
    assert merge.metadata["files"] == ["web/discount.ts"] and len(merge.sections) == 2  # listed, hunks not shown
    assert docs["empty"].metadata["files"] == [] and len(docs["empty"].sections) == 1
    assert docs["latin1"].title == "Fix für die Größe der Rechnung"
    skew = docs["skew"]
    assert skew.ts == repo.authored["skew"] and skew.metadata["commit_date"] > "2026"
    assert "Ann Example <ann@example.com>" in skew.participants  # the committer
    coauthor = docs["coauthor"]
    assert "Erin Park <erin@example.com>" in coauthor.participants
    assert any(s.text.startswith("huge diff: added, +1500 −0") for s in coauthor.sections)
    assert any(s.text.startswith("lock file: modified") for s in docs["main"].sections)


def test_history_is_incremental_and_a_rewrite_is_reconciled(fresh):
    src = source(fresh.path, files=False, history_months=6)
    before = src.scan().items
    assert len({s.value for s in before.values()}) == 1  # commits never change: one stamp for all
    fx.write(fresh.path, "web/cart.ts", fx.CART_TS + "// tax\n")
    new = fx.commit(fresh, "tax", "Add tax note", int(time.time()) - fx.DAY)
    after = src.scan().items
    assert set(after) - set(before) == {f"commit/{new}"} and set(before) <= set(after)
    fx.git(fresh.path, "rebase", "-q", "--onto", fresh.sha("latin1"), fresh.sha("skew"))  # drops `skew`
    rewritten = set(src.scan().items)
    gone = {f"commit/{fresh.sha(x)}" for x in ("skew", "coauthor")} | {f"commit/{new}"}
    assert not gone & rewritten and len(rewritten) == len(after) - 1
    [vanished] = src.load(["commit/" + "0" * 40])
    assert vanished.gone


def test_a_shallow_clone_has_no_diff_for_its_boundary_commit(repo, tmp_path):
    subprocess.run(["git", "clone", "-q", "--depth", "2", f"file://{repo.path}", str(tmp_path / "shallow")],
                   check=True, capture_output=True)
    src = source(tmp_path / "shallow", files=False, history_months=6)
    keys = set(src.scan().items)
    assert keys == {f"commit/{repo.sha('coauthor')}", f"commit/{repo.sha('skew')}"}
    docs = loaded(src, keys)
    boundary = docs[f"commit/{repo.sha('skew')}"][1]
    assert "not available" in boundary.sections[1].text and boundary.metadata["files"] == []


def test_a_partial_clone_is_read_without_fetching_missing_blobs(repo, tmp_path):
    origin = tmp_path / "origin"
    shutil.copytree(repo.path, origin, symlinks=True)
    fx.git(origin, "config", "uploadpack.allowFilter", "true")
    subprocess.run(["git", "clone", "-q", "--filter=blob:none", "--no-local", f"file://{origin}",
                    str(tmp_path / "partial")], check=True, capture_output=True)
    assert gitcli.partial(tmp_path / "partial") and not gitcli.partial(repo.path)
    src = source(tmp_path / "partial", history_months=6)
    keys = set(src.scan().items)
    assert keys == FILES | {f"commit/{repo.sha(label)}" for label in IN_WINDOW}
    rename = loaded(src, [f"commit/{repo.sha('rename')}"]).popitem()[1][1]
    assert rename.sections[1].text.splitlines() == [  # no blobs: no rename detection, no hunks
        "added: docs/über.md", "deleted: old_notes.txt", "deleted: src/config_loader.py", "added: src/settings.py"]
    assert len(rename.sections) == 2


# -- faults ------------------------------------------------------------------------------------------------


def test_a_missing_folder_or_not_a_repository_is_unavailable(tmp_path):
    with pytest.raises(SourceUnavailable, match="does not exist"):
        source(tmp_path / "nope").scan()
    (tmp_path / "plain").mkdir()
    with pytest.raises(SourceUnavailable, match="cannot be read as a git repository"):
        source(tmp_path / "plain").scan()


def test_a_repository_without_commits_and_a_bare_one(tmp_path, repo):
    fresh = tmp_path / "new"
    fresh.mkdir()
    fx.git(fresh, "init", "-q")
    fx.write(fresh, "main.py", "print('hi')\n")
    fx.git(fresh, "add", "main.py")
    assert set(source(fresh, history_months=6).scan().items) == {"main.py"}
    subprocess.run(["git", "clone", "-q", "--bare", str(repo.path), str(tmp_path / "bare.git")], check=True)
    keys = set(source(tmp_path / "bare.git", history_months=6).scan().items)
    assert keys == {f"commit/{repo.sha(label)}" for label in IN_WINDOW}  # no working tree: commits only


def test_git_missing_makes_the_source_unavailable(repo, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SourceUnavailable, match="git command is not installed"):
        source(repo.path).scan()


# -- config and CLI ----------------------------------------------------------------------------------------


def test_code_groups_make_one_collection_per_repository(tmp_path, monkeypatch):
    settings = Settings(code_groups={"work": ["~/src/api", "/srv/web"], "personal": ["/home/me/api"]},
                        git_history_in_months=3)
    got = group_collections(settings, taken={"web"})
    assert set(got) == {"api-work", "api-personal", "web-work"}  # shared names and taken names get the group
    [src] = got["api-personal"]["sources"]
    assert src == {"type": "code", "path": "/home/me/api", "group": "personal", "history_months": 3}
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(yaml.safe_dump({"code_groups": {"work": [str(tmp_path / "shop-api")]},
                                                      "git_history_in_months": 6}))
    monkeypatch.setenv("LOCAL_RAG_HOME", str(home))
    monkeypatch.delenv("LOCAL_RAG_CONFIG", raising=False)
    cfg = load_collections(Paths.from_env())["shop-api"]
    assert cfg.kind == "project" and cfg.sources[0].group == "work" and cfg.sources[0].history_months == 6
    out = CliRunner().invoke(cli, ["index", "group", "--help"])
    assert out.exit_code == 0 and "--history" in out.output
    out = CliRunner().invoke(cli, ["index", "group", "nonesuch"])
    assert out.exit_code != 0 and "No code group named 'nonesuch'" in out.output and "work" in out.output
