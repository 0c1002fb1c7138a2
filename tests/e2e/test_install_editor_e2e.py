"""`sidecar install-editor` running processes: a stand-in editor CLI (a shell script) that
installs the .vsix or fails, and the command as a real process. The copies, dry runs,
refusals and instructions are tests/unit/test_install_editor.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import ROOT
from support import install_editor as install_editor_support
from support.install_editor import cli_on_path, run

# pytest finds fixtures by name in the test module: the shared ones, bound here.
home = install_editor_support.home
fake_vsix = install_editor_support.fake_vsix


# --- VS Code / Cursor ---


@pytest.mark.parametrize("editor, cli", [("vscode", "code"), ("cursor", "cursor")])
def test_installs_newest_vsix_with_the_editor_cli(home, tmp_path, monkeypatch, capsys, fake_vsix, editor, cli):
    log = tmp_path / "cli-args"
    script = f'echo "installing" \nprintf "%s\\n" "$@" > {log}\n'
    exe = cli_on_path(tmp_path, monkeypatch, cli, script, "/usr/bin", "/bin")

    rc, out, _ = run(capsys, editor, "--dry-run")
    assert rc == 0 and f"Would run: {exe} --install-extension {fake_vsix}" in out
    assert not log.exists()

    rc, out, err = run(capsys, editor)
    assert rc == 0
    assert log.read_text().split() == ["--install-extension", str(fake_vsix)]
    assert "installing" in err and "installing" not in out  # the CLI's output stays off stdout
    assert f"Installed {fake_vsix.name}" in out
    assert ("Cursor Tab" in out) == (editor == "cursor")


def test_cli_failure_is_reported(home, tmp_path, monkeypatch, capsys, fake_vsix):
    cli_on_path(tmp_path, monkeypatch, "code", "exit 3\n")
    rc, out, err = run(capsys, "vscode")
    assert rc == 3
    assert "failed with exit code 3" in err
    assert out == ""


# --- the command line ---


def test_module_entry_point_stdout_is_only_instructions(tmp_path):
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    proc = subprocess.run(
        [sys.executable, "-m", "sidecar.tools.install_editor", "helix", "--prefix", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=ROOT,
    )
    assert proc.returncode == 0
    assert proc.stdout.startswith("Helix does not support")
    assert "--prefix does not apply" in proc.stderr and "--prefix" not in proc.stdout


def test_wired_into_sidecar_cli(tmp_path):
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    proc = subprocess.run(
        [sys.executable, "-m", "sidecar", "install-editor", "helix"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=ROOT,
    )
    if proc.returncode == 2 and "invalid choice" in proc.stderr:
        pytest.skip("`sidecar install-editor` is not wired into sidecar/cli.py yet")
    assert proc.returncode == 0, proc.stderr
    assert "[language-server.sidecar]" in proc.stdout
