"""Chunk boundaries are deterministic (golden files) and never exceed the embedder's window.

Regenerate the golden files after a deliberate chunker change with:
    UPDATE_GOLDEN=1 python -m pytest tests/test_chunking.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rag_pipelines.chunking.prose import ChunkSpec, chunk_document, chunk_spec, window
from rag_pipelines.config import Chunking
from rag_pipelines.parsers import parse
from rag_search.records import Document, Section

FIXTURES = Path(__file__).parent / "fixtures"
GOLDEN = FIXTURES / "golden"
CASES = ["vault/Projects/Work/Kube Upgrade.md", "vault/Daily/2024-03-15.md", "vault/Archive/bom crlf.md"]


def long_note() -> bytes:
    paras = [f"Paragraph {i}. " + " ".join(f"word{i}_{j} is here." for j in range(40)) for i in range(6)]
    code = "```python\n" + "\n".join(f"value_{i} = compute({i})" for i in range(30)) + "\n```"
    return ("# Long\n\n" + "\n\n".join(paras[:3]) + "\n\n## Code\n\n" + code + "\n\n## More\n\n"
            + "\n\n".join(paras[3:])).encode()


def chunks_as_json(chunks, count):
    return [{"index": c.index, "heading_path": list(c.heading_path), "page": c.page, "tokens": count(c.text),
             "text": c.text} for c in chunks]


@pytest.mark.parametrize("case", CASES + ["long-note.md"])
def test_golden_chunk_boundaries(case, builtin_embedder):
    data = long_note() if case == "long-note.md" else (FIXTURES / case).read_bytes()
    doc = parse(data, case, 1_700_000_000 * 10**9)
    count = builtin_embedder.count_tokens
    got = chunks_as_json(chunk_document(doc, count, chunk_spec(builtin_embedder.max_input_tokens)), count)
    golden = GOLDEN / (Path(case).stem + ".json")
    if os.environ.get("UPDATE_GOLDEN") or not golden.exists():
        golden.write_text(json.dumps(got, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    assert got == json.loads(golden.read_text(encoding="utf-8"))


def test_chunks_fit_the_window_and_code_stays_whole(builtin_embedder):
    count = builtin_embedder.count_tokens
    spec = chunk_spec(builtin_embedder.max_input_tokens)
    assert spec.max_tokens == 254
    chunks = chunk_document(parse(long_note(), "long.md"), count, spec)
    assert len(chunks) > 3
    assert all(count(c.text) <= spec.max_tokens for c in chunks)
    code = [c for c in chunks if "```python" in c.text]
    assert len(code) == 1 and code[0].text.count("```") == 2 and code[0].heading_path == ("Long", "Code")
    assert all(c.text.startswith("Long") for c in chunks)  # context prefix: title and headings


def test_small_sections_merge_and_keep_their_heading_lines(builtin_embedder):
    doc = parse(b"# T\n\n## A\nalpha\n\n## B\nbeta\n", "t.md")
    [chunk] = chunk_document(doc, builtin_embedder.count_tokens, chunk_spec(256))
    assert chunk.heading_path == ("T",) and chunk.text == "T\n\n## A\n\nalpha\n\n## B\n\nbeta"


def test_pdf_pages_are_never_merged(builtin_embedder):
    doc = Document("R", (Section("page one", page=1), Section("page two", page=2)))
    chunks = chunk_document(doc, builtin_embedder.count_tokens, chunk_spec(256))
    assert [(c.page, c.text) for c in chunks] == [(1, "R\n\npage one"), (2, "R\n\npage two")]


def test_plain_text_windows_overlap(builtin_embedder):
    count = builtin_embedder.count_tokens
    text = " ".join(f"Sentence number {i} ends here." for i in range(200))
    pieces = window(text, 60, 15, count)
    assert all(n <= 60 for _, n in pieces) and len(pieces) > 10
    for (a, _), (b, _) in zip(pieces, pieces[1:]):
        assert a.split(". ")[-1].rstrip(".") in b  # the next window repeats the previous one's end


def test_chunk_size_override_is_capped_at_the_window():
    assert chunk_spec(256, Chunking(max_tokens=1000)) == ChunkSpec(254, 32, window=254)
    assert chunk_spec(8192, Chunking(max_tokens=1000, overlap_tokens=64)) == ChunkSpec(1000, 64, window=8190)


def test_a_title_only_note_is_still_one_chunk(builtin_embedder):
    chunks = chunk_document(parse(b"# Meeting with Bob\n", "m.md"), builtin_embedder.count_tokens, chunk_spec(256))
    assert [c.text for c in chunks] == ["Meeting with Bob"]


def test_giant_word_runs_are_cut(builtin_embedder):
    count = builtin_embedder.count_tokens
    doc = Document("X", (Section("a" * 5000),))
    chunks = chunk_document(doc, count, chunk_spec(256))
    assert all(count(c.text) <= 254 for c in chunks) and "".join(c.text.split("\n\n", 1)[1] for c in chunks) == "a" * 5000


def test_chunking_one_huge_line_keeps_memory_flat(tmp_path):
    """A 1.6 MB line without sentence ends was tokenised whole: the first version peaked at ~1 GB here."""
    import subprocess
    import sys

    code = (
        "import re\n"
        "from rag_pipelines.chunking.prose import chunk_document, chunk_spec\n"
        "from rag_pipelines.parsers import parse\n"
        "from rag_search.embedders.builtin import BuiltinEmbedder\n"
        "e = BuiltinEmbedder()\n"
        "doc = parse(('a | b ' * 270_000).encode(), 'flood.md')\n"
        "n = len(chunk_document(doc, e.count_tokens, chunk_spec(256)))\n"
        "hwm = int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))\n"
        "print(n, hwm // 1024)\n"  # this process's own peak (ru_maxrss would include the forking parent's)
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    chunks, peak_mb = map(int, out.stdout.split())
    assert chunks > 1000 and peak_mb < 300, (chunks, peak_mb)


@pytest.mark.parametrize("plain", [False, True])
def test_chunk_token_counts_are_the_embedders_counts(plain, builtin_embedder):
    """The chunker adds up the counts of the parts it joins; the sum must be the count of the joined text
    (items record it per chunk without tokenising every chunk a second time)."""
    count = builtin_embedder.count_tokens
    spec = chunk_spec(builtin_embedder.max_input_tokens)
    docs = [parse((FIXTURES / case).read_bytes(), case) for case in CASES] + [parse(long_note(), "long.md")]
    docs += [parse(p.read_bytes(), p.name) for p in sorted((FIXTURES / "vault").rglob("*.md"))]
    chunks = [c for doc in docs for c in chunk_document(doc, count, spec, plain=plain)]
    counted = [c for c in chunks if c.tokens is not None]
    assert len(counted) > 20 and len(counted) >= len(chunks) - len(docs)  # only title-only notes go uncounted
    assert [c.tokens for c in counted] == [count(c.vector_text) for c in counted]
