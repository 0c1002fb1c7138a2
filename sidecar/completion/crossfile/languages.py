"""Which languages the workspace index parses, and how: file extensions, tree-sitter
grammars and the queries that find definitions and imports.

- :func:`language_of`: a file name's language (``"python"``, ``"javascript"``,
  ``"typescript"``, ``"tsx"``, ``"go"``, ``"rust"``, ``"c"``, ``"cpp"``, ``"java"``), or
  ``None`` for a file the index skips. LSP language ids map through
  :func:`language_of_id`.
- :func:`grammar`: the parser and the two compiled queries for a language, loaded on
  first use from the grammar wheels (``tree-sitter-python`` and the others named in
  pyproject.toml); ``None`` when a grammar cannot be loaded, and then ``parse.py`` falls
  back to the regular expressions of ``index.py`` for definitions and finds no imports.

The queries are ours. Each definition pattern captures the whole definition as
``@def`` and its name as ``@name``; the kind of definition is the pattern's position in
``_KINDS`` order (see :data:`KIND_OF_NODE`). Import patterns capture the import
statement as ``@import``; ``parse.py`` reads its parts from the syntax tree.

A ``Parser`` is not safe to share between threads: :func:`grammar` gives each thread
its own. See docs/architecture.md ("The workspace index").
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

_EXT = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".hxx": "cpp",
    ".java": "java",
}
_IDS = {
    "python": "python",
    "javascript": "javascript",
    "javascriptreact": "javascript",
    "typescript": "typescript",
    "typescriptreact": "tsx",
    "go": "go",
    "rust": "rust",
    "c": "c",
    "cpp": "cpp",
    "java": "java",
}

#: Source extensions the index reads, by language.
EXTENSIONS = frozenset(_EXT)

_MODULES = {
    "python": ("tree_sitter_python", "language"),
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "go": ("tree_sitter_go", "language"),
    "rust": ("tree_sitter_rust", "language"),
    "c": ("tree_sitter_c", "language"),
    "cpp": ("tree_sitter_cpp", "language"),
    "java": ("tree_sitter_java", "language"),
}

#: Definition kinds, as ``parse.Definition.kind``.
KINDS = ("function", "class", "method", "variable", "type", "module")

_PY_DEFS = """
(function_definition name: (identifier) @name) @def.function
(class_definition name: (identifier) @name) @def.class
(module (expression_statement (assignment left: (identifier) @name)) @def.variable)
(class_definition body: (block (expression_statement (assignment left: (identifier) @name)) @def.variable))
"""
_PY_IMPORTS = """
(import_statement) @import
(import_from_statement) @import
"""
_JS_DEFS = """
(function_declaration name: (identifier) @name) @def.function
(generator_function_declaration name: (identifier) @name) @def.function
(class_declaration name: (_) @name) @def.class
(method_definition name: (property_identifier) @name) @def.method
(program (lexical_declaration (variable_declarator name: (identifier) @name)) @def.variable)
(program (variable_declaration (variable_declarator name: (identifier) @name)) @def.variable)
(program (export_statement (lexical_declaration (variable_declarator name: (identifier) @name))) @def.variable)
(expression_statement (assignment_expression
  left: (member_expression property: (property_identifier) @name)
  right: [(function_expression) (arrow_function) (class)])) @def.function
(pair key: (property_identifier) @name value: [(function_expression) (arrow_function)]) @def.method
(field_definition property: (property_identifier) @name) @def.variable
"""
_TS_EXTRA_DEFS = """
(abstract_class_declaration name: (type_identifier) @name) @def.class
(interface_declaration name: (type_identifier) @name) @def.type
(type_alias_declaration name: (type_identifier) @name) @def.type
(enum_declaration name: (identifier) @name) @def.type
(function_signature name: (identifier) @name) @def.function
(method_signature name: (property_identifier) @name) @def.method
(abstract_method_signature name: (property_identifier) @name) @def.method
(public_field_definition name: (property_identifier) @name) @def.variable
(property_signature name: (property_identifier) @name) @def.variable
"""
_TS_DEFS = _JS_DEFS.replace("(field_definition property: (property_identifier) @name) @def.variable\n", "")
_JS_IMPORTS = """
(import_statement) @import
(export_statement source: (string)) @import
(variable_declarator value: (call_expression function: (identifier) @fn (#eq? @fn "require"))) @import
"""
_GO_DEFS = """
(function_declaration name: (identifier) @name) @def.function
(method_declaration name: (field_identifier) @name) @def.method
(type_spec name: (type_identifier) @name) @def.type
(const_spec name: (identifier) @name) @def.variable
(source_file (var_declaration (var_spec name: (identifier) @name)) @def.variable)
(field_declaration name: (field_identifier) @name) @def.variable
(method_elem name: (field_identifier) @name) @def.method
"""
_GO_IMPORTS = """
(import_spec) @import
"""
_RUST_DEFS = """
(function_item name: (identifier) @name) @def.function
(function_signature_item name: (identifier) @name) @def.function
(struct_item name: (type_identifier) @name) @def.class
(enum_item name: (type_identifier) @name) @def.type
(union_item name: (type_identifier) @name) @def.type
(trait_item name: (type_identifier) @name) @def.type
(type_item name: (type_identifier) @name) @def.type
(const_item name: (identifier) @name) @def.variable
(static_item name: (identifier) @name) @def.variable
(macro_definition name: (identifier) @name) @def.function
(mod_item name: (identifier) @name) @def.module
(field_declaration name: (field_identifier) @name) @def.variable
(enum_variant name: (identifier) @name) @def.variable
"""
_RUST_IMPORTS = """
(use_declaration) @import
(mod_item !body) @import
"""
_C_DEFS = """
(function_definition declarator: (function_declarator declarator: (identifier) @name)) @def.function
(function_definition declarator: (pointer_declarator declarator: (function_declarator declarator: (identifier) @name))) @def.function
(declaration declarator: (function_declarator declarator: (identifier) @name)) @def.function
(declaration declarator: (pointer_declarator declarator: (function_declarator declarator: (identifier) @name))) @def.function
(struct_specifier name: (type_identifier) @name body: (_)) @def.class
(union_specifier name: (type_identifier) @name body: (_)) @def.class
(enum_specifier name: (type_identifier) @name body: (_)) @def.type
(type_definition declarator: (type_identifier) @name) @def.type
(preproc_def name: (identifier) @name) @def.variable
(preproc_function_def name: (identifier) @name) @def.function
(enumerator name: (identifier) @name) @def.variable
(field_declaration declarator: (field_identifier) @name) @def.variable
"""
_CPP_EXTRA_DEFS = """
(class_specifier name: (type_identifier) @name body: (_)) @def.class
(namespace_definition name: (namespace_identifier) @name) @def.module
(function_definition declarator: (function_declarator declarator: (field_identifier) @name)) @def.method
(function_definition declarator: (function_declarator declarator: (qualified_identifier name: (identifier) @name))) @def.method
(field_declaration declarator: (function_declarator declarator: (field_identifier) @name)) @def.method
"""
_C_IMPORTS = """
(preproc_include) @import
"""
_JAVA_DEFS = """
(class_declaration name: (identifier) @name) @def.class
(interface_declaration name: (identifier) @name) @def.type
(enum_declaration name: (identifier) @name) @def.type
(record_declaration name: (identifier) @name) @def.class
(annotation_type_declaration name: (identifier) @name) @def.type
(method_declaration name: (identifier) @name) @def.method
(constructor_declaration name: (identifier) @name) @def.method
(field_declaration declarator: (variable_declarator name: (identifier) @name)) @def.variable
(enum_constant name: (identifier) @name) @def.variable
"""
_JAVA_IMPORTS = """
(import_declaration) @import
"""

_QUERIES = {
    "python": (_PY_DEFS, _PY_IMPORTS),
    "javascript": (_JS_DEFS, _JS_IMPORTS),
    "typescript": (_TS_DEFS + _TS_EXTRA_DEFS, _JS_IMPORTS),
    "tsx": (_TS_DEFS + _TS_EXTRA_DEFS, _JS_IMPORTS),
    "go": (_GO_DEFS, _GO_IMPORTS),
    "rust": (_RUST_DEFS, _RUST_IMPORTS),
    "c": (_C_DEFS, _C_IMPORTS),
    "cpp": (_C_DEFS + _CPP_EXTRA_DEFS, _C_IMPORTS),
    "java": (_JAVA_DEFS, _JAVA_IMPORTS),
}


@dataclass(frozen=True)
class Grammar:
    """A language's tree-sitter pieces: ``parser`` (one per thread), ``defs`` and
    ``imports`` (compiled queries, see the module doc)."""

    language: str
    parser: Any
    defs: Any
    imports: Any


_local = threading.local()
_compiled: dict[str, tuple[Any, Any, Any] | None] = {}
_lock = threading.Lock()
_failed_logged: set[str] = set()


def language_of(path: str) -> str | None:
    """The index's language of a file name by its extension (``None``: not indexed)."""
    name = os.path.basename(path).lower()
    if name.endswith((".min.js", ".bundle.js", ".d.ts.map")):
        return None
    return _EXT.get(os.path.splitext(name)[1])


def language_of_id(language_id: str, path: str = "") -> str | None:
    """The index's language of an LSP ``languageId`` (``typescriptreact`` is ``tsx``),
    else of ``path``'s extension."""
    return _IDS.get((language_id or "").lower()) or (language_of(path) if path else None)


def _compile(language: str) -> tuple[Any, Any, Any] | None:
    with _lock:
        if language in _compiled:
            return _compiled[language]
        got: tuple[Any, Any, Any] | None = None
        try:
            import tree_sitter

            module, attr = _MODULES[language]
            lang = tree_sitter.Language(getattr(importlib.import_module(module), attr)())
            defs_src, imports_src = _QUERIES[language]
            got = (lang, tree_sitter.Query(lang, defs_src), tree_sitter.Query(lang, imports_src))
        except Exception as exc:  # noqa: BLE001 - a missing or incompatible grammar wheel
            if language not in _failed_logged:
                _failed_logged.add(language)
                log.warning("workspace index: no %s grammar (%s); definitions by pattern only", language, exc)
        _compiled[language] = got
        return got


def grammar(language: str) -> Grammar | None:
    """The tree-sitter grammar of ``language`` for the calling thread, or ``None`` when
    the language has none or its grammar cannot be loaded (logged once)."""
    if language not in _MODULES:
        return None
    cache: dict[str, Grammar | None] | None = getattr(_local, "grammars", None)
    if cache is None:
        cache = {}
        _local.grammars = cache
    if language in cache:
        return cache[language]
    compiled = _compile(language)
    g: Grammar | None = None
    if compiled is not None:
        import tree_sitter

        lang, defs, imports = compiled
        g = Grammar(language, tree_sitter.Parser(lang), defs, imports)
    cache[language] = g
    return g
