"""What one source file defines and imports (:func:`facts`), for the workspace index.

With a tree-sitter grammar (``languages.py``) the definitions and imports come from the
syntax tree; without one (another language, a grammar that failed to load) the
definitions come from the regular expressions of ``index.py`` and there are no imports.

- :class:`Definition`: a name, its kind (``languages.KINDS``) and its 0-based line span
  ``[line, end)``.
- :class:`Import`: one imported module as written (``module``, with ``level`` leading
  dots for a Python relative import), the local name it is bound to (``local``: ``import
  a.b as c`` binds ``c``; ``const x = require('./x')`` binds ``x``) and the names taken
  from it (``names``: ``(imported, local)`` pairs). ``imports.py`` resolves them to files.

Errors: none raised; text that does not parse gives what the parser recovered. See
docs/architecture.md ("The workspace index").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .index import _index
from .languages import grammar


@dataclass(frozen=True, slots=True)
class Definition:
    name: str
    kind: str
    line: int  # 0-based first line
    end: int  # 0-based line after the last
    depth: int = 0  # how many definitions enclose it (0: top level; 1: a class member, ...)
    in_function: bool = False  # inside a function or method (a local)


@dataclass(frozen=True, slots=True)
class Import:
    module: str
    level: int = 0
    local: str | None = None
    names: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Facts:
    """A file's definitions (in line order) and imports (in order)."""

    definitions: tuple[Definition, ...]
    imports: tuple[Import, ...]


def facts(text: str, language: str) -> Facts:
    """The definitions and imports of ``text`` (a whole file) in the index's
    ``language`` (``languages.language_of``)."""
    g = grammar(language)
    if g is None:
        _lines, defs = _index(text, language)
        return Facts(
            tuple(Definition(n, "function", ln, ln + 1) for n, ln in sorted(defs.items(), key=lambda x: x[1])), ()
        )
    data = text.encode("utf-8", "surrogatepass")
    tree = g.parser.parse(data)
    root = tree.root_node
    out: list[Definition] = []
    seen: set[tuple[str, int]] = set()
    for _pattern, caps in _matches(g.defs, root):
        name_nodes = caps.get("name") or []
        for key, nodes in caps.items():
            if not key.startswith("def."):
                continue
            for node in nodes:
                for nm in name_nodes:
                    name = _text(data, nm)
                    at = (name, nm.start_point[0])
                    if not name or at in seen:
                        continue
                    seen.add(at)
                    out.append(Definition(name, key[4:], node.start_point[0], node.end_point[0] + 1))
    out.sort(key=lambda d: (d.line, -d.end))
    out = _nest(out)
    imports: list[Import] = []
    reader = _IMPORT_READERS.get(language)
    if reader is not None:
        for _pattern, caps in _matches(g.imports, root):
            for node in caps.get("import", []):
                imports.extend(reader(node, data))
    return Facts(tuple(out), tuple(imports))


def _nest(defs: list[Definition]) -> list[Definition]:
    """``defs`` (sorted by line, then longest first) with ``depth`` and ``in_function``
    set from which definitions enclose which."""
    out: list[Definition] = []
    stack: list[Definition] = []
    for d in defs:
        while stack and not (stack[-1].line <= d.line and d.end <= stack[-1].end and stack[-1] is not d):
            stack.pop()
        enclosing = [o for o in stack if (o.line, o.end) != (d.line, d.end)]
        nd = Definition(
            d.name, d.kind, d.line, d.end, len(enclosing), any(o.kind in ("function", "method") for o in enclosing)
        )
        out.append(nd)
        if d.end - d.line > 1:
            stack.append(nd)
    return out


def _matches(query: Any, node: Any) -> list[tuple[int, dict[str, list[Any]]]]:
    import tree_sitter

    return tree_sitter.QueryCursor(query).matches(node)


def _text(data: bytes, node: Any) -> str:
    return data[node.start_byte : node.end_byte].decode("utf-8", "replace")


def _unquote(s: str) -> str:
    s = s.strip()
    if len(s) >= 2 and s[0] in "'\"`<" and s[-1] in "'\"`>":
        return s[1:-1]
    return s


# ------------------------------------------------------------------ import readers
def _python(node: Any, data: bytes) -> list[Import]:
    if node.type == "import_statement":
        out = []
        for child in node.named_children:
            if child.type == "dotted_name":
                name = _text(data, child)
                out.append(Import(name, 0, name))
            elif child.type == "aliased_import":
                mod, alias = child.child_by_field_name("name"), child.child_by_field_name("alias")
                if mod is not None:
                    out.append(Import(_text(data, mod), 0, _text(data, alias) if alias is not None else None))
        return out
    mod_node = node.child_by_field_name("module_name")
    if mod_node is None:
        return []
    level, module = 0, ""
    if mod_node.type == "relative_import":
        for child in mod_node.children:
            if child.type == "import_prefix":
                level = _text(data, child).count(".")
            elif child.type == "dotted_name":
                module = _text(data, child)
    else:
        module = _text(data, mod_node)
    names: list[tuple[str, str]] = []
    for child in node.children_by_field_name("name"):
        if child.type == "dotted_name":
            n = _text(data, child)
            names.append((n, n))
        elif child.type == "aliased_import":
            n, a = child.child_by_field_name("name"), child.child_by_field_name("alias")
            if n is not None:
                names.append((_text(data, n), _text(data, a) if a is not None else _text(data, n)))
    return [Import(module, level, None, tuple(names))]


def _javascript(node: Any, data: bytes) -> list[Import]:
    if node.type == "variable_declarator":  # const x = require('./x')
        value = node.child_by_field_name("value")
        args = value.child_by_field_name("arguments") if value is not None else None
        strings = [c for c in (args.named_children if args is not None else []) if c.type == "string"]
        if not strings:
            return []
        source = _unquote(_text(data, strings[0]))
        target = node.child_by_field_name("name")
        if target is None:
            return [Import(source)]
        if target.type == "identifier":
            return [Import(source, 0, _text(data, target))]
        names = []
        for c in target.named_children:
            if c.type == "shorthand_property_identifier_pattern":
                names.append((_text(data, c), _text(data, c)))
            elif c.type == "pair_pattern":
                k, v = c.child_by_field_name("key"), c.child_by_field_name("value")
                if k is not None and v is not None:
                    names.append((_text(data, k), _text(data, v)))
        return [Import(source, 0, None, tuple(names))]
    src = node.child_by_field_name("source")
    if src is None:
        return []
    source = _unquote(_text(data, src))
    local: str | None = None
    names = []
    for clause in node.named_children:
        if clause.type != "import_clause":
            continue
        for c in clause.named_children:
            if c.type == "identifier":
                names.append(("default", _text(data, c)))
            elif c.type == "namespace_import":
                ids = [x for x in c.named_children if x.type == "identifier"]
                if ids:
                    local = _text(data, ids[0])
            elif c.type == "named_imports":
                for spec in c.named_children:
                    if spec.type != "import_specifier":
                        continue
                    n, a = spec.child_by_field_name("name"), spec.child_by_field_name("alias")
                    if n is not None:
                        names.append((_text(data, n), _text(data, a if a is not None else n)))
    return [Import(source, 0, local, tuple(names))]


def _go(node: Any, data: bytes) -> list[Import]:
    path = node.child_by_field_name("path")
    if path is None:
        return []
    source = _unquote(_text(data, path))
    name = node.child_by_field_name("name")
    local = _text(data, name) if name is not None else source.rstrip("/").rsplit("/", 1)[-1]
    return [Import(source, 0, local)]


_RUST_SPLIT = re.compile(r"\s*::\s*")


def _rust_paths(text: str) -> list[tuple[str, str]]:
    """Expand a use tree (``a::{b, c::d as e}``) into (path, local) pairs."""
    text = text.strip()
    brace = text.find("{")
    if brace < 0:
        path, _, alias = text.partition(" as ")
        path = path.strip()
        last = _RUST_SPLIT.split(path)[-1]
        return [(path, alias.strip() or last)]
    head = text[:brace].rstrip().rstrip(":").rstrip()
    inner = text[brace + 1 : text.rfind("}")]
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        if p.strip():
            for path, local in _rust_paths(p):
                out.append((f"{head}::{path}" if head else path, local))
    return out


def _rust(node: Any, data: bytes) -> list[Import]:
    if node.type == "mod_item":
        name = node.child_by_field_name("name")
        return [Import(_text(data, name), 1)] if name is not None else []
    arg = node.child_by_field_name("argument")
    if arg is None:
        return []
    out = []
    for path, local in _rust_paths(_text(data, arg)):
        parts = _RUST_SPLIT.split(path)
        if parts[-1] in ("*", "self"):
            out.append(Import("::".join(parts[:-1]), 0, local if parts[-1] == "self" else None))
        else:
            out.append(Import("::".join(parts[:-1]), 0, None, ((parts[-1], local),)))
            out.append(Import(path, 0, local))  # the last part may be a module
    return out


def _c(node: Any, data: bytes) -> list[Import]:
    path = node.child_by_field_name("path")
    if path is None or path.type != "string_literal":
        return []  # <system.h>
    return [Import(_unquote(_text(data, path)))]


def _java(node: Any, data: bytes) -> list[Import]:
    text = _text(data, node)
    body = text.removeprefix("import").strip().rstrip(";").strip()
    body = body.removeprefix("static ").strip()
    if body.endswith(".*"):
        return [Import(body[:-2])]
    module, _, name = body.rpartition(".")
    return [Import(body, 0, name), Import(module, 0, None, ((name, name),))]


_IMPORT_READERS = {
    "python": _python,
    "javascript": _javascript,
    "typescript": _javascript,
    "tsx": _javascript,
    "go": _go,
    "rust": _rust,
    "c": _c,
    "cpp": _c,
    "java": _java,
}
