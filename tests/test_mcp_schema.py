"""tools/list a model can use: every parameter described in one line, compact schemas, honest metadata enums,
and an empty index that names the database it opened. In-process server, temp index, fake embedder."""

from __future__ import annotations

import asyncio
import json

import pytest
from conftest import add_doc
from mcp.client import Client

from rag_search.mcp import server as mcp_server
from rag_search.config import Paths, Settings
from rag_search.mcp.metadata import metadata_schema
from rag_search.mcp.schema import undescribed
from rag_search.mcp.server import RagContext, build_server
from rag_search.retrieval import SearchEngine
from rag_search.store import Store


@pytest.fixture
def served(tmp_path, fake_embedder, monkeypatch):
    monkeypatch.setenv("LOCAL_RAG_HOME", str(tmp_path / "home"))
    paths = Paths.from_env()
    paths.home.mkdir()
    store = Store.open(paths.db)
    monkeypatch.setattr(mcp_server, "_context", RagContext(paths, Settings(), store, fake_embedder,
                                                           SearchEngine(store, fake_embedder, Settings().search)))
    yield paths, store
    store.close()


def listed_tools():
    async def go():
        async with Client(build_server()) as client:
            return await client.list_tools()

    return asyncio.run(go())


def call(name: str, args: dict):
    async def go():
        async with Client(build_server()) as client:
            return await client.call_tool(name, args)

    return asyncio.run(go())


def test_every_parameter_has_a_one_line_description_and_no_generator_noise(served):
    assert undescribed(build_server()) == []
    for tool in listed_tools().tools:
        assert "\n        " not in tool.description  # docstring indentation is not sent
        for name, prop in tool.input_schema["properties"].items():
            where = f"{tool.name}.{name}"
            assert prop.get("description") and "\n" not in prop["description"] and len(prop["description"]) <= 130, where
            assert "title" not in prop and {"type": "null"} not in prop.get("anyOf", []), where
        assert "title" not in tool.input_schema
    search = next(t for t in listed_tools().tools if t.name == "rag_search").input_schema["properties"]
    assert search["top_k"] == {"type": "integer", "minimum": 1, "maximum": 200, "description": "How many results to return."}


def test_every_parameter_shows_its_bounds(served):
    """What a client may send is in the schema: a length for every string, a count for every list and object,
    a range for every integer (the server refuses anything past them, see test_mcp_security.py)."""
    def unbounded(schema: dict) -> list[str]:
        if "anyOf" in schema:
            return [p for branch in schema["anyOf"] for p in unbounded(branch)]
        kind = schema.get("type")
        need = {"string": ["maxLength"], "array": ["maxItems"], "integer": ["minimum", "maximum"],
                "object": ["maxProperties"]}.get(kind, [])
        missing = [f"{kind} without {n}" for n in need if n not in schema and "enum" not in schema]
        for sub in ("items", "additionalProperties"):
            if isinstance(schema.get(sub), dict):
                missing += unbounded(schema[sub])
        return missing

    problems = {f"{t.name}.{name}": unbounded(prop) for t in listed_tools().tools
                for name, prop in t.input_schema["properties"].items()}
    assert {k: v for k, v in problems.items() if v} == {}
    search = next(t for t in listed_tools().tools if t.name == "rag_search").input_schema["properties"]
    assert search["query"]["maxLength"] == 2_000 and search["days"]["maximum"] == 365_000
    assert search["path_prefix"]["pattern"] == r"^[^\x00]*$"


def test_metadata_enums_only_for_short_categories_and_common_values_are_not_called_complete(served, fake_embedder):
    _, store = served
    for i in range(12):
        add_doc(store, fake_embedder, "notes", f"n{i}.md", f"note {i}", metadata={
            "status": ["draft", "done"][i % 2],  # a category: enum
            "permalink": f"page-{i}",  # an identifier: no enum
            "project": ["alpha", "beta", "gamma"][i % 3] if i < 9 else f"one-off-{i}",  # 6 values, 3 common
            "description": f"A sentence long enough to be a description, number {i}."})
    schema = metadata_schema(store)
    assert set(schema["properties"]) == {"status", "project"}  # project: 6 values on 12 items, all listed
    assert schema["properties"]["status"]["anyOf"][0] == {"enum": ["done", "draft"]}
    text = schema["description"]
    assert "permalink" in text and "description" in text and "page-3" not in text and "complete" not in text
    many = {f"v{i}" for i in range(30)}
    for i, v in enumerate(sorted(many)):
        add_doc(store, fake_embedder, "notes", f"m{i}.md", "x", metadata={"project": v})
    schema = metadata_schema(store)
    assert "project" not in schema["properties"]  # 36 distinct values: no enum, so no false "these are all"
    assert "project (common values: alpha, beta, gamma)" in schema["description"]
    assert len(json.dumps(schema)) < 2_500


def test_an_empty_index_names_the_database_and_how_a_client_sets_the_home(served):
    paths, _ = served
    result = call("rag_search", {"query": "anything"})
    msg = result.content[0].text
    assert result.is_error and str(paths.db) in msg and f"LOCAL_RAG_HOME={paths.home}" in msg
    assert '"env": {"LOCAL_RAG_HOME"' in msg and "rag_index" in msg
    listed = json.loads(call("rag_list_collections", {}).content[0].text)
    assert listed["collections"] == [] and str(paths.db) in listed["note"]
    assert str(paths.db) in call("rag_search_by_tag", {"tag": "x"}).content[0].text


def test_an_unset_home_says_it_is_the_default_one(served, monkeypatch):
    monkeypatch.delenv("LOCAL_RAG_HOME")
    msg = call("rag_search", {"query": "anything"}).content[0].text
    assert "LOCAL_RAG_HOME is not set" in msg and "does not pass it" in msg
