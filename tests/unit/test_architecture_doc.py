"""docs/architecture.md stays true: every module path it names exists, and every code
symbol it names in backticks (``Class.member``, ``module.function``, a ``_private``
name) is defined in the package."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
PACKAGE = ROOT / "sidecar"

# Module paths in the text and in the diagram: ``lsp/server.py``, ``completion/cache/``.
_PATH = re.compile(r"(?<![\w/.-])((?:[a-z_]+/)*[a-z_]+(?:\.py|/))(?![\w/])")
# ``Name.member`` / ``module.member`` (a call's arguments dropped) and ``_private`` names.
_DOTTED = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)(?:\(.*\))?$")
_PRIVATE = re.compile(r"^_[a-z][a-z0-9_]*$")
# Dotted names in backticks that are not our code (file names, hosts, other programs').
_EXTERNAL_CLASSES = {"Llama"}  # llama-cpp-python's


def _sources() -> dict[Path, str]:
    return {p: p.read_text(encoding="utf-8") for p in [*PACKAGE.rglob("*.py"), *(ROOT / "devtools").rglob("*.py")]}


# A definition: ``def name``, ``class name``, or an assignment to ``name`` / ``self.name``.
_DEFINITION = re.compile(r"(?m)^\s*(?:async\s+def|def|class)\s+(\w+)|^\s*(?:self\.)?(\w+)\s*[:=]")
_names_of: dict[int, tuple[dict[Path, str], set[str]]] = {}


def _defined(name: str, texts: dict[Path, str]) -> bool:
    cached = _names_of.get(id(texts))
    if cached is None or cached[0] is not texts:  # every name defined in ``texts``, once
        names = {a or b for t in texts.values() for a, b in _DEFINITION.findall(t)}
        cached = _names_of[id(texts)] = (texts, names)
    return name in cached[1]


def _module_files() -> set[str]:
    out = set()
    for p in [*PACKAGE.rglob("*"), *(ROOT / "devtools").rglob("*")]:
        if "__pycache__" in p.parts:
            continue
        rel = p.relative_to(PACKAGE if p.is_relative_to(PACKAGE) else ROOT).as_posix()
        parts = rel.split("/")
        for i in range(len(parts)):  # every suffix: "completion/cache/store.py", "cache/store.py", "store.py"
            tail = "/".join(parts[i:])
            out.add(tail + "/" if p.is_dir() else tail)
        if p.is_relative_to(PACKAGE):
            out.add("sidecar/" + rel + ("/" if p.is_dir() else ""))
    return out


def _module_names() -> set[str]:
    return {p.stem for p in PACKAGE.rglob("*.py")} | {p.name for p in PACKAGE.rglob("*") if p.is_dir()}


def test_every_module_path_named_exists():
    text = DOC.read_text(encoding="utf-8")
    known = _module_files()
    top = {p.name + ("/" if p.is_dir() else "") for p in ROOT.iterdir()}
    missing = sorted({m for m in _PATH.findall(text) if m not in known and m not in top
                      and not m.startswith(("docs/", "tests/", "scripts/", "editors/", "fixtures/"))})
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"


def test_every_code_symbol_named_exists():
    text = DOC.read_text(encoding="utf-8")
    texts = _sources()
    missing = []
    modules = _module_names()
    for token in sorted(set(re.findall(r"`([^`\n]+)`", text))):
        m = _DOTTED.match(token)
        if m:
            owner, member = m.groups()
            if owner[0].isupper() and owner not in _EXTERNAL_CLASSES:
                if not (_defined(owner, texts) and _defined(member, texts)):
                    missing.append(token)
            elif member in {"py", "md", "json", "toml", "sh"} or not member.islower():
                continue  # a file name, or an LSP name (``window.workDoneProgress``)
            elif owner in modules and owner != "sidecar":  # ``answer.follow``: a module of ours
                if not any(p.stem == owner and re.search(rf"(?m)^(?:async\s+def|def|class)\s+{member}\b|^{member}\s*[:=]", t)
                           for p, t in texts.items()):
                    missing.append(token)
        elif _PRIVATE.match(token) and not _defined(token, texts):
            missing.append(token)
    assert not missing, f"docs/architecture.md names symbols that are not defined: {missing}"


def test_the_check_can_fail():
    # A name that is gone (the old ``_follow``) is caught.
    assert not _defined("_follow", _sources())
    assert "no_such_module.py" not in _module_files()
