"""Code chunks follow syntax (golden boundaries per language), cover every line and fit the embedder's window.

The golden files hold, per chunk: its lines, kind, main symbol, all symbols, context (the signatures it
stands under) and size in the builtin model's tokens, at a 96-token budget so that classes and functions
are split. Regenerate after a deliberate chunker change, and review the diff, with:
    UPDATE_GOLDEN=1 python -m pytest tests/test_code_chunks.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rag_pipelines.chunking.prose import chunk_spec
from rag_pipelines.chunking.code import code_chunks
from rag_pipelines.config import Chunking
from rag_pipelines.parsers.code import language_of, syntax_units
from rag_search.records import Document, Section

CODE = Path(__file__).parent / "fixtures" / "code"
GOLDEN = Path(__file__).parent / "fixtures" / "golden" / "code"
CASES = sorted(p.name for p in CODE.iterdir())


def chunks_of(name: str, text: str, embedder, max_tokens: int | None = None):
    label, grammar = language_of(name)
    doc = Document(title=name, sections=(Section(text),), ts=1_700_000_000, metadata={"language": label})
    spec = chunk_spec(embedder.max_input_tokens, Chunking(max_tokens=max_tokens))
    return code_chunks(doc, embedder.count_tokens, spec, grammar), spec


def test_every_language_of_the_issue_has_a_golden_case():
    labels = {language_of(name)[0] for name in CASES}
    assert labels >= {"python", "go", "terraform", "typescript", "javascript", "rust", "java", "c", "cpp", "markdown"}


@pytest.mark.parametrize("name", CASES)
def test_golden_chunk_boundaries(name, builtin_embedder):
    chunks, _ = chunks_of(name, (CODE / name).read_text(encoding="utf-8"), builtin_embedder, max_tokens=96)
    got = [{"lines": c.metadata["lines"], "kind": c.metadata["kind"], "symbol": c.metadata.get("symbol"),
            "symbols": c.metadata.get("symbols", []), "context": list(c.heading_path),
            "tokens": builtin_embedder.count_tokens(c.text)} for c in chunks]
    golden = GOLDEN / f"{name}.json"
    if os.environ.get("UPDATE_GOLDEN") or not golden.exists():
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(json.dumps(got, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    assert got == json.loads(golden.read_text(encoding="utf-8"))


@pytest.mark.parametrize("max_tokens", [None, 96, 40])
def test_chunks_cover_every_line_in_order_and_fit_the_window(max_tokens, builtin_embedder):
    for name in CASES:
        text = (CODE / name).read_text(encoding="utf-8")
        chunks, spec = chunks_of(name, text, builtin_embedder, max_tokens)
        lines = text.split("\n")
        covered, last = set(), 0
        for c in chunks:
            start, end = map(int, c.metadata["lines"].split("-"))
            assert start >= last, (name, c.metadata["lines"])  # in order, never overlapping
            last = end
            covered |= set(range(start, end + 1))
            assert builtin_embedder.count_tokens(c.text) <= spec.window, (name, c.metadata["lines"])
            prefix, body = c.text.split("\n\n", 1)
            assert prefix == " > ".join((name,) + c.heading_path)
            whole = "\n".join(lines[start - 1 : end])
            assert body == whole or (start == end and " ".join(body.split()) in " ".join(whole.split()))  # a cut line
        assert {n for n, line in enumerate(lines, 1) if line.strip()} <= covered, name


def test_each_chunk_says_where_it_stands(builtin_embedder):
    text = (CODE / "inventory.py").read_text(encoding="utf-8")
    chunks, _ = chunks_of("inventory.py", text, builtin_embedder, max_tokens=96)
    reserve = [c for c in chunks if c.metadata.get("symbol") == "Inventory.reserve"]
    assert len(reserve) == 3 and {c.metadata["kind"] for c in reserve} == {"method"}
    assert reserve[0].heading_path == ("class Inventory:",)  # the class header as context
    assert reserve[1].heading_path[-1].startswith("def reserve(self, sku: str")  # and the signature for its parts
    assert all(c.metadata["language"] == "python" and c.ts == 1_700_000_000 for c in chunks)
    chunks, _ = chunks_of("inventory.py", text, builtin_embedder)  # the model's whole window: fewer, larger
    assert [c.metadata["lines"] for c in chunks] == ["1-29", "31-45", "48-62"]
    ts = (CODE / "checkout.ts").read_text(encoding="utf-8")
    chunks, _ = chunks_of("checkout.ts", ts, builtin_embedder, max_tokens=96)
    total = next(c for c in chunks if c.metadata.get("symbol") == "CheckoutService.totalCents")
    assert "total cents" in total.keywords and "pending carts" in total.keywords  # split identifiers, not shown
    assert "total cents" not in total.text


def test_a_minified_line_and_a_file_without_grammar(builtin_embedder):
    line = "var " + ",".join(f"a{i}=function(b){{return b*{i}}}" for i in range(400)) + ";"
    chunks, spec = chunks_of("bundle.js", f"// header\n{line}\n", builtin_embedder)
    assert len(chunks) > 3 and all(builtin_embedder.count_tokens(c.text) <= spec.window for c in chunks)
    assert {c.metadata["lines"] for c in chunks[1:]} == {"2-2"}
    chunks, _ = chunks_of("Dockerfile", "FROM python:3.12\n\nRUN pip install shop\n", builtin_embedder)
    assert [c.metadata["kind"] for c in chunks] == ["text"] and chunks[0].metadata["language"] == "dockerfile"
    empty, _ = chunks_of("empty.py", "\n\n", builtin_embedder)
    assert [c.text for c in empty] == ["empty.py"]


def test_languages_and_syntax_errors():
    assert language_of("src/app.tsx") == ("typescript", "tsx") and language_of("include/a.h") == ("c", "cpp")
    assert language_of("main.tf") == ("terraform", "hcl") and language_of("notes.md") == ("markdown", None)
    assert language_of("LICENSE") == ("text", None)
    units, _ = syntax_units("def broken(:\n    pass\n\nclass Fine:\n    x = 1\n", "python")
    assert units[-1].name == "Fine" and units[-1].kind == "class"  # a syntax error stays local
