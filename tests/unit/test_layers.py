"""The layers are import contracts (pyproject.toml ``[tool.importlinter]``,
docs/architecture.md "Layers"): they hold in this checkout, and an import that runs back
up (a backend importing the LSP surface) breaks them. import-linter runs for real, on
this checkout and on a copy with one such import added."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")

pytestmark = pytest.mark.skipif(not LINT.exists(), reason="import-linter is not installed (scripts/setup adds it)")


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT), "--no-cache", "--config", str(root / "pyproject.toml")],
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def copy_tree(dst: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "node_modules")
    for name in ("sidecar", "devtools"):
        shutil.copytree(ROOT / name, dst / name, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", dst / "pyproject.toml")


def test_the_layers_hold_here():
    r = lint(ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


def test_an_import_back_up_breaks_them(tmp_path):
    copy_tree(tmp_path)
    errors = tmp_path / "sidecar" / "backends" / "errors.py"
    errors.write_text(errors.read_text(encoding="utf-8") + "\nfrom ..lsp import inline  # noqa: E402\n", "utf-8")
    r = lint(tmp_path)
    assert r.returncode != 0
    assert "sidecar.backends is not allowed to import sidecar.lsp" in r.stdout, r.stdout[-3000:]


def test_the_product_importing_the_dev_tools_breaks_them(tmp_path):
    copy_tree(tmp_path)
    metrics = tmp_path / "sidecar" / "metrics.py"
    metrics.write_text(metrics.read_text(encoding="utf-8") + "\nimport devtools.simulator  # noqa: E402\n", "utf-8")
    r = lint(tmp_path)
    assert r.returncode != 0
    assert "devtools" in r.stdout.split("Broken contracts", 1)[-1], r.stdout[-3000:]
