"""`sidecar install-editor` in process, for its tests: a private HOME, a stand-in editors/
folder with two .vsix builds, a stand-in command on PATH, and the command's exit status
and output.

``home`` and ``fake_vsix`` are pytest fixtures. pytest looks fixtures up by name in the
test module, so a module binds them (``home = install_editor_support.home``) rather than
importing them by name, which pyflakes reports once per test parameter of that name.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sidecar.tools import install_editor


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A private HOME and XDG folders; PATH without `sidecar`, `code` or `cursor`."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in ("XDG_DATA_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(var, raising=False)
    empty_bin = tmp_path / "empty-bin"
    empty_bin.mkdir()
    monkeypatch.setenv("PATH", str(empty_bin))
    return home


@pytest.fixture
def fake_vsix(tmp_path, monkeypatch):
    """editors/vscode/ with an older and a newer .vsix (the newer one returned), in place of
    the package's editors folder."""
    editors = tmp_path / "editors"
    (editors / "vscode").mkdir(parents=True)
    old = editors / "vscode" / "sidecar-0.0.1.vsix"
    old.write_bytes(b"PK old")
    os.utime(old, (1_000_000, 1_000_000))
    new = editors / "vscode" / "sidecar-0.0.2.vsix"
    new.write_bytes(b"PK new")
    monkeypatch.setattr(install_editor, "editors_dir", lambda: editors)
    return new


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """``install_editor.main(argv)`` in process: (exit status, stdout, stderr)."""
    rc = install_editor.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def cli_on_path(tmp_path: Path, monkeypatch, name: str, script: str, *also: str) -> Path:
    """``tmp_path/bin/NAME``, a shell script running ``script``, first on PATH (alone, or
    before the folders ``also``); returns its path."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / name
    exe.write_text("#!/bin/sh\n" + script)
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", os.pathsep.join([str(bin_dir), *also]))
    return exe
