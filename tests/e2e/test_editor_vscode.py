"""The VS Code / Cursor extension (editors/vscode): it type-checks, bundles, packages
into a .vsix, and passes its Node tests: an independent LSP client (Microsoft's
vscode-jsonrpc / vscode-languageserver-protocol over stdio) that drives the sidecar
against the simulated backend, and the bundled extension with vscode-languageclient
against a stand-in for the vscode API.

Needs Node.js 20+ and npm; `scripts/setup-vscode` runs `npm ci` once (it needs the npm
registry or npm's cache the first time)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXT = ROOT / "editors" / "vscode"
SETUP = ROOT / "scripts" / "setup-vscode"


def _node_major() -> int:
    node = shutil.which("node")
    if node is None or shutil.which("npm") is None:
        return 0
    out = subprocess.run([node, "-p", "process.versions.node"], capture_output=True, text=True, timeout=30)
    try:
        return int(out.stdout.strip().split(".")[0])
    except ValueError:
        return 0


pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(_node_major() < 20, reason="Node.js 20+ and npm are needed for the VS Code extension"),
]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SIDECAR_", "SILICONFLOW_"))}
    env.update(extra)
    return env


def run(cmd: list[str], timeout: float, **env: str) -> subprocess.CompletedProcess[str]:
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=EXT, env=_env(**env), capture_output=True, text=True, timeout=timeout)
    took = time.monotonic() - t0
    assert proc.returncode == 0, (
        f"{' '.join(cmd)} failed with {proc.returncode} after {took:.1f} s\n"
        f"--- stdout\n{proc.stdout[-6000:]}\n--- stderr\n{proc.stderr[-6000:]}"
    )
    return proc


@pytest.fixture(scope="module")
def node_modules() -> Path:
    run([str(SETUP)], timeout=400)
    assert (EXT / "node_modules" / "vscode-languageclient").is_dir()
    return EXT / "node_modules"


def test_setup_is_idempotent(node_modules):
    t0 = time.monotonic()
    proc = run([str(SETUP)], timeout=60)
    assert time.monotonic() - t0 < 10
    assert "npm ci" not in proc.stderr  # nothing to install the second time


def test_setup_skips_without_node(tmp_path):
    # A PATH with the tools the script needs but no node/npm.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("dirname",):
        os.symlink(shutil.which(tool), bindir / tool)
    proc = subprocess.run(
        [shutil.which("bash") or "/bin/bash", str(SETUP)],
        env={"PATH": str(bindir)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    assert "skipping" in proc.stderr


def test_typecheck(node_modules):
    run(["npm", "run", "typecheck"], timeout=180)


def test_package_builds_a_vsix(node_modules):
    vsix = EXT / "sidecar.vsix"
    vsix.unlink(missing_ok=True)
    run(["npm", "run", "package"], timeout=240)
    assert vsix.is_file()
    assert zipfile.is_zipfile(vsix)
    with zipfile.ZipFile(vsix) as z:
        names = set(z.namelist())
        assert "extension/package.json" in names
        assert "extension/dist/extension.js" in names
        assert not any(n.startswith(("extension/node_modules/", "extension/src/", "extension/test/")) for n in names), (
            names
        )
        manifest = json.loads(z.read("extension/package.json"))
        bundle = z.read("extension/dist/extension.js").decode()
    assert manifest["main"] == "./dist/extension.js"
    assert manifest["engines"]["vscode"] == "^1.91.0"
    assert "onStartupFinished" in manifest["activationEvents"]
    assert any(e.startswith("onLanguage") for e in manifest["activationEvents"])
    settings = manifest["contributes"]["configuration"]["properties"]
    for key in (
        "serverPath",
        "mode",
        "model",
        "baseUrl",
        "siliconflowRegion",
        "maxTokens",
        "debounceMinMs",
        "debounceMaxMs",
        "prefetchEnabled",
        "cacheEnabled",
        "localEngine",
        "localUrl",
        "localModel",
        "localModelPath",
        "localNGpuLayers",
    ):
        assert f"sidecar.{key}" in settings, key
    assert not any("apikey" in k.lower() for k in settings), "the API key must not be a setting"
    commands = {c["command"] for c in manifest["contributes"]["commands"]}
    assert {
        "sidecar.setModeCommand",
        "sidecar.toggleLocalGpuCommand",
        "sidecar.showStats",
        "sidecar.clearCacheCommand",
        "sidecar.setApiKey",
    } <= commands
    # The server's own command ids are registered by vscode-languageclient; a contributed
    # command with one of them would be registered twice.
    assert not commands & {
        "sidecar.toggleLocalGpu",
        "sidecar.setMode",
        "sidecar.stats",
        "sidecar.clearCache",
        "sidecar.acceptCompletion",
    }
    assert 'require("vscode")' in bundle  # external: the editor provides it; the rest is bundled
    assert "sidecar/inlineCompletionUpdate" in bundle and "editor.action.inlineSuggest.trigger" in bundle


def test_node_tests(node_modules):
    # Logic units, the independent LSP client against the real server, and the bundled
    # extension with vscode-languageclient; the server is this interpreter's sidecar.
    proc = run(["npm", "test"], timeout=300, SIDECAR_PYTHON=sys.executable)
    out = proc.stdout + proc.stderr
    assert "# fail 0" in out, out[-4000:]
    assert "# pass" in out
