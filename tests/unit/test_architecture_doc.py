"""docs/architecture.md stays true: every module path it names exists, every module of
the package is named in it, and every code symbol it names in backticks
(``Class.member``, ``module.function``, a ``_private`` name) is defined in the package."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

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
    missing = sorted(
        {
            m
            for m in _PATH.findall(text)
            if m not in known
            and m not in top
            and not m.startswith(("docs/", "tests/", "scripts/", "editors/", "fixtures/"))
        }
    )
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"


def _package_modules() -> list[str]:
    """Every module and subpackage of ``sidecar/``, by its path under it: ``cli.py``,
    ``completion/cache/store.py``, ``tools/demo/``. A package's ``__init__.py`` is named
    by its folder and a ``__main__.py`` is an entry point (``python -m``), so neither is
    asked for."""
    mods = [
        p.relative_to(PACKAGE).as_posix()
        for p in PACKAGE.rglob("*.py")
        if "__pycache__" not in p.parts and p.name not in ("__init__.py", "__main__.py")
    ]
    pkgs = [
        p.parent.relative_to(PACKAGE).as_posix() + "/"
        for p in PACKAGE.rglob("__init__.py")
        if p.parent != PACKAGE and "__pycache__" not in p.parts
    ]
    return sorted(mods + pkgs)


def _tails(rel: str) -> list[str]:
    """The ways the doc may write ``rel``: ``sidecar/`` + it, it, and each shorter tail
    (``completion/cache/store.py``, ``cache/store.py``, ``store.py``)."""
    folder = rel.endswith("/")
    parts = rel.rstrip("/").split("/")
    return ["sidecar/" + rel] + ["/".join(parts[i:]) + ("/" if folder else "") for i in range(len(parts))]


def unnamed_modules(text: str) -> list[str]:
    """The modules of :func:`_package_modules` that ``text`` does not name. A module is
    named by a path the doc writes (``_PATH``) that is one of its tails and no other
    module's: ``store.py`` names neither ``completion/cache/store.py`` nor
    ``models/store.py``, while ``cache/store.py`` names the first."""
    modules = _package_modules()
    owners: dict[str, int] = {}
    for m in modules:
        for t in set(_tails(m)):
            owners[t] = owners.get(t, 0) + 1
    named = set(_PATH.findall(text))
    return [m for m in modules if not any(t in named and owners[t] == 1 for t in _tails(m))]


def test_every_module_is_named():
    # The map is complete: a module added without a line in the doc fails here.
    missing = unnamed_modules(DOC.read_text(encoding="utf-8"))
    assert not missing, (
        "docs/architecture.md does not name these modules (write each with enough of its "
        f"path to be unique, e.g. cache/store.py): {missing}"
    )


def test_the_keystroke_map_shows_the_confidence_gate():
    text = DOC.read_text(encoding="utf-8")
    diagram = text.split("## The path of a keystroke", 1)[1].split("```")[1]
    assert "gate.py" in diagram and "confidence gate" in diagram
    # ... between the answer and the updates, where scheduler.py applies it.
    assert diagram.index("5 stream, answer") < diagram.index("confidence gate") < diagram.index("7 follow-up")


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
                if not any(
                    p.stem == owner and re.search(rf"(?m)^(?:async\s+def|def|class)\s+{member}\b|^{member}\s*[:=]", t)
                    for p, t in texts.items()
                ):
                    missing.append(token)
        elif _PRIVATE.match(token) and not _defined(token, texts):
            missing.append(token)
    assert not missing, f"docs/architecture.md names symbols that are not defined: {missing}"


def test_the_check_can_fail():
    # A name that is gone (the old ``_follow``) is caught.
    assert not _defined("_follow", _sources())
    assert "no_such_module.py" not in _module_files()
    # A doc that names a module only by an ambiguous file name has not named it.
    assert "completion/cache/store.py" in unnamed_modules("the SQLite file (store.py)")
    assert "completion/cache/store.py" not in unnamed_modules("the SQLite file (cache/store.py)")
    assert "completion/scheduler.py" in unnamed_modules("the scheduler")


def test_warmup_figures_agree_with_engine_start():
    # "The embedded engine", Start-up: what the doc says of the warm-up is what
    # engine_start.py, managed_engine.py and local_engine.py do.
    from sidecar.backends.engine_start import WARMUP_MAX_TOKENS, warmup_prompt
    from sidecar.backends.local_engine import WARMUP_REQUEST_GRACE_S
    from sidecar.completion import tokens

    text = " ".join(DOC.read_text(encoding="utf-8").split("**Start-up.**", 1)[1].split("\n\n", 1)[0].split())
    said = re.search(r"~(\d+) tokens with SmolLM2's tokenizer, (\d+) in cl100k; (\d+) tokens asked for", text)
    assert said, "the Start-up paragraph no longer states the built-in prompt's size"
    smollm2, cl100k, asked = map(int, said.groups())
    assert cl100k == tokens.count(warmup_prompt())
    assert asked == WARMUP_MAX_TOKENS
    assert f"within {WARMUP_REQUEST_GRACE_S:g} s" in text
    four = re.search(r"four functions \(~(\d+) tokens\)", text)
    assert four
    # The function's own docstring gives the same figures.
    doc = " ".join((warmup_prompt.__doc__ or "").split())
    assert f"2: ~{smollm2} tokens" in doc and f"4: ~{four.group(1)}" in doc, doc
    assert f"cl100k counts {cl100k} and {tokens.count(warmup_prompt(4))}" in doc, doc
    llama_cpp = pytest.importorskip("llama_cpp")
    from sidecar.backends.engine_setup import shipped_model_path
    from sidecar.backends.errors import BackendError

    try:
        path = shipped_model_path()
    except BackendError:
        pytest.skip("the shipped SmolLM2 model is not installed")
    vocab = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    for stated, functions in ((smollm2, 2), (int(four.group(1)), 4)):
        counted = len(vocab.tokenize(warmup_prompt(functions).encode()))
        assert abs(counted - stated) <= stated * 0.05, (functions, counted, stated)
