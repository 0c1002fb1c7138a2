"""Cross-file holes for ``python -m devtools.bench crossfile`` (CrossCodeEval-style).

The benchmark's own reading of a project, independent of the code it measures (nothing
here imports ``sidecar``): Python's :mod:`ast` and :mod:`tokenize` for Python, tree-sitter
(the grammar wheels of the virtualenv) for JavaScript, TypeScript, Java and Go. Lines are
split at ``\\n`` only; columns are code points (``character`` is the LSP position in
UTF-16 code units); a file's ``rel`` is its ``/``-separated path under the project's root.

Definitions of a file (``SourceFile.definitions``)
    Python: top-level ``def``/``class`` names and assigned names (also inside top-level
    ``if``/``try``/``with``), and in class bodies (nested classes too) method names,
    class-level assigned names and the ``self.X``/``cls.X`` attributes assigned in
    methods. Imports and ``__all__`` are no definitions (a re-export is not where a name
    is defined).
    JavaScript/TypeScript: top-level (also under ``export``, ``declare`` and namespaces)
    functions, classes, interfaces, type aliases, enums, namespaces, and variables that
    do not bind a ``require(...)``; members of classes, interfaces, object types and
    enums (methods, fields, signatures); properties assigned at the top level
    (``exports.X = ...``, ``Route.prototype.X = ...``, ``app.X = ...``; not
    ``module.exports``) and ``this.X = ...`` anywhere. ``export ... from`` re-exports
    nothing of its own.
    Java: classes, interfaces, enums, records and annotation types (nested too), their
    methods, fields, constants, enum constants, record components and annotation
    elements.
    Go: top-level functions, methods, types, constants and variables, struct fields and
    interface methods.

Uses of a file (``SourceFile.uses``)
    The identifiers of its code (Python ``NAME`` tokens that are not keywords;
    tree-sitter ``identifier``, ``property_identifier``, ``shorthand_property_identifier``,
    ``type_identifier``, ``field_identifier`` nodes: never inside a comment or a string),
    less the places that *bind* a name in the file itself: a parameter, a local
    variable, a loop or ``except``/``catch`` variable, an import alias, a declared name.
    A binding introduces a name of the writer's choosing; it is no use of another file's
    definition. Python keyword-argument names, Java annotation element names and
    JavaScript object-literal keys (the callee's parameter, the annotation's element, a
    new object's property: names that refer to no definition) are left out too;
    TypeScript's object-literal keys stay (they are checked against a type).

Imports of a file (``SourceFile.imports``): the project files it imports, and what
those re-export (``export ... from``; a Python package's ``__init__.py`` passes on what
it imports), transitively. Python:
``import a.b`` and ``from .m import x`` (relative to the file's package; ``x`` may be a
module), resolved to ``a/b.py`` or ``a/b/__init__.py`` anywhere in the project;
JavaScript/TypeScript: ``require('./x')``, ``import ... from './x'``, ``export ... from``
and ``import('./x')`` of relative paths, with the usual extensions and ``index`` files;
Java: single-type, static and ``.*`` imports of project classes, and every file of the
same folder (the same package needs no import); Go: every file of the same folder (the
same package). ``import_lines`` are the lines of import statements (multi-line ones
whole, Java's ``package`` and Go's ``package`` too) and every line holding ``require(``.

A hole (:func:`file_candidates`)
    In file F, an identifier use X on line L such that: X has at least
    ``MIN_NAME_CHARS`` (4) characters; X is defined in another file G of the project and
    not defined in F; X is no name of the language's standard library (``STANDARD_NAMES``:
    builtins, core types and their methods, such as ``type``, ``keys``, ``equals``, ``len``,
    which a use may mean instead); X does not occur in F's text before it (as a whole word: no
    identifier character on either side; comments, strings and imports count), so this is
    X's first appearance in F; L is not an import line. The cursor is at X's first
    character; the *truth* is the rest of L from the cursor, trailing whitespace dropped.
    The document is F with that rest of L removed (the text before the cursor, then F
    from L's line break on). G is the definer F imports, else the first by path.

Selection (:func:`select_holes`): a project's files are shuffled by
``random.Random(f"{seed}:{project}")``, each file's candidates by
``random.Random(f"{seed}:{project}:{rel}")``; the files are then taken round-robin, one
hole each per round (never two on one line of a file), until ``per_project`` holes are
made, every file has ``per_file`` holes, or the candidates run out. The holes come back
in document order (by ``rel``, then offset). The same seed and files give the same holes.
"""

from __future__ import annotations

import ast
import io
import keyword
import posixpath
import random
import re
import tokenize
from dataclasses import asdict, dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

LANGUAGES = ("python", "javascript", "typescript", "java", "go")
MIN_NAME_CHARS = 4
DEFAULT_HOLES_PER_FILE = 3
DEFAULT_HOLES_PER_PROJECT = 15


def _python_standard_names() -> frozenset[str]:
    import builtins

    types = (object, type, dict, list, tuple, set, frozenset, str, bytes, bytearray, int, float, BaseException)
    return frozenset(dir(builtins)).union(*(dir(t) for t in types))


_JS_STANDARD = """
Object Array String Number Boolean Symbol BigInt Function Promise Error TypeError RangeError SyntaxError
JSON Math Date RegExp Map Set WeakMap WeakSet Proxy Reflect Buffer Iterator Infinity NaN undefined
globalThis window document navigator console process require module exports setTimeout clearTimeout
setInterval clearInterval setImmediate clearImmediate queueMicrotask parseInt parseFloat isNaN isFinite
encodeURIComponent decodeURIComponent encodeURI decodeURI escape unescape
prototype constructor toString toLocaleString valueOf hasOwnProperty isPrototypeOf propertyIsEnumerable
call apply bind length name message stack cause
keys values entries assign create freeze isFrozen seal defineProperty defineProperties getPrototypeOf
setPrototypeOf getOwnPropertyNames getOwnPropertyDescriptor getOwnPropertySymbols fromEntries is
isArray from push pop shift unshift slice splice concat join indexOf lastIndexOf includes find findIndex
findLast findLastIndex filter forEach some every reduce reduceRight sort reverse fill flat flatMap
split replace replaceAll trim trimStart trimEnd padStart padEnd match matchAll search test exec charAt
charCodeAt codePointAt fromCharCode substring substr startsWith endsWith toLowerCase toUpperCase repeat
localeCompare normalize then catch finally resolve reject allSettled race any iterator asyncIterator
has delete clear size add emit once removeListener removeAllListeners listeners addListener
addEventListener removeEventListener dispatchEvent stringify parse floor ceil round random abs
getTime toISOString
"""
_JAVA_STANDARD = """
Object String Integer Long Short Byte Double Float Boolean Character Number Math System Thread Class
Exception RuntimeException IllegalArgumentException IllegalStateException NullPointerException
UnsupportedOperationException IndexOutOfBoundsException Error Throwable Override Deprecated
SuppressWarnings FunctionalInterface SafeVarargs Iterable Iterator Comparable Comparator Runnable
Collection List ArrayList LinkedList Map HashMap LinkedHashMap TreeMap Set HashSet LinkedHashSet TreeSet
Arrays Collections Objects Optional Stream StringBuilder StringBuffer CharSequence Appendable
equals hashCode toString getClass clone finalize notify notifyAll wait compareTo
length charAt substring indexOf lastIndexOf startsWith endsWith trim strip isEmpty isBlank toLowerCase
toUpperCase split replace replaceAll contains format valueOf equalsIgnoreCase toCharArray getBytes
matches concat join intern codePointAt chars repeat lines
add addAll remove removeAll retainAll containsAll containsKey containsValue size clear iterator
hasNext next keySet values entrySet getKey getValue setValue stream forEach toArray subList sort
get set put putAll getOrDefault putIfAbsent computeIfAbsent computeIfPresent compute merge
asList emptyList emptyMap emptySet singletonList unmodifiableList unmodifiableMap unmodifiableSet
copyOf copyOfRange fill append insert reverse setLength deleteCharAt setCharAt
intValue longValue doubleValue floatValue booleanValue charValue parseInt parseLong parseDouble
requireNonNull isNull nonNull ofNullable orElse orElseGet orElseThrow ifPresent isPresent empty
collect filter reduce findFirst findAny anyMatch allMatch noneMatch apply accept test
println print printf arraycopy currentTimeMillis nanoTime identityHashCode
getName getSimpleName getSuperclass getInterfaces isInstance cast isArray getComponentType
getMessage getCause printStackTrace
"""
_GO_STANDARD = """
append cap close complex copy delete imag len make new panic print println real recover min max clear
bool byte rune error string uintptr float32 float64 complex64 complex128 int int8 int16 int32 int64
uint uint8 uint16 uint32 uint64 true false iota any comparable
String Error Unwrap Len Less Swap Read Write Close
"""

#: Names of each language's standard library (builtins, core types and their methods):
#: a use of one may mean the standard one, so it makes no cross-file hole.
STANDARD_NAMES: dict[str, frozenset[str]] = {
    "python": _python_standard_names(),
    "javascript": frozenset(_JS_STANDARD.split()),
    "typescript": frozenset(_JS_STANDARD.split()),
    "java": frozenset(_JAVA_STANDARD.split()),
    "go": frozenset(_GO_STANDARD.split()),
}

_LSP_LANGUAGE = {
    ".py": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "typescriptreact",
    ".java": "java",
    ".go": "go",
}


def lsp_language(rel: str) -> str:
    """The LSP language id of a file by its extension (``plaintext`` when unknown)."""
    return _LSP_LANGUAGE.get(Path(rel).suffix.lower(), "plaintext")


def utf16_len(text: str) -> int:
    """Length of ``text`` in UTF-16 code units."""
    return sum(2 if ord(c) > 0xFFFF else 1 for c in text)


# -- one file ----------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceFile:
    """One file of a project, read by this module (see the module doc). ``uses`` are
    ``(0-based line, code-point column, name)`` in document order; ``error`` says why a
    file that could not be parsed has no definitions and no uses."""

    rel: str
    path: Path
    language: str
    text: str
    definitions: frozenset[str]
    uses: tuple[tuple[int, int, str], ...]
    import_lines: frozenset[int]
    imports: frozenset[str]
    error: str | None = None
    reexports: frozenset[str] = frozenset()


@dataclass
class _Scan:
    definitions: set[str] = field(default_factory=set)
    uses: list[tuple[int, int, str]] = field(default_factory=list)
    import_lines: set[int] = field(default_factory=set)
    imports: set[str] = field(default_factory=set)
    reexports: set[str] = field(default_factory=set)


def _resolve_suffix(all_rels: frozenset[str], suffix: str) -> set[str]:
    """The project files whose path is ``suffix`` or ends with ``/`` + ``suffix``."""
    return {r for r in all_rels if r == suffix or r.endswith("/" + suffix)}


# -- Python --------------------------------------------------------------------------------


def _py_targets(node: ast.AST) -> list[str]:
    """The plain names an assignment target binds (``a``, ``a, b``, ``[a, *b]``)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Starred):
        return _py_targets(node.value)
    if isinstance(node, ast.Tuple | ast.List):
        return [n for elt in node.elts for n in _py_targets(elt)]
    return []


def _py_definitions(tree: ast.Module) -> set[str]:
    out: set[str] = set()

    def assigned(node: ast.stmt) -> list[str]:
        if isinstance(node, ast.Assign):
            return [n for t in node.targets for n in _py_targets(t)]
        if isinstance(node, ast.AnnAssign):
            return _py_targets(node.target)
        return []

    def nested(node: ast.stmt) -> list[list[ast.stmt]]:
        if isinstance(node, ast.If):
            return [node.body, node.orelse]
        if isinstance(node, ast.Try):
            return [node.body, node.orelse, node.finalbody, *[h.body for h in node.handlers]]
        if isinstance(node, ast.With):
            return [node.body]
        return []

    def module_level(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                out.add(node.name)
            elif isinstance(node, ast.ClassDef):
                out.add(node.name)
                class_body(node.body)
            else:
                out.update(assigned(node))
                for block in nested(node):
                    module_level(block)

    def class_body(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                out.add(node.name)
                for sub in ast.walk(node):
                    if (
                        isinstance(sub, ast.Attribute)
                        and isinstance(sub.ctx, ast.Store)
                        and isinstance(sub.value, ast.Name)
                        and sub.value.id in ("self", "cls")
                    ):
                        out.add(sub.attr)
            elif isinstance(node, ast.ClassDef):
                out.add(node.name)
                class_body(node.body)
            else:
                out.update(assigned(node))
                for block in nested(node):
                    class_body(block)

    module_level(tree.body)
    return out


def _py_module_files(all_rels: frozenset[str], parts: list[str], base: str | None) -> set[str]:
    """The files of module ``parts`` (``a.b`` -> ``a/b.py`` or ``a/b/__init__.py``): under
    folder ``base`` for a relative import, else anywhere in the project."""
    stem = "/".join(parts)
    if base is not None:
        joined = posixpath.normpath(posixpath.join(base, stem)) if stem else posixpath.normpath(base)
        wanted = {joined + ".py", joined + "/__init__.py"}
        return {r for r in all_rels if r in wanted}
    if not stem:
        return set()
    return _resolve_suffix(all_rels, stem + ".py") | _resolve_suffix(all_rels, stem + "/__init__.py")


def _scan_python(rel: str, text: str, all_rels: frozenset[str]) -> _Scan:
    tree = ast.parse(text)
    scan = _Scan(definitions=_py_definitions(tree))
    lines = text.split("\n")

    def char_col(lineno: int, col_offset: int) -> int:  # ast columns are UTF-8 byte offsets
        line = lines[lineno - 1] if 0 < lineno <= len(lines) else ""
        return len(line.encode("utf-8")[:col_offset].decode("utf-8", "replace"))

    bindings: set[tuple[int, int]] = set()
    folder = posixpath.dirname(rel)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            bindings.add((node.lineno - 1, char_col(node.lineno, node.col_offset)))
        elif isinstance(node, ast.arg | ast.keyword) and getattr(node, "lineno", None):
            # A parameter, or a keyword argument's name (the callee's parameter).
            bindings.add((node.lineno - 1, char_col(node.lineno, node.col_offset)))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            scan.import_lines.update(range(node.lineno - 1, (node.end_lineno or node.lineno)))
            if isinstance(node, ast.Import):
                for alias in node.names:
                    scan.imports |= _py_module_files(all_rels, alias.name.split("."), None)
            else:
                parts = node.module.split(".") if node.module else []
                base = None
                if node.level:
                    base = folder
                    for _ in range(node.level - 1):
                        base = posixpath.dirname(base)
                scan.imports |= _py_module_files(all_rels, parts, base)
                for alias in node.names:  # ``from . import utils``: a module
                    scan.imports |= _py_module_files(all_rels, [*parts, alias.name], base)
    prev = ""
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.NAME:
            name = tok.string
            if not keyword.iskeyword(name):
                row, col = tok.start[0] - 1, tok.start[1]
                bound = prev in ("def", "class", "as", "global", "nonlocal") or (row, col) in bindings
                if not bound:
                    scan.uses.append((row, col, name))
            prev = name
        elif tok.type not in (tokenize.NL, tokenize.COMMENT):
            prev = tok.string
    for i, line in enumerate(lines):
        if "require(" in line:
            scan.import_lines.add(i)
    if posixpath.basename(rel) == "__init__.py":  # a package passes on what it imports
        scan.reexports = set(scan.imports)
    return scan


# -- tree-sitter languages -----------------------------------------------------------------


@cache
def _ts_language(language: str, tsx: bool = False) -> Any:
    from tree_sitter import Language

    if language == "javascript":
        import tree_sitter_javascript as mod

        return Language(mod.language())
    if language == "typescript":
        import tree_sitter_typescript as ts_mod

        return Language(ts_mod.language_tsx() if tsx else ts_mod.language_typescript())
    if language == "java":
        import tree_sitter_java as mod

        return Language(mod.language())
    if language == "go":
        import tree_sitter_go as mod

        return Language(mod.language())
    raise ValueError(f"no tree-sitter grammar for {language!r}")


_IDENT_TYPES = {
    "javascript": ("identifier", "property_identifier", "shorthand_property_identifier"),
    "typescript": ("identifier", "property_identifier", "shorthand_property_identifier", "type_identifier"),
    "java": ("identifier", "type_identifier"),
    "go": ("identifier", "field_identifier", "type_identifier"),
}


@cache
def _query(language: str, tsx: bool, source: str) -> Any:
    from tree_sitter import Query

    return Query(_ts_language(language, tsx), source)


def _captures(language: str, tsx: bool, source: str, node: Any) -> dict[str, list[Any]]:
    from tree_sitter import QueryCursor

    return QueryCursor(_query(language, tsx, source)).captures(node)


def _text(node: Any) -> str:
    return node.text.decode("utf-8", "replace") if node is not None and node.text is not None else ""


def _same(a: Any, b: Any) -> bool:
    return a is not None and b is not None and a.start_byte == b.start_byte and a.end_byte == b.end_byte


# (parent type, field) pairs whose identifier binds a name; a field of None: any child.
_BINDINGS: dict[str, frozenset[tuple[str, str | None]]] = {
    "javascript": frozenset(
        {
            ("variable_declarator", "name"),
            ("function_declaration", "name"),
            ("generator_function_declaration", "name"),
            ("function_expression", "name"),
            ("function", "name"),
            ("generator_function", "name"),
            ("class_declaration", "name"),
            ("class", "name"),
            ("method_definition", "name"),
            ("field_definition", "property"),
            ("arrow_function", "parameter"),
            ("catch_clause", "parameter"),
            ("assignment_pattern", "left"),
            ("pair_pattern", "value"),
            ("for_in_statement", "left"),
            ("labeled_statement", "label"),
            ("formal_parameters", None),
            ("rest_pattern", None),
            ("array_pattern", None),
            ("import_specifier", None),
            ("namespace_import", None),
            ("import_clause", None),
            ("export_specifier", None),
        }
    ),
    "java": frozenset(
        {
            ("variable_declarator", "name"),
            ("formal_parameter", "name"),
            ("catch_formal_parameter", "name"),
            ("method_declaration", "name"),
            ("constructor_declaration", "name"),
            ("compact_constructor_declaration", "name"),
            ("class_declaration", "name"),
            ("interface_declaration", "name"),
            ("enum_declaration", "name"),
            ("record_declaration", "name"),
            ("annotation_type_declaration", "name"),
            ("enum_constant", "name"),
            ("annotation_type_element_declaration", "name"),
            ("enhanced_for_statement", "name"),
            ("resource", "name"),
            ("element_value_pair", "key"),  # an annotation's ``key = value``: the annotation's element
            ("lambda_expression", "parameters"),
            ("inferred_parameters", None),
            ("type_parameter", None),
            ("labeled_statement", None),
        }
    ),
    "go": frozenset(
        {
            ("var_spec", "name"),
            ("const_spec", "name"),
            ("parameter_declaration", "name"),
            ("variadic_parameter_declaration", "name"),
            ("function_declaration", "name"),
            ("method_declaration", "name"),
            ("type_spec", "name"),
            ("type_alias", "name"),
            ("field_declaration", "name"),
            ("method_elem", "name"),
            ("method_spec", "name"),
            ("import_spec", "name"),
            ("labeled_statement", "label"),
            ("type_parameter_declaration", "name"),
        }
    ),
}
_BINDINGS["typescript"] = _BINDINGS["javascript"] | frozenset(
    {
        ("function_signature", "name"),
        ("abstract_class_declaration", "name"),
        ("interface_declaration", "name"),
        ("type_alias_declaration", "name"),
        ("enum_declaration", "name"),
        ("internal_module", "name"),
        ("module", "name"),
        ("method_signature", "name"),
        ("abstract_method_signature", "name"),
        ("property_signature", "name"),
        ("public_field_definition", "name"),
        ("required_parameter", "pattern"),
        ("optional_parameter", "pattern"),
        ("type_parameter", "name"),
        ("enum_assignment", "name"),
        ("enum_body", None),
        ("index_signature", "name"),
    }
)
# JavaScript object-literal keys name a new object's property: untyped, they refer to no
# definition (TypeScript checks them against a type, so there they stay uses).
_BINDINGS["javascript"] = _BINDINGS["javascript"] | {("pair", "key")}


def _is_binding(language: str, node: Any) -> bool:
    """Whether the identifier ``node`` binds a name (see the module doc, "Uses")."""
    parent = node.parent
    if parent is None:
        return False
    table = _BINDINGS[language]
    if (parent.type, None) in table:
        return True
    for ptype, fname in table:
        if ptype == parent.type and fname is not None:
            if any(_same(c, node) for c in parent.children_by_field_name(fname)):
                return True
    if language == "go" and parent.type == "expression_list":
        grand = parent.parent
        if grand is not None and grand.type in ("short_var_declaration", "range_clause"):
            return _same(grand.child_by_field_name("left"), parent)
    return False


def _is_require(node: Any) -> bool:
    """``require(...)``, ``require(...)(...)`` or ``require(...).x``."""
    while node is not None:
        if node.type == "call_expression":
            fn = node.child_by_field_name("function")
            if fn is not None and fn.type == "identifier" and _text(fn) == "require":
                return True
            node = fn
        elif node.type in ("member_expression", "parenthesized_expression", "await_expression"):
            node = node.child_by_field_name("object") or (node.named_children[0] if node.named_children else None)
        else:
            return False
    return False


_JS_NAMED_DECLS = frozenset(
    {
        "function_declaration",
        "generator_function_declaration",
        "function_signature",
        "class_declaration",
        "abstract_class_declaration",
        "interface_declaration",
        "type_alias_declaration",
        "enum_declaration",
        "internal_module",
        "module",
    }
)
_JS_MEMBERS = {
    "method_definition": "name",
    "method_signature": "name",
    "abstract_method_signature": "name",
    "property_signature": "name",
    "public_field_definition": "name",
    "field_definition": "property",
}
_NAME_TYPES = frozenset({"identifier", "property_identifier", "type_identifier", "field_identifier"})


def _js_definitions(root: Any, language: str, tsx: bool) -> set[str]:
    out: set[str] = set()

    def add(node: Any) -> None:
        if node is not None and node.type in _NAME_TYPES:
            out.add(_text(node))

    def members(body: Any) -> None:
        for m in body.named_children:
            fname = _JS_MEMBERS.get(m.type)
            if fname is not None:
                add(m.child_by_field_name(fname))
            elif m.type == "enum_assignment":
                add(m.child_by_field_name("name"))
            elif body.type == "enum_body" and m.type == "property_identifier":
                add(m)

    def top(block: Any) -> None:
        for child in block.named_children:
            t = child.type
            if t in ("export_statement", "ambient_declaration"):
                if child.child_by_field_name("source") is None:
                    top(child)
            elif t in _JS_NAMED_DECLS:
                add(child.child_by_field_name("name"))
                body = child.child_by_field_name("body")
                if body is not None:
                    if t in ("internal_module", "module"):
                        top(body)
                    else:
                        members(body)
            elif t in ("lexical_declaration", "variable_declaration"):
                for d in child.named_children:
                    if d.type != "variable_declarator":
                        continue
                    value = d.child_by_field_name("value")
                    if _is_require(value):
                        continue
                    add(d.child_by_field_name("name"))
                    if value is not None and value.type == "class":
                        body = value.child_by_field_name("body")
                        if body is not None:
                            members(body)
            elif t == "expression_statement" and child.named_children:
                expr = child.named_children[0]
                while expr is not None and expr.type == "assignment_expression":
                    left = expr.child_by_field_name("left")
                    if left is not None and left.type == "member_expression":
                        obj, prop = left.child_by_field_name("object"), left.child_by_field_name("property")
                        if not (_text(obj) == "module" and _text(prop) == "exports"):
                            add(prop)
                    expr = expr.child_by_field_name("right")  # ``a.x = b.y = ...``

    top(root)
    this_fields = "(assignment_expression left: (member_expression object: (this) property: (property_identifier) @f))"
    for node in _captures(language, tsx, this_fields, root).get("f", []):
        add(node)
    # Object types of type aliases (``type T = { x: number }``): their properties too.
    if language == "typescript":
        for alias in _captures(language, tsx, "(type_alias_declaration value: (object_type) @o)", root).get("o", []):
            members(alias)
    return out


_JAVA_TYPES = frozenset(
    {
        "class_declaration",
        "interface_declaration",
        "enum_declaration",
        "record_declaration",
        "annotation_type_declaration",
    }
)


def _java_definitions(root: Any) -> set[str]:
    out: set[str] = set()

    def add(node: Any) -> None:
        if node is not None:
            out.add(_text(node))

    def type_decl(node: Any) -> None:
        add(node.child_by_field_name("name"))
        if node.type == "record_declaration":
            params = node.child_by_field_name("parameters")
            for p in params.named_children if params is not None else []:
                if p.type == "formal_parameter":
                    add(p.child_by_field_name("name"))
        body = node.child_by_field_name("body")
        if body is not None:
            body_members(body)

    def body_members(body: Any) -> None:
        for m in body.named_children:
            t = m.type
            if t in _JAVA_TYPES:
                type_decl(m)
            elif t in ("method_declaration", "annotation_type_element_declaration", "enum_constant"):
                add(m.child_by_field_name("name"))
            elif t in ("field_declaration", "constant_declaration"):
                for d in m.children_by_field_name("declarator"):
                    add(d.child_by_field_name("name"))
            elif t == "enum_body_declarations":
                body_members(m)

    for child in root.named_children:
        if child.type in _JAVA_TYPES:
            type_decl(child)
    return out


def _go_definitions(root: Any) -> set[str]:
    out: set[str] = set()

    def add_names(node: Any) -> None:
        for n in node.children_by_field_name("name"):
            out.add(_text(n))

    def specs(node: Any, kinds: tuple[str, ...]) -> list[Any]:
        found = []
        for c in node.named_children:
            if c.type in kinds:
                found.append(c)
            elif c.type.endswith("_list"):  # ``var ( ... )`` in some grammar versions
                found.extend(specs(c, kinds))
        return found

    for child in root.named_children:
        t = child.type
        if t in ("function_declaration", "method_declaration"):
            add_names(child)
        elif t == "type_declaration":
            for spec in specs(child, ("type_spec", "type_alias")):
                add_names(spec)
                typ = spec.child_by_field_name("type")
                if typ is None:
                    continue
                if typ.type == "struct_type":
                    for fl in typ.named_children:
                        for fd in fl.named_children if fl.type == "field_declaration_list" else []:
                            if fd.type == "field_declaration":
                                add_names(fd)
                elif typ.type == "interface_type":
                    for m in typ.named_children:
                        if m.type in ("method_elem", "method_spec"):
                            add_names(m)
        elif t in ("const_declaration", "var_declaration"):
            for spec in specs(child, ("const_spec", "var_spec")):
                add_names(spec)
    return out


_JS_IMPORT = re.compile(r"""(?:\brequire\s*\(\s*|\bfrom\s*|\bimport\s*\(?\s*)(['"])(\.{1,2}/[^'"\n]*|\.{1,2})\1""")
_JS_REEXPORT = re.compile(
    r"""\bexport\s+(?:type\s+)?(?:\*(?:\s+as\s+[\w$]+)?|\{[^}]*\})\s*from\s*(['"])(\.{1,2}/[^'"\n]*|\.{1,2})\1"""
)
_JS_EXTENSIONS = ("", ".js", ".ts", ".tsx", ".mjs", ".cjs", "/index.js", "/index.ts", "/index.tsx")


def _js_imports(rel: str, text: str, all_rels: frozenset[str], pattern: re.Pattern[str] = _JS_IMPORT) -> set[str]:
    """The project files that ``pattern``'s matches in ``text`` name (group 2: a
    relative path), resolved from ``rel``'s folder."""
    out: set[str] = set()
    folder = posixpath.dirname(rel)
    for m in pattern.finditer(text):
        target = posixpath.normpath(posixpath.join(folder, m.group(2)))
        if target.endswith(".js"):  # TypeScript's ``import ... from './x.js'`` names x.ts
            candidates = [target, target[:-3] + ".ts", target[:-3] + ".tsx"]
        else:
            candidates = [target + ext for ext in _JS_EXTENSIONS]
        out.update(c for c in candidates if c in all_rels)
    return out


def _java_imports(rel: str, root: Any, all_rels: frozenset[str]) -> set[str]:
    folder = posixpath.dirname(rel)
    out = {r for r in all_rels if posixpath.dirname(r) == folder}
    for node in root.named_children:
        if node.type != "import_declaration":
            continue
        body = _text(node).removeprefix("import").strip().removesuffix(";").strip()
        body = body.removeprefix("static").strip()
        parts = [p.strip() for p in body.split(".")]
        if parts and parts[-1] == "*":
            pkg = "/".join(parts[:-1])
            out |= {r for r in all_rels if posixpath.dirname(r) == pkg or posixpath.dirname(r).endswith("/" + pkg)}
            out |= _resolve_suffix(all_rels, pkg + ".java")  # ``import static a.B.*``
            continue
        for n in (len(parts), len(parts) - 1):  # a class, or a static member's class
            if n > 0:
                out |= _resolve_suffix(all_rels, "/".join(parts[:n]) + ".java")
    return out


def _scan_tree_sitter(rel: str, text: str, language: str, all_rels: frozenset[str]) -> _Scan:
    from tree_sitter import Parser

    tsx = rel.endswith(".tsx")
    data = text.encode("utf-8")
    tree = Parser(_ts_language(language, tsx)).parse(data)
    root = tree.root_node
    scan = _Scan()
    if language in ("javascript", "typescript"):
        scan.definitions = _js_definitions(root, language, tsx)
        scan.imports = _js_imports(rel, text, all_rels)
        scan.reexports = _js_imports(rel, text, all_rels, _JS_REEXPORT)
        import_types: tuple[str, ...] = ("import_statement",)
    elif language == "java":
        scan.definitions = _java_definitions(root)
        scan.imports = _java_imports(rel, root, all_rels)
        import_types = ("import_declaration", "package_declaration")
    else:
        scan.definitions = _go_definitions(root)
        folder = posixpath.dirname(rel)
        scan.imports = {r for r in all_rels if posixpath.dirname(r) == folder}
        import_types = ("import_declaration", "package_clause")
    for node in root.named_children:
        is_import = node.type in import_types or (
            node.type == "export_statement" and node.child_by_field_name("source") is not None
        )
        if is_import:
            scan.import_lines.update(range(node.start_point[0], node.end_point[0] + 1))
    text_lines = text.split("\n")
    for i, line in enumerate(text_lines):
        if "require(" in line:
            scan.import_lines.add(i)
    byte_lines = [ln.encode("utf-8") for ln in text_lines]
    pattern = "[" + " ".join(f"({t})" for t in _IDENT_TYPES[language]) + "] @name"
    nodes = _captures(language, tsx, pattern, root).get("name", [])
    nodes.sort(key=lambda n: n.start_byte)
    for node in nodes:
        if _is_binding(language, node):
            continue
        row, bcol = node.start_point
        line = byte_lines[row] if row < len(byte_lines) else b""
        col = bcol if line.isascii() else len(line[:bcol].decode("utf-8", "replace"))
        scan.uses.append((row, col, _text(node)))
    return scan


def scan_file(rel: str, path: Path, text: str, language: str, all_rels: frozenset[str]) -> SourceFile:
    """Read one file of a project (``language``: one of ``LANGUAGES``; ``all_rels``: every
    file of the project, to resolve imports). A file that cannot be parsed (Python's
    SyntaxError, a tokenize error) gets no definitions and no uses, and ``error`` says
    why; tree-sitter always parses."""
    if language not in LANGUAGES:
        raise ValueError(f"no definition finder for {language!r}; choose from {', '.join(LANGUAGES)}")
    try:
        if language == "python":
            scan = _scan_python(rel, text, all_rels)
        else:
            scan = _scan_tree_sitter(rel, text, language, all_rels)
    except (SyntaxError, tokenize.TokenError, ValueError, RecursionError) as exc:
        return SourceFile(
            rel, path, language, text, frozenset(), (), frozenset(), frozenset(), f"{type(exc).__name__}: {exc}"
        )
    scan.imports.discard(rel)
    scan.reexports.discard(rel)
    return SourceFile(
        rel=rel,
        path=path,
        language=language,
        text=text,
        definitions=frozenset(n for n in scan.definitions if n),
        uses=tuple(scan.uses),
        import_lines=frozenset(scan.import_lines),
        imports=frozenset(scan.imports),
        reexports=frozenset(scan.reexports),
    )


# -- a project ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Project:
    """A project as the benchmark reads it: its files (by ``rel``, sorted) and, for every
    defined name, the files that define it (sorted by ``rel``)."""

    name: str
    half: str
    language: str
    root: Path
    files: tuple[SourceFile, ...]
    definers: dict[str, tuple[str, ...]]

    def file(self, rel: str) -> SourceFile:
        """The file at ``rel``; KeyError when there is none."""
        for f in self.files:
            if f.rel == rel:
                return f
        raise KeyError(rel)

    @property
    def definitions(self) -> int:
        """How many (name, file) definitions the project has."""
        return sum(len(v) for v in self.definers.values())


def _close_imports(files: tuple[SourceFile, ...]) -> tuple[SourceFile, ...]:
    """``files`` with each file's imports extended through re-exports: a file that
    imports R also imports what R re-exports (``export * from``, a Python package's
    ``__init__.py``), transitively."""
    passes = {f.rel: f.reexports for f in files}
    out = []
    for f in files:
        seen = set(f.imports)
        todo = list(f.imports)
        while todo:
            for nxt in passes.get(todo.pop(), frozenset()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        seen.discard(f.rel)
        out.append(replace(f, imports=frozenset(seen)))
    return tuple(out)


def load_project(name: str, half: str, language: str, root: Path, paths: list[Path] | tuple[Path, ...]) -> Project:
    """Read every file of ``paths`` (under ``root``, UTF-8) with :func:`scan_file`. Raises
    OSError / UnicodeDecodeError on an unreadable file and ValueError on a language
    without a definition finder."""
    rels = {p: p.relative_to(root).as_posix() for p in paths}
    all_rels = frozenset(rels.values())
    files = tuple(
        scan_file(rels[p], p, p.read_text(encoding="utf-8"), language, all_rels)
        for p in sorted(paths, key=lambda p: rels[p])
    )
    files = _close_imports(files)
    definers: dict[str, list[str]] = {}
    for f in files:
        for n in f.definitions:
            definers.setdefault(n, []).append(f.rel)
    return Project(name, half, language, root, files, {k: tuple(sorted(v)) for k, v in definers.items()})


# -- holes ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CrossHole:
    """One cross-file hole (see the module doc). ``file``/``rel`` is F, ``defined_in`` /
    ``defined_in_path`` is G, ``definers`` every other file defining ``name``; ``line``,
    ``column`` (code points), ``character`` (UTF-16) and ``offset`` (code points in
    ``document``) place the cursor; ``truth`` is the removed rest of the line."""

    id: str
    project: str
    file: str
    rel: str
    language: str  # the LSP language id of F
    line: int
    column: int
    character: int
    offset: int
    name: str
    truth: str
    defined_in: str
    defined_in_path: str
    definers: tuple[str, ...]
    document: str

    @property
    def prefix(self) -> str:
        """The document text before the cursor."""
        return self.document[: self.offset]

    @property
    def suffix(self) -> str:
        """The document text after the cursor (from the cursor line's break on)."""
        return self.document[self.offset :]

    def describe(self) -> dict[str, Any]:
        """The hole without its document text (for the JSON report)."""
        d = asdict(self)
        del d["document"]
        d["definers"] = list(self.definers)
        return d


def _word(name: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w$])" + re.escape(name) + r"(?![\w$])")


def defining_file(f: SourceFile, others: list[str] | tuple[str, ...]) -> str:
    """G among ``others`` (the files other than F defining the name, sorted): the first
    that F imports, else the first."""
    return next((r for r in others if r in f.imports), others[0])


def make_hole(project: Project, f: SourceFile, line: int, column: int, name: str) -> CrossHole:
    """The hole at ``name``'s use at ``line``/``column`` of ``f`` (a candidate of
    :func:`file_candidates`; nothing is checked here)."""
    lines = f.text.split("\n")
    cur = lines[line]
    truth = cur[column:].rstrip()
    new_lines = lines[:line] + [cur[:column]] + lines[line + 1 :]
    document = "\n".join(new_lines)
    offset = sum(len(ln) + 1 for ln in new_lines[:line]) + column
    others = tuple(r for r in project.definers.get(name, ()) if r != f.rel)
    g = defining_file(f, others) if others else ""
    return CrossHole(
        id=f"{project.name}:{f.rel}:{line + 1}:{column}",
        project=project.name,
        file=str(f.path),
        rel=f.rel,
        language=lsp_language(f.rel),
        line=line,
        column=column,
        character=utf16_len(cur[:column]),
        offset=offset,
        name=name,
        truth=truth,
        defined_in=g,
        defined_in_path=str(project.root / g) if g else "",
        definers=others,
        document=document,
    )


def file_candidates(project: Project, f: SourceFile) -> list[tuple[int, int, str]]:
    """Every hole position of ``f``: ``(line, column, name)`` of the uses that satisfy
    the module doc's rules, in document order."""
    starts = [0]
    for ln in f.text.split("\n"):
        starts.append(starts[-1] + len(ln) + 1)
    first_at: dict[str, int] = {}
    standard = STANDARD_NAMES.get(f.language, frozenset())
    out = []
    for line, col, name in f.uses:
        if len(name) < MIN_NAME_CHARS or name in f.definitions or line in f.import_lines or name in standard:
            continue
        if not any(r != f.rel for r in project.definers.get(name, ())):
            continue
        if name not in first_at:
            m = _word(name).search(f.text)
            first_at[name] = m.start() if m else -1
        if first_at[name] != starts[line] + col:
            continue
        out.append((line, col, name))
    return out


def select_holes(
    project: Project,
    seed: int = 0,
    per_file: int = DEFAULT_HOLES_PER_FILE,
    per_project: int = DEFAULT_HOLES_PER_PROJECT,
) -> list[CrossHole]:
    """Up to ``per_project`` holes of ``project``, at most ``per_file`` a file, chosen as
    the module doc says (seeded), in document order."""
    files = [f for f in project.files if not f.error]
    random.Random(f"{seed}:{project.name}").shuffle(files)
    queues = []
    for f in files:
        cands = file_candidates(project, f)
        random.Random(f"{seed}:{project.name}:{f.rel}").shuffle(cands)
        queues.append((f, cands, set()))
    holes: list[CrossHole] = []
    while len(holes) < per_project and any(c and len(u) < per_file for _f, c, u in queues):
        for f, cands, used in queues:
            if len(holes) >= per_project:
                break
            if len(used) >= per_file:
                continue
            while cands:
                line, col, name = cands.pop()
                if line in used:
                    continue
                used.add(line)
                holes.append(make_hole(project, f, line, col, name))
                break
    holes.sort(key=lambda h: (h.rel, h.offset))
    return holes


def project_counts(project: Project) -> dict[str, int]:
    """How much a project gives: files, files that could not be parsed, lines, defined
    names, definitions, and hole positions (candidates) in all and in how many files."""
    cands = [len(file_candidates(project, f)) for f in project.files if not f.error]
    return {
        "files": len(project.files),
        "unparsed": sum(1 for f in project.files if f.error),
        "lines": sum(f.text.count("\n") for f in project.files),
        "names": len(project.definers),
        "definitions": project.definitions,
        "candidates": sum(cands),
        "files_with_candidates": sum(1 for c in cands if c),
    }
