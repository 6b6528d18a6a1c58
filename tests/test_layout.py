"""The house's shape, checked on the source: no import circles, the search side never reaches into the pipelines'
package for collection configuration, rag_search's top level holds only what every room shares, and no name prefix
shared by several modules of one folder (a folder not yet made)."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("rag_search", "rag_pipelines")
# rag_search's top level: what all its rooms (store, embedders, retrieval, cli, mcp, web, access) share
SHARED = {"__init__", "config", "errors", "records", "privacy", "keys", "people", "cjk", "collection_config",
          "file_updates"}


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for f in (ROOT / pkg).rglob("*.py"):
            rel = f.relative_to(ROOT).with_suffix("")
            out[".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)] = f
    return out


def _imports(tree: ast.AST) -> list[tuple[str, ast.stmt]]:
    """(dotted name, statement) of every import, module-level or not, TYPE_CHECKING ones included."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out += [(f"{node.module}.{a.name}", node) for a in node.names]
    return out


def _graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, file in mods.items():
        deps = {resolve(dotted) for dotted, _ in _imports(ast.parse(file.read_text(encoding="utf-8")))}
        graph[name] = {d for d in deps if d and d != name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_circles():
    assert _circles(_graph(_modules())) == []


def test_the_circle_finder_finds_one():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_search_side_never_imports_the_pipelines_collection_config():
    """rag_search reads collections from rag_search.collection_config; it imports rag_pipelines only lazily, inside a
    function, for indexing itself (Dagster runs, OCR engines), and never its config module."""
    for name, file in _modules().items():
        if not name.startswith("rag_search"):
            continue
        tree = ast.parse(file.read_text(encoding="utf-8"))
        top_level = {id(node) for node in tree.body}
        for dotted, node in _imports(tree):
            if dotted.startswith("rag_pipelines"):
                assert id(node) not in top_level, f"{name} imports {dotted} at module level"
                assert not dotted.startswith("rag_pipelines.config"), f"{name} imports {dotted}"


def test_rag_search_top_level_holds_only_what_its_rooms_share():
    top = {f.stem for f in (ROOT / "rag_search").glob("*.py")}
    assert top - SHARED == set(), "put these in a room (store, embedders, retrieval, cli, mcp, web, access)"
    rooms = {d.name for d in (ROOT / "rag_search").iterdir() if (d / "__init__.py").exists()}
    assert {"store", "embedders", "retrieval", "cli", "mcp", "web", "access"} <= rooms


def test_no_name_prefix_shared_by_three_modules_of_a_folder():
    crowded = []
    for pkg in PACKAGES:
        for folder in [ROOT / pkg, *(d for d in (ROOT / pkg).rglob("*") if d.is_dir())]:
            prefixes = Counter(f.stem.split("_")[0] for f in folder.glob("*.py") if "_" in f.stem.strip("_"))
            crowded += [f"{folder.relative_to(ROOT)}/{p}_*" for p, n in prefixes.items() if n >= 3]
    assert crowded == [], "a prefix several modules share is a folder not yet made"
