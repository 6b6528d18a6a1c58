"""bench/judged_sets.py: the committed judged sets load and are well formed; the scorer's metrics, its mapping of
hits to judged paths, and the corpus export from a bare git mirror (a small repository made here with git)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "bench"))

from judged_sets import (  # noqa: E402
    KINDS, JudgedSet, Query, SetError, export_corpus, load_set, ndcg, ranked_paths, score_query, score_run,
    set_names)


def q(qid, judgements, kind="keyword", named=False):
    return Query(qid, f"query {qid}", kind, "en", judgements, named)


# -- the committed sets ------------------------------------------------------------------------------

def test_committed_sets_are_well_formed():
    assert {"dendron", "vue-zh"} <= set(set_names())
    for name in set_names():
        js = load_set(name)
        for key in ("repository", "commit", "licence", "subdir", "include", "fetch"):
            assert js.meta.get(key), f"{name}/set.json lacks {key}"
        assert len(js.meta["commit"]) == 40
        assert all(q.kind in KINDS and q.judgements for q in js.queries)


def test_the_notes_set_has_the_kinds_the_issue_asks_for():
    js = load_set("dendron")
    kinds = [q.kind for q in js.queries]
    assert len(js.queries) >= 60
    assert kinds.count("other-language") >= 10 and {q.lang for q in js.queries} >= {"en", "de", "fr", "es", "ru"}
    assert all(kinds.count(k) >= 10 for k in KINDS)
    assert sum(q.named for q in js.queries) >= 10


def test_the_chinese_set_has_about_thirty_chinese_queries():
    js = load_set("vue-zh")
    assert len(js.queries) >= 30 and {q.lang for q in js.queries} == {"zh"}


def test_a_bad_grade_or_kind_is_a_clear_error(tmp_path):
    (tmp_path / "set.json").write_text(json.dumps({"name": "t"}))
    row = {"id": "a", "query": "x", "kind": "keyword", "lang": "en", "judgements": {"a.md": 3}}
    (tmp_path / "queries.jsonl").write_text(json.dumps(row) + "\n")
    with pytest.raises(SetError, match="2 \\(answers\\) or 1 \\(partial\\)"):
        load_set(tmp_path)
    row.update(kind="fuzzy", judgements={"a.md": 2})
    (tmp_path / "queries.jsonl").write_text(json.dumps(row) + "\n")
    with pytest.raises(SetError, match="kind 'fuzzy'"):
        load_set(tmp_path)


# -- metrics ------------------------------------------------------------------------------------------

def test_ndcg_uses_graded_gains():
    judged = {"a.md": 2, "b.md": 1}
    assert ndcg(["a.md", "b.md"], judged, 10) == pytest.approx(1.0)
    ideal = 2 + 1 / math.log2(3)
    assert ndcg(["b.md", "a.md"], judged, 10) == pytest.approx((1 + 2 / math.log2(3)) / ideal)
    assert ndcg(["x.md", "y.md", "a.md"], judged, 10) == pytest.approx((2 / 2) / ideal)
    assert ndcg(["x.md"] * 5 + ["a.md"], judged, 5) == 0.0


def test_score_query_first_hit_counts_a_partial_page():
    r = score_query(["x.md", "b.md", "a.md"], {"a.md": 2, "b.md": 1})
    assert (r["mrr@10"], r["hit@1"], r["hit@3"]) == (0.5, 0.0, 1.0)
    assert score_query(["x.md", "y.md"], {"a.md": 2}) == dict.fromkeys(r, 0.0)
    assert score_query([f"{i}.md" for i in range(10)] + ["a.md"], {"a.md": 2})["mrr@10"] == 0.0


def test_score_run_groups_by_kind_named_and_all_and_missing_queries_score_zero():
    js = JudgedSet("t", {}, [q("1", {"a.md": 2}), q("2", {"b.md": 2}, "syntax", named=True), q("3", {"c.md": 1}, "syntax")])
    scores = score_run(js, {"1": ["a.md"], "2": ["x.md", "b.md"]})
    assert list(scores) == ["keyword", "syntax", "named", "all"]
    assert scores["keyword"]["hit@1"] == 1.0 and scores["syntax"]["queries"] == 2
    assert scores["syntax"]["mrr@10"] == pytest.approx(0.25) and scores["named"]["mrr@10"] == 0.5
    assert scores["all"]["mrr@10"] == pytest.approx(0.5)


# -- hits to judged paths -----------------------------------------------------------------------------------

def test_ranked_paths_maps_uris_under_the_corpus_and_collapses_chunks(tmp_path):
    root = tmp_path / "docs"
    hits = [{"uri": (root / "guide" / "über a.md").as_uri() + "#h2"}, {"uri": (root / "b.md").as_uri()},
            {"uri": (root / "guide" / "über a.md").as_uri()}, {"uri": (tmp_path / "elsewhere.md").as_uri()},
            {"uri": "c.md"}]
    assert ranked_paths(hits, root) == ["guide/über a.md", "b.md", "c.md"]


# -- export from a bare mirror ---------------------------------------------------------------------------------

def git(cwd, *args):
    env = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "T",
           "GIT_COMMITTER_EMAIL": "t@example.com", "HOME": str(cwd), "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def mirror(tmp_path):
    """<mirror>/acme+notes/repo: a bare clone of a repository with notes under vault/ at two commits."""
    work = tmp_path / "work"
    (work / "vault" / "sub").mkdir(parents=True)
    (work / "vault" / "a.md").write_text("# A\n")
    (work / "vault" / "sub" / "b.md").write_text("# B\n")
    (work / "vault" / "skip.png").write_bytes(b"\x89PNG")
    (work / "README.md").write_text("outside the vault\n")
    git(work, "init", "-q")
    git(work, "add", ".")
    git(work, "commit", "-q", "-m", "one")
    pinned = git(work, "rev-parse", "HEAD")
    (work / "vault" / "later.md").write_text("# Later\n")
    git(work, "add", ".")
    git(work, "commit", "-q", "-m", "two")
    git(tmp_path, "clone", "-q", "--bare", str(work), str(tmp_path / "mirror" / "acme+notes" / "repo"))
    return tmp_path / "mirror", pinned


def test_export_writes_the_pinned_commit_of_the_subfolder_only(mirror, tmp_path):
    root, pinned = mirror
    meta = {"repository": "acme/notes", "commit": pinned, "subdir": "vault", "include": ["*.md"]}
    js = JudgedSet("t", meta, [q("1", {"sub/b.md": 2})])
    assert export_corpus(js, root, tmp_path / "out") == ["a.md", "sub/b.md"]
    assert (tmp_path / "out" / "sub" / "b.md").read_text() == "# B\n"


def test_export_says_what_to_do_when_the_mirror_or_a_judged_page_is_missing(mirror, tmp_path):
    root, pinned = mirror
    meta = {"repository": "acme/notes", "commit": pinned, "subdir": "vault", "include": ["*.md"], "fetch": "fetch it"}
    with pytest.raises(SetError, match="no mirror of acme/other.*fetch it"):
        export_corpus(JudgedSet("t", {**meta, "repository": "acme/other"}, []), root, tmp_path / "out")
    with pytest.raises(SetError, match="missing from the export.*later.md"):
        export_corpus(JudgedSet("t", meta, [q("1", {"later.md": 2})]), root, tmp_path / "out")
