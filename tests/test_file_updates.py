"""Files several processes rewrite (registry.yaml, config.yaml's users, the records of what assistants and users
added): every change is made under the file's lock and renamed into place, so changes made at the same moment by
separate processes all survive. Real processes throughout: two `local-rag index project NEW` at once used to lose
one collection (registry.yaml rewritten from what each had read)."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import yaml

from rag_search import collection_config, file_updates
from rag_search.access.user_config import change_users, read_users
from rag_search.config import Paths

PROCESSES, EACH = 6, 5


def _paths(home: Path) -> Paths:
    return Paths(home=home, config=home / "config.yaml", db=home / "rag.db", dagster_home=home / "dagster",
                 ollama_host=None)


def _register_many(home: str, worker: int, start) -> None:
    start.wait()
    for i in range(EACH):
        collection_config.register(_paths(Path(home)), f"c{worker}_{i}", {"sources": [{"type": "project",
                                                                                        "paths": [f"/data/{worker}/{i}"]}]})


def _add_users(config: str, worker: int, start) -> None:
    start.wait()
    for i in range(EACH):
        change_users(Path(config), lambda entries: entries | {f"u{worker}_{i}": {"key_sha256": "ab" * 32}})


def _race(target, arg: str) -> None:
    ctx = multiprocessing.get_context("fork")
    start = ctx.Event()
    procs = [ctx.Process(target=target, args=(arg, w, start)) for w in range(PROCESSES)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0


def test_registrations_made_at_once_by_separate_processes_all_survive(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text("collections: {}\n")
    _race(_register_many, str(home))
    found = collection_config.declared(_paths(home))
    assert sorted(found) == sorted(f"c{w}_{i}" for w in range(PROCESSES) for i in range(EACH))
    assert found["c3_4"].file == home / "registry.yaml"
    assert collection_config.source_paths(found["c3_4"]) == [str(Path("/data/3/4").resolve())]
    assert (home / "registry.yaml").stat().st_mode & 0o777 == 0o600
    assert [p.name for p in home.iterdir() if p.name.endswith(".tmp")] == []  # no temporary file left behind


def test_users_added_at_once_by_separate_processes_all_survive(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("# my settings\nsearch:\n  top_k: 7\n")
    _race(_add_users, str(config))
    assert len(read_users(config)) == PROCESSES * EACH
    text = config.read_text()
    assert text.startswith("# my settings\n") and "top_k: 7" in text  # the rest of the file as written
    assert config.stat().st_mode & 0o777 == 0o600  # it holds the keys' hashes


def test_an_unregistered_collection_leaves_the_others(tmp_path):
    paths = _paths(tmp_path)
    (tmp_path / "config.yaml").write_text("collections:\n  mine: {sources: [{type: project, paths: [/x]}]}\n")
    for name in ("a", "b"):
        collection_config.register(paths, name, {"sources": [{"type": "project", "paths": [f"/{name}"]}]})
    assert collection_config.unregister(paths, "a") and not collection_config.unregister(paths, "a")
    assert sorted(collection_config.declared(paths)) == ["b", "mine"]
    raw = yaml.safe_load((tmp_path / "registry.yaml").read_text())
    assert list(raw["collections"]) == ["b"]


def test_a_failed_change_leaves_the_file_as_it_was(tmp_path):
    target = tmp_path / "records.json"
    target.write_text(json.dumps({"kept": True}))
    os.chmod(target, 0o640)

    def broken(_text):
        raise ValueError("no")

    try:
        file_updates.update(target, broken)
    except ValueError:
        pass
    assert json.loads(target.read_text()) == {"kept": True}
    file_updates.update(target, lambda text: text.replace("true", "false"))
    assert json.loads(target.read_text()) == {"kept": False} and target.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == [".records.json.lock", "records.json"]


def test_two_cli_runs_adding_collections_at_once_keep_both(tmp_path):
    """The process a user starts: two `local-rag index project NEW` started together both index their folder."""
    home = tmp_path / "home"
    env = {**os.environ, "LOCAL_RAG_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")}
    for name in ("LOCAL_RAG_DB", "LOCAL_RAG_CONFIG"):
        env.pop(name, None)
    exe = str(Path(sys.executable).with_name("local-rag"))
    runs = []
    for name in ("alpha", "beta"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / f"{name}.md").write_text(f"# {name}\n\nA note about the {name} lighthouse keeper.\n")
        runs.append(subprocess.Popen([exe, "index", "project", name, str(folder), "--json"], env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for run in runs:
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, err
        assert json.loads(out)[0]["outcomes"] == {"indexed": 1}
    assert sorted(collection_config.declared(_paths(home))) == ["alpha", "beta"]
