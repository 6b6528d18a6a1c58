"""A note's YAML frontmatter → properties, bounded in size, nesting and alias expansion.

Invalid or oversized frontmatter stays in the body as text, as Obsidian shows it, with a warning:
a block over MAX_FRONTMATTER_BYTES is not parsed, and one whose aliases (or `<<` merges) would expand
to more than MAX_YAML_NODES values is refused before any Python object is built (a "billion laughs"
note of 0.5 KB would otherwise become megabytes of tags). Nesting too deep for the parser is an
invalid block, never a crash: the pure-Python loader is used on purpose (libyaml's segfaults on
100k nested brackets), and flow brackets nested over MAX_FLOW_DEPTH are refused before parsing.
"""

from __future__ import annotations

import re

import yaml
from yaml.nodes import MappingNode, SequenceNode

MAX_FRONTMATTER_BYTES = 64 * 1024  # a bigger block is kept as text, not read as properties
MAX_YAML_NODES = 100_000  # values a frontmatter may expand to, counting every alias as a copy
MAX_FLOW_DEPTH = 50  # [ { nesting; PyYAML's scanner is quadratic in it
END = re.compile(r"^(?:---|\.\.\.)\s*$", re.MULTILINE)
BRACKETS = re.compile(r"[\[\]{}]")


class _Expands(Exception):
    pass


class BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses a document expanding (through aliases and merges) past MAX_YAML_NODES."""

    def get_single_data(self):
        node = self.get_single_node()
        if node is None:
            return None
        if expanded_size(node, MAX_YAML_NODES) > MAX_YAML_NODES:
            raise _Expands()
        return self.construct_document(node)


def split_frontmatter(text: str) -> tuple[dict, str, str | None]:
    """(properties, body, warning). Frontmatter not read as properties stays in the body as text."""
    if not text.startswith("---\n"):
        return {}, text, None
    end = END.search(text, 4)
    if not end:
        return {}, text, None
    block, body = text[4 : end.start()], text[end.end() :].lstrip("\n")
    if len(block.encode("utf-8", errors="replace")) > MAX_FRONTMATTER_BYTES:
        return {}, text, f"frontmatter over {MAX_FRONTMATTER_BYTES // 1024} KB not read as properties; shorten it"
    if flow_depth(block) > MAX_FLOW_DEPTH:
        return {}, text, f"invalid frontmatter YAML: brackets nested over {MAX_FLOW_DEPTH} deep"
    try:
        props = yaml.load(block, Loader=BoundedLoader) if block.strip() else {}
    except _Expands:
        return {}, text, (f"frontmatter not read: its aliases expand to over {MAX_YAML_NODES:,} values; "
                          "write the values out instead of using YAML aliases")
    except RecursionError:
        return {}, text, "invalid frontmatter YAML: nested too deeply"
    except (yaml.YAMLError, ValueError, TypeError) as exc:  # ValueError: e.g. an int of 5,000 digits
        return {}, text, f"invalid frontmatter YAML: {(str(exc).splitlines() or [type(exc).__name__])[0]}"
    if not isinstance(props, dict):
        return {}, text, "frontmatter is not a mapping"
    return props, body, None


def flow_depth(block: str) -> int:
    """Deepest nesting of [ and { (brackets inside quotes count too: an upper bound)."""
    depth = deepest = 0
    for bracket in BRACKETS.findall(block):
        depth = depth + 1 if bracket in "[{" else max(0, depth - 1)
        deepest = max(deepest, depth)
    return deepest


def expanded_size(root, cap: int) -> int:
    """Nodes under root with every alias copied out; stops counting past cap (a recursive alias is over)."""
    sizes: dict[int, int] = {}
    visiting: set[int] = set()
    stack: list[tuple[object, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            visiting.discard(key)
            sizes[key] = min(cap + 1, 1 + sum(sizes[id(c)] for c in _children(node)))
        elif key in visiting:
            return cap + 1
        elif key not in sizes:
            visiting.add(key)
            stack.append((node, True))
            stack.extend((c, False) for c in _children(node) if id(c) not in sizes)
    return sizes[id(root)]


def _children(node) -> list:
    if isinstance(node, SequenceNode):
        return node.value
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    return []
