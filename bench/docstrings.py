"""A corpus of real English technical prose for benchmarks: docstrings of installed Python packages."""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def docstrings(limit: int, min_words: int = 25, max_words: int = 120) -> list[str]:
    """Up to `limit` distinct docstrings (first paragraphs joined) from the stdlib and site-packages."""
    roots = [Path(p) for p in sys.path if p.endswith(("site-packages", "python3.11")) and Path(p).is_dir()]
    seen, out = set(), []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            if "test" in path.parts or len(out) >= limit:
                continue
            try:
                tree = ast.parse(path.read_text(encoding="utf-8"))
            except (SyntaxError, UnicodeDecodeError, OSError, ValueError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef, ast.Module)):
                    doc = ast.get_docstring(node)
                    if not doc:
                        continue
                    words = " ".join(doc.split()).split()
                    if len(words) < min_words:
                        continue
                    text = " ".join(words[:max_words])
                    if text not in seen:
                        seen.add(text)
                        out.append(text)
                        if len(out) >= limit:
                            return out
    return out
