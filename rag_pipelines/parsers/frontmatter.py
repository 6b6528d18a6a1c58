"""A note's YAML frontmatter → properties, bounded in size, nesting and alias expansion.

Invalid or oversized frontmatter stays in the body as text, as Obsidian shows it, with a warning:
a block over MAX_FRONTMATTER_BYTES is not parsed, and one whose aliases (or `<<` merges) would expand
to more than MAX_YAML_NODES values is refused before any Python object is built (a "billion laughs"
note of 0.5 KB would otherwise become megabytes of tags). Nesting too deep for the parser is an
invalid block, never a crash: flow brackets nested over MAX_FLOW_DEPTH are refused before parsing, and
libyaml (5x faster: 66 vs 337 us for a typical 7-line block, most of a note's parse) reads only blocks
that cannot nest deeper than C_MAX_DEPTH — its composer recurses in C and segfaults on ~30k levels
(`- - - ... x`); the pure-Python loader reads the rest and turns that depth into a RecursionError.
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


class _Bounded:
    """Refuses a document expanding (through aliases and merges) past MAX_YAML_NODES, before building it."""

    def get_single_data(self):
        node = self.get_single_node()
        if node is None:
            return None
        if expanded_size(node, MAX_YAML_NODES) > MAX_YAML_NODES:
            raise _Expands()
        return self.construct_document(node)


class BoundedLoader(_Bounded, yaml.SafeLoader):
    """The pure-Python SafeLoader, bounded."""


# libyaml's loader when PyYAML was built with it (same resolver and constructor: the same values)
BoundedCLoader = type("BoundedCLoader", (_Bounded, yaml.CSafeLoader), {}) if yaml.__with_libyaml__ else None
C_MAX_DEPTH = 1_000  # levels a block may reach for libyaml to read it (10k passed, 30k crashed the process)


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
    flow = flow_depth(block)
    if flow > MAX_FLOW_DEPTH:
        return {}, text, f"invalid frontmatter YAML: brackets nested over {MAX_FLOW_DEPTH} deep"
    try:
        props = _load(block, flow) if block.strip() else {}
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


def _load(block: str, flow: int):
    if BoundedCLoader is not None and depth_bound(block, flow) <= C_MAX_DEPTH:
        try:
            return yaml.load(block, Loader=BoundedCLoader)
        except yaml.YAMLError:
            pass  # the pure-Python loader says what is wrong (its messages name the line and the problem)
    return yaml.load(block, Loader=BoundedLoader)


def depth_bound(block: str, flow: int | None = None) -> int:
    """An upper bound of how deep the block's collections nest. A level deeper needs more indentation than
    its parent's, an indicator ('- ', '? ', ': ': a sequence in a mapping may share its key's column), or a
    flow bracket, so the deepest indentation plus those characters' count plus the flow depth bounds it."""
    indent = max((len(line) - len(line.lstrip(" \t")) for line in block.split("\n")), default=0)
    flow = flow_depth(block) if flow is None else flow
    return indent + block.count("-") + block.count("?") + block.count(":") + flow + 1


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
