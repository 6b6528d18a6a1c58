"""Source code → syntax units: functions, methods, classes and top-level blocks with their line ranges.

Grammars come from tree-sitter-language-pack 0.13 (bundled; 1.x downloads them at run time). A file is cut
into top-level units that cover every non-blank line: definitions (with the comments right above them),
and the code between them. A unit too large for a chunk is split into its parts on demand (`parts`): a
class into its header and members (qualified Class.method), a function into its statements, a Terraform
block into its nested blocks. Files of other languages are cut into blank-line separated paragraphs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterator

# node type → kind of symbol, per grammar (a type missing here is code without a name of its own)
_C = {"function_definition": "function", "struct_specifier": "struct", "union_specifier": "union",
      "enum_specifier": "enum", "type_definition": "typedef", "preproc_def": "macro",
      "preproc_function_def": "macro", "declaration": "declaration"}
_JS = {"function_declaration": "function", "generator_function_declaration": "function",
       "class_declaration": "class", "method_definition": "method", "lexical_declaration": "variable",
       "variable_declaration": "variable", "field_definition": "field"}
_TS = {**_JS, "abstract_class_declaration": "class", "interface_declaration": "interface", "type_alias_declaration":
       "type", "enum_declaration": "enum", "internal_module": "namespace", "module": "namespace",
       "public_field_definition": "field", "method_signature": "method", "abstract_method_signature": "method",
       "function_signature": "function"}
KINDS: dict[str, dict[str, str]] = {
    "python": {"function_definition": "function", "class_definition": "class"},
    "go": {"function_declaration": "function", "method_declaration": "method", "type_declaration": "type",
           "const_declaration": "constant", "var_declaration": "variable"},
    "hcl": {"block": "block"},
    "javascript": _JS, "typescript": _TS, "tsx": _TS,
    "rust": {"function_item": "function", "function_signature_item": "function", "struct_item": "struct",
             "enum_item": "enum", "union_item": "union", "trait_item": "trait", "impl_item": "impl",
             "mod_item": "module", "macro_definition": "macro", "const_item": "constant", "static_item": "static",
             "type_item": "type"},
    "java": {"class_declaration": "class", "interface_declaration": "interface", "enum_declaration": "enum",
             "record_declaration": "record", "annotation_type_declaration": "annotation",
             "method_declaration": "method", "constructor_declaration": "constructor", "field_declaration": "field"},
    "c": _C,
    "cpp": {**_C, "class_specifier": "class", "namespace_definition": "namespace", "field_declaration": "field"},
}
CONTAINERS = frozenset({"class", "interface", "trait", "impl", "module", "namespace", "struct", "enum", "record",
                        "block", "union"})
FUNCTIONS = frozenset({"function", "method", "constructor"})
CLASSES = CONTAINERS - {"module", "namespace", "block"}  # their functions are methods
LOCAL_DEFINITIONS = FUNCTIONS | {"class", "struct", "interface", "enum"}  # named even inside a function
# wrappers whose real declaration sits in a field (None: their only named child)
WRAPPERS = {"decorated_definition": "definition", "export_statement": "declaration", "template_declaration": None,
            "ambient_declaration": None, "expression_statement": None}
TRANSPARENT = frozenset({"body", "preproc_ifdef", "preproc_if", "preproc_else", "preproc_elif",
                         "linkage_specification", "statement_list", "declaration_list"})
BODIES = ("block", "class_body", "declaration_list", "field_declaration_list", "statement_block",
          "compound_statement", "interface_body", "enum_body", "body", "object_type", "enum_variant_list")
IMPORTS = frozenset({"import_statement", "import_from_statement", "future_import_statement", "import_declaration",
                     "package_clause", "package_declaration", "use_declaration", "extern_crate_declaration",
                     "preproc_include", "using_declaration"})
SEPARATOR = {"rust": "::", "cpp": "::"}

# file suffix → (language label, grammar); the label is what `metadata.language` holds
SUFFIXES: dict[str, tuple[str, str]] = {
    "py": ("python", "python"), "pyi": ("python", "python"), "go": ("go", "go"),
    "tf": ("terraform", "hcl"), "tfvars": ("terraform", "hcl"), "hcl": ("hcl", "hcl"),
    "ts": ("typescript", "typescript"), "mts": ("typescript", "typescript"), "cts": ("typescript", "typescript"),
    "tsx": ("typescript", "tsx"), "js": ("javascript", "javascript"), "mjs": ("javascript", "javascript"),
    "cjs": ("javascript", "javascript"), "jsx": ("javascript", "javascript"), "rs": ("rust", "rust"),
    "java": ("java", "java"), "c": ("c", "c"), "h": ("c", "cpp"), "hpp": ("cpp", "cpp"), "hh": ("cpp", "cpp"),
    "hxx": ("cpp", "cpp"), "cc": ("cpp", "cpp"), "cpp": ("cpp", "cpp"), "cxx": ("cpp", "cpp"), "c++": ("cpp", "cpp"),
}
TEXT_LABELS = {"md": "markdown", "markdown": "markdown", "rst": "rst", "txt": "text", "yaml": "yaml", "yml": "yaml",
               "json": "json", "toml": "toml", "sql": "sql", "sh": "shell", "bash": "shell", "zsh": "shell",
               "css": "css", "scss": "css", "html": "html", "xml": "xml", "rb": "ruby", "kt": "kotlin",
               "swift": "swift", "cs": "csharp", "php": "php", "lua": "lua", "proto": "protobuf", "ini": "ini",
               "cfg": "ini", "gradle": "groovy", "scala": "scala", "r": "r", "ex": "elixir", "exs": "elixir"}
NAMES = {"Dockerfile": "dockerfile", "Makefile": "make", "makefile": "make", "GNUmakefile": "make",
         "CMakeLists.txt": "cmake", "Jenkinsfile": "groovy", "Rakefile": "ruby", "Gemfile": "ruby"}


def language_of(path: str) -> tuple[str, str | None]:
    """(language label, tree-sitter grammar or None) of a repository path."""
    name = path.rsplit("/", 1)[-1]
    if name in NAMES:
        return NAMES[name], None
    suffix = name.rsplit(".", 1)[-1].lower() if "." in name.lstrip(".") else ""
    if suffix in SUFFIXES:
        return SUFFIXES[suffix]
    return TEXT_LABELS.get(suffix, "text"), None


@lru_cache(maxsize=None)
def parser(grammar: str):
    from tree_sitter_language_pack import get_parser

    return get_parser(grammar)  # type: ignore[arg-type]


@dataclass
class Unit:
    """Lines start..end (1-based, inclusive) of a file: a definition or the code between definitions."""

    start: int
    end: int
    kind: str  # function, method, class, ..., import, comment, code, text
    name: str = ""  # qualified symbol (Config.parse); a part of a definition carries the definition's name
    own: bool = False  # a definition itself (not code between definitions, nor a part of one)
    container: bool = False  # its parts are definitions of their own (members of a class, blocks of a block)
    header: bool = False  # the opening lines of a split definition (`class Inventory:` and what precedes its parts)
    node: Any = field(default=None, repr=False)  # its declaration node, for parts
    signature: str = ""  # its first line: the context of its parts

    @property
    def lines(self) -> int:
        return self.end - self.start + 1


@dataclass(frozen=True)
class Syntax:
    grammar: str
    lines: list[str]

    @property
    def sep(self) -> str:
        return SEPARATOR.get(self.grammar, ".")


def syntax_units(text: str, grammar: str | None) -> tuple[list[Unit], Syntax | None]:
    """Top-level units covering every non-blank line; paragraphs when there is no grammar."""
    lines = text.split("\n")
    if grammar is None or grammar not in KINDS:
        return paragraph_units(lines, 1, len(lines)), None
    tree = parser(grammar).parse(text.encode("utf-8", "surrogatepass"))
    syn = Syntax(grammar, lines)
    return units_of(syn, list(_flatten(tree.root_node)), 1, len(lines), None), syn


def parts(syn: Syntax, unit: Unit) -> list[Unit]:
    """A unit's parts covering its lines (members of a class, statements of a function); [] when it has none."""
    body = _body(unit.node) if unit.node is not None else None
    if body is None:
        return []
    found = units_of(syn, list(_flatten(body)), unit.start, unit.end, unit)
    return found if len(found) > 1 or (found and found[0].lines < unit.lines) else []


def paragraph_units(lines: list[str], lo: int, hi: int, kind: str = "text", name: str = "") -> list[Unit]:
    """Runs of non-blank lines in lo..hi."""
    out, start = [], None
    for n in range(lo, hi + 2):
        blank = n > hi or not lines[n - 1].strip()
        if blank and start is not None:
            out.append(Unit(start, n - 1, kind, name))
            start = None
        elif not blank and start is None:
            start = n
    return out


def units_of(syn: Syntax, nodes: list, lo: int, hi: int, parent: Unit | None) -> list[Unit]:
    """Units of these nodes within lo..hi, comments joined to the definition below them, gaps filled."""
    units: list[Unit] = []
    for node in nodes:
        unit = _unit(syn, node, parent)
        unit.start, unit.end = max(unit.start, lo), min(unit.end, hi)
        if unit.start > unit.end:
            continue
        if units and unit.start <= units[-1].end:  # two nodes on one line: one unit
            prev = units[-1]
            prev.end = max(prev.end, unit.end)
            if unit.own and not prev.own:
                unit.start, unit.end = prev.start, prev.end
                units[-1] = unit
            continue
        units.append(unit)
    return _fill_gaps(syn, _attach_comments(units), lo, hi, parent)


def _unit(syn: Syntax, node, parent: Unit | None) -> Unit:
    start, end = node.start_point[0] + 1, node.end_point[0] + (1 if node.end_point[1] > 0 else 0)
    end = max(start, end)
    if "comment" in node.type:
        return Unit(start, end, "comment", parent.name if parent else "")
    decl = _declaration(node, syn.grammar)
    kind = KINDS[syn.grammar].get(decl.type)
    if kind is None:
        if parent is not None:
            return Unit(start, end, parent.kind, parent.name, node=node)
        return Unit(start, end, "import" if node.type in IMPORTS else "code", node=node)
    kind, name = _describe(decl, kind, syn.grammar)
    if parent is not None and not parent.container and kind not in LOCAL_DEFINITIONS:
        return Unit(start, end, parent.kind, parent.name, node=node)  # a local variable is no symbol
    if parent is not None and parent.container and parent.name:
        if kind in ("function", "prototype") and parent.kind in CLASSES:
            kind = "method"
        name = f"{parent.name}{syn.sep}{name}" if name else parent.name
    elif parent is not None and parent.name and name:
        name = f"{parent.name}{syn.sep}{name}"
    return Unit(start, end, kind, name or (parent.name if parent else ""), own=bool(name), node=decl,
                signature=_signature(syn, decl), container=kind in CONTAINERS or decl.type == "block")


def _declaration(node, grammar: str):
    """The declaration a wrapper holds (decorators, export, template, namespace statement), else the node."""
    while node.type in WRAPPERS:
        key = WRAPPERS[node.type]
        inner = node.child_by_field_name(key) if key else None
        if inner is None:
            named = [c for c in node.named_children if c.type not in ("template_parameter_list", "decorator")]
            inner = named[-1] if key is None and named else None
            if node.type == "expression_statement" and (inner is None or inner.type not in KINDS[grammar]):
                return node
        if inner is None:
            return node
        node = inner
    return node


def _describe(decl, kind: str, grammar: str) -> tuple[str, str]:
    """(kind, name) of a declaration node."""
    t = decl.type
    if grammar == "hcl" and t == "block":
        return _hcl_block(decl)
    if grammar == "go":
        return _go(decl, kind)
    if t in ("lexical_declaration", "variable_declaration"):
        first = next((c for c in decl.named_children if c.type == "variable_declarator"), None)
        value = first.child_by_field_name("value") if first is not None else None
        if value is not None and value.type in ("arrow_function", "function_expression", "function", "generator_function"):
            kind = "function"
        elif value is not None and value.type in ("class", "class_expression"):
            kind = "class"
        return kind, _text(first.child_by_field_name("name")) if first is not None else ""
    if t == "impl_item":
        return kind, _text(decl.child_by_field_name("type")).split("<")[0]
    if t in ("declaration", "field_declaration", "type_definition", "function_definition") and grammar in ("c", "cpp"):
        name, is_function = _c_declarator(decl)
        inner = decl.child_by_field_name("type") if decl.child_by_field_name("declarator") is None else None
        if inner is not None and inner.type in KINDS["cpp"]:  # `struct Entry {...};`: the type is what it declares
            kind = KINDS["cpp"][inner.type]
        elif t == "field_declaration":
            kind = "method" if is_function else "field"
        elif t == "declaration" and is_function:
            kind = "prototype"
        return kind, name
    if t == "field_declaration":  # java
        declarator = decl.child_by_field_name("declarator")
        return kind, _text(declarator.child_by_field_name("name")) if declarator is not None else ""
    name = decl.child_by_field_name("name")
    return kind, _text(name) if name is not None else ""


def _go(decl, kind: str) -> tuple[str, str]:
    if decl.type == "method_declaration":
        receiver = decl.child_by_field_name("receiver")
        types = [n for n in _walk(receiver) if n.type == "type_identifier"] if receiver is not None else []
        name = _text(decl.child_by_field_name("name"))
        return kind, f"{_text(types[0])}.{name}" if types else name
    if decl.type in ("type_declaration", "const_declaration", "var_declaration"):
        spec = next((c for c in decl.named_children if c.type.endswith("_spec")), None)
        if spec is None:
            return kind, ""
        value = spec.child_by_field_name("type")
        if decl.type == "type_declaration" and value is not None:
            kind = {"struct_type": "struct", "interface_type": "interface"}.get(value.type, "type")
        return kind, _text(spec.child_by_field_name("name"))
    name = decl.child_by_field_name("name")
    return kind, _text(name) if name is not None else ""


def _hcl_block(decl) -> tuple[str, str]:
    """resource "aws_instance" "web" → (resource, aws_instance.web); variable "region" → (variable, var.region)."""
    ident = next((c for c in decl.named_children if c.type == "identifier"), None)
    block = _text(ident) if ident is not None else "block"
    labels = [_text(c).strip('"') for c in decl.named_children if c.type in ("string_lit", "identifier")][1:]
    prefix = {"resource": "", "data": "data.", "variable": "var.", "module": "module.", "output": "output.",
              "provider": "provider."}.get(block)
    if prefix is None:
        return block, ".".join([block, *labels])
    return block, prefix + ".".join(labels) if labels else block


def _c_declarator(decl) -> tuple[str, bool]:
    """Name of a C/C++ declaration (through pointer and function declarators), and whether it is a function."""
    node, is_function = decl, False
    while True:
        nxt = node.child_by_field_name("declarator")
        if nxt is None:
            break
        is_function |= nxt.type == "function_declarator"
        node = nxt
    if node is decl:
        inner = decl.child_by_field_name("type")
        name = inner.child_by_field_name("name") if inner is not None else None
        return (_text(name) if name is not None else ""), False
    return _text(node), is_function


def _body(decl):
    body = decl.child_by_field_name("body")
    if body is None:
        body = next((c for c in decl.named_children if c.type in BODIES), None)
    if body is None and decl.type == "type_declaration":  # go: type X struct {...}
        spec = next((c for c in decl.named_children if c.type == "type_spec"), None)
        value = spec.child_by_field_name("type") if spec is not None else None
        body = next((c for c in value.named_children if c.type.endswith("_list")), None) if value is not None else None
    return body


def _flatten(node) -> Iterator:
    """Named children, through transparent containers (HCL bodies, include guards, extern "C", statement lists)."""
    for child in node.named_children:
        if child.type in TRANSPARENT:
            yield from _flatten(child)
        else:
            yield child


def _walk(node) -> Iterator:
    yield node
    for child in node.named_children:
        yield from _walk(child)


def _attach_comments(units: list[Unit]) -> list[Unit]:
    """Comments right above a definition (no blank line between) become part of it."""
    out: list[Unit] = []
    for unit in units:
        if unit.own:
            while out and out[-1].kind == "comment" and out[-1].end + 1 == unit.start:
                unit.start = out.pop().start
        elif unit.kind == "comment" and out and out[-1].kind == "comment" and out[-1].end + 1 == unit.start:
            out[-1].end = unit.end
            continue
        out.append(unit)
    return out


def _fill_gaps(syn: Syntax, units: list[Unit], lo: int, hi: int, parent: Unit | None) -> list[Unit]:
    """Units for non-blank lines no node covers (a class's header line, closing braces, #endif)."""
    kind, name = (parent.kind, parent.name) if parent is not None else ("code", "")
    out, line = [], lo
    for unit in units + [Unit(hi + 1, hi + 1, "end")]:
        gaps = paragraph_units(syn.lines, line, unit.start - 1, kind, name)
        if parent is not None and gaps and gaps[0].start == lo:
            gaps[0].header = True
        out.extend(gaps)
        if unit.kind != "end":
            out.append(unit)
        line = unit.end + 1
    return out


def _signature(syn: Syntax, decl) -> str:
    line = syn.lines[decl.start_point[0]].strip() if decl.start_point[0] < len(syn.lines) else ""
    line = line.rstrip("{").rstrip()
    return line if len(line) <= 120 else line[:119] + "…"


def _text(node) -> str:
    return node.text.decode("utf-8", "replace") if node is not None and node.text is not None else ""
