"""Which workspace files an import names (:class:`ModuleMap`, :meth:`ModuleMap.resolve`).

A file is known by the suffixes of its path inside its workspace folder, without the
extension and with it (``src/attr/_make.py`` is ``_make``, ``attr/_make``,
``src/attr/_make`` and the same with ``.py``); a package's entry file (``__init__``,
``index``, ``mod``) is also known by its folder (``attr``). By language:

- Python: ``from .a import b`` is resolved from the importing file's folder (one level up
  per extra dot): ``a.py``, ``a/__init__.py``, and ``a/b.py`` when ``b`` is a module;
  ``import a.b`` and ``from a.b import c`` by the suffix ``a/b`` where ``a`` is a
  top-level package (its parent folder has no ``__init__.py``).
- JavaScript and TypeScript: relative specifiers only (``./x``, ``../x``), with the
  extensions ``.ts .tsx .js .jsx .mjs .cjs .d.ts`` and ``/index.*`` tried in that order;
  a bare specifier is a dependency in ``node_modules`` and resolves to nothing.
- Go: the files of the folder whose path ends with the import path's last two parts
  (else its last part).
- Rust: ``mod x;`` is ``x.rs`` or ``x/mod.rs`` beside the file; ``use crate::a::b`` the
  suffix ``a/b`` (``super::`` from the parent folder).
- C and C++: ``#include "x.h"`` beside the file first, else by suffix.
- Java: ``import a.b.C`` by the suffix ``a/b/C``.

When several files match, those sharing the longest folder prefix with the importing
file come first. Not thread-safe: the workspace index calls it under its lock. See
docs/architecture.md ("The workspace index").
"""

from __future__ import annotations

import os
import posixpath

from .parse import Import

_PACKAGE_STEMS = ("__init__", "index", "mod")
_JS_EXTS = (".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".d.ts")
_SUFFIX_PARTS = 4


class ModuleMap:
    """Workspace files by path suffix and by folder (see module doc)."""

    def __init__(self) -> None:
        self._keys: dict[str, list[str]] = {}
        self._dirs: dict[str, list[str]] = {}
        self._files: set[str] = set()

    def __contains__(self, path: str) -> bool:
        return path in self._files

    def add(self, path: str, rel: str) -> None:
        """Know the file at absolute ``path`` (``rel``: its path inside its folder)."""
        if path in self._files:
            return
        self._files.add(path)
        for key in _keys_of(rel):
            self._keys.setdefault(key, []).append(path)
        for key in _dir_keys(rel):
            self._dirs.setdefault(key, []).append(path)

    def remove(self, path: str, rel: str) -> None:
        if path not in self._files:
            return
        self._files.discard(path)
        for table, keys in ((self._keys, _keys_of(rel)), (self._dirs, _dir_keys(rel))):
            for key in keys:
                paths = table.get(key)
                if paths and path in paths:
                    paths.remove(path)
                    if not paths:
                        del table[key]

    def resolve(self, from_path: str, language: str, imp: Import) -> list[str]:
        """The workspace files ``imp`` (imported by the file at ``from_path``) names,
        closest first; ``[]`` for a dependency outside the workspace."""
        found = self._resolve(from_path, language, imp)
        found = [p for p in dict.fromkeys(found) if p != from_path]
        here = os.path.dirname(from_path)
        return sorted(found, key=lambda p: -len(os.path.commonpath([here, os.path.dirname(p)])))

    def _top_level(self, key: str, depth: int) -> list[str]:
        """Python files named by the absolute module path ``key`` (``depth`` parts): only
        where its first part is a top-level package or module (its parent folder is no
        package), so ``import collections`` does not name ``geos/collections.py``."""
        out = []
        for p in self._keys.get(key, ()):
            top = p
            for _ in range(depth + (1 if os.path.basename(p).startswith("__init__.") else 0)):
                top = os.path.dirname(top)
            if os.path.join(top, "__init__.py") not in self._files:
                out.append(p)
        return out

    def _first(self, *candidates: str) -> list[str]:
        for c in candidates:
            if c in self._files:
                return [c]
        return []

    def _resolve(self, from_path: str, language: str, imp: Import) -> list[str]:
        here = os.path.dirname(from_path)
        module = imp.module
        if language == "python":
            parts = [p for p in module.split(".") if p]
            if imp.level:
                up = here
                for _ in range(imp.level - 1):
                    up = os.path.dirname(up)
                target = os.path.join(up, *parts)
                out = self._first(target + ".py", target + ".pyi", os.path.join(target, "__init__.py"))
                for name, _local in imp.names:
                    out += self._first(os.path.join(target, name + ".py"), os.path.join(target, name, "__init__.py"))
                return out
            key = "/".join(parts)
            out = self._top_level(key, len(parts))
            for name, _local in imp.names:
                out += self._top_level(f"{key}/{name}", len(parts) + 1)
            return out
        if language in ("javascript", "typescript", "tsx"):
            if not module.startswith("."):
                return []
            target = os.path.normpath(os.path.join(here, module))
            exact = [target] + [target + e for e in _JS_EXTS] + [os.path.join(target, "index" + e) for e in _JS_EXTS]
            stem, ext = os.path.splitext(target)
            if ext in (".js", ".mjs", ".cjs", ".jsx"):  # TypeScript's "./x.js" names x.ts
                exact += [stem + e for e in _JS_EXTS]
            return self._first(*exact)
        if language == "go":
            parts = [p for p in module.split("/") if p]
            for n in (2, 1):
                if len(parts) >= n:
                    got = self._dirs.get("/".join(parts[-n:]))
                    if got:
                        return list(got)
            return []
        if language == "rust":
            parts = [p for p in module.split("::") if p]
            if imp.level:  # mod x;
                return self._first(os.path.join(here, module + ".rs"), os.path.join(here, module, "mod.rs"))
            base: str | None = None
            while parts and parts[0] in ("crate", "self", "super"):
                head = parts.pop(0)
                if head == "super":
                    base = os.path.dirname(base or here)
                elif head == "self":
                    base = base or here
            if base is not None and parts:
                target = os.path.join(base, *parts)
                return self._first(target + ".rs", os.path.join(target, "mod.rs"))
            return list(self._keys.get("/".join(parts), ())) if parts else []
        if language in ("c", "cpp"):
            beside = os.path.normpath(os.path.join(here, module))
            if beside in self._files:
                return [beside]
            return list(self._keys.get(posixpath.normpath(module).lstrip("./"), ()))
        if language == "java":
            return list(self._keys.get(module.replace(".", "/"), ()))
        return []


def _keys_of(rel: str) -> list[str]:
    rel = rel.replace(os.sep, "/")
    stem, _ext = posixpath.splitext(rel)
    if stem.endswith(".d"):  # x.d.ts
        stem = stem[:-2]
    parts = stem.split("/")
    keys = []
    for n in range(1, min(len(parts), _SUFFIX_PARTS) + 1):
        keys.append("/".join(parts[-n:]))
    with_ext = rel.split("/")
    for n in range(1, min(len(with_ext), _SUFFIX_PARTS) + 1):
        keys.append("/".join(with_ext[-n:]))
    if parts[-1] in _PACKAGE_STEMS and len(parts) > 1:
        pkg = parts[:-1]
        for n in range(1, min(len(pkg), _SUFFIX_PARTS) + 1):
            keys.append("/".join(pkg[-n:]))
    return list(dict.fromkeys(keys))


def _dir_keys(rel: str) -> list[str]:
    parts = rel.replace(os.sep, "/").split("/")[:-1]
    return ["/".join(parts[-n:]) for n in (1, 2) if len(parts) >= n]
