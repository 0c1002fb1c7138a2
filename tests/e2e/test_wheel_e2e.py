"""The installed wheel is the product: built from this tree and installed into a fresh
virtual environment (dependencies from PyPI, pinned by constraints.txt), it holds no
simulator or benchmark module, does not pull aiohttp, and its ``sidecar --help``,
``sidecar demo --help`` and ``sidecar doctor`` run."""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(600)

ROOT = Path(__file__).resolve().parents[2]


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=500, **kw)


def test_the_wheel_in_a_fresh_venv_is_the_product_alone(tmp_path):
    out = _run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(tmp_path / "dist")], cwd=tmp_path
    )
    if out.returncode != 0 and "Could not find a version" in out.stderr + out.stdout:
        pytest.skip(f"no package index to build the wheel with: {out.stderr[-300:]}")
    assert out.returncode == 0, out.stderr[-2000:]
    wheel = next((tmp_path / "dist").glob("sidecar_lsp-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("sidecar/lsp/") for n in names)
    dev = [n for n in names if "simulator" in n or "/bench/" in n or n.startswith("devtools")]
    assert not dev, f"development tools in the wheel: {dev[:5]}"
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("/METADATA"))).decode()
    runtime = [line for line in meta.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line]
    assert runtime and not any("aiohttp" in line for line in runtime), runtime

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    out = _run(
        [
            str(py),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            str(wheel),
            "-c",
            str(ROOT / "constraints.txt"),
        ],
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert _run([str(py), "-c", "import aiohttp"], cwd=tmp_path).returncode != 0, "aiohttp came with the wheel"
    sidecar = env_dir / "bin" / "sidecar"
    help_ = _run([str(sidecar), "--help"], cwd=tmp_path)
    assert help_.returncode == 0, help_.stderr
    import re

    commands = set(re.search(r"\{([a-z,-]+)\}", help_.stdout).group(1).split(","))
    assert "serve" in commands and "doctor" in commands and not commands & {"bench", "simulate"}, commands
    demo = _run([str(sidecar), "demo", "--help"], cwd=tmp_path)
    assert demo.returncode == 0 and "--tiny" in demo.stdout, demo.stderr
    home = {
        "HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "PATH": "/usr/bin:/bin",
    }
    doctor = _run([str(sidecar), "doctor"], cwd=tmp_path, env=home)
    # Without the `local` extra and with no key, doctor finds problems and says which:
    # it runs to its summary and names the missing extra.
    assert "problems found" in doctor.stdout + doctor.stderr or "all checks" in doctor.stdout, doctor.stdout[-2000:]
    assert "Traceback" not in doctor.stderr, doctor.stderr[-2000:]
