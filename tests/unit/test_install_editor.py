"""`sidecar install-editor`, in process: real copies into a temporary HOME /
XDG_DATA_HOME, dry runs, refusals to touch files that are not ours, and the printed
instructions. Running an editor's CLI and the command as a real process are
tests/e2e/test_install_editor_e2e.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sidecar.tools import install_editor
from support import install_editor as install_editor_support
from support.install_editor import cli_on_path, run

ROOT = Path(__file__).resolve().parents[2]
EDITORS = ROOT / "editors"

# pytest finds fixtures by name in the test module: the shared ones, bound here.
home = install_editor_support.home
fake_vsix = install_editor_support.fake_vsix


def tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


# --- Neovim ---


def test_neovim_copies_plugin_into_xdg_pack_dir(home, tmp_path, monkeypatch, capsys):
    data = tmp_path / "data"
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    rc, out, err = run(capsys, "neovim")
    assert rc == 0
    target = data / "nvim" / "site" / "pack" / "sidecar" / "start" / "sidecar"
    assert tree(target) == tree(EDITORS / "neovim")
    assert (target / "lua" / "sidecar" / "ghost.lua").is_file()
    # `sidecar` is not on PATH here, so the setup line names this Python.
    assert f'require("sidecar").setup({{ cmd = {{ "{sys.executable}", "-m", "sidecar", "serve" }} }})' in out
    assert str(target) in out
    assert "copied" in err and "copied" not in out


def test_neovim_default_is_home_local_share_and_reinstall_replaces(home, capsys):
    target = home / ".local" / "share" / "nvim" / "site" / "pack" / "sidecar" / "start" / "sidecar"
    assert run(capsys, "neovim")[0] == 0
    (target / "stale.lua").write_text("-- from an older version")
    assert run(capsys, "neovim")[0] == 0
    assert tree(target) == tree(EDITORS / "neovim")


def test_neovim_setup_line_plain_when_sidecar_on_path(home, tmp_path, monkeypatch, capsys):
    cli_on_path(tmp_path, monkeypatch, "sidecar", "")
    rc, out, _ = run(capsys, "neovim", "--dry-run")
    assert rc == 0
    assert 'require("sidecar").setup()' in out


def test_neovim_dry_run_changes_nothing(home, capsys):
    rc, out, _ = run(capsys, "neovim", "--dry-run")
    assert rc == 0
    assert "Would copy" in out
    assert not (home / ".local").exists()


def test_neovim_refuses_a_foreign_folder(home, tmp_path, capsys):
    target = tmp_path / "mine"
    target.mkdir()
    (target / "notes.txt").write_text("keep me")
    rc, out, err = run(capsys, "neovim", "--prefix", str(target))
    assert rc == 1
    assert "not a sidecar plugin" in err
    assert tree(target) == {"notes.txt": b"keep me"}


def test_neovim_prefix_installs_there_and_says_how_to_load(home, tmp_path, capsys):
    target = tmp_path / "plugins" / "sidecar"
    rc, out, _ = run(capsys, "neovim", "--prefix", str(target))
    assert rc == 0
    assert (target / "lua" / "sidecar" / "init.lua").is_file()
    assert f'vim.opt.runtimepath:append("{target}")' in out


def test_neovim_without_editors_folder_prints_native_config(home, monkeypatch, capsys):
    monkeypatch.setattr(install_editor, "editors_dir", lambda: None)
    rc, out, err = run(capsys, "neovim")
    assert rc == 0
    assert "wheel" in out
    assert 'vim.lsp.config("sidecar"' in out and "vim.lsp.inline_completion.enable()" in out
    assert not (home / ".local").exists()
    assert "not found" in err


# --- Emacs ---


def test_emacs_copies_into_emacs_d_lisp(home, capsys):
    (home / ".emacs.d").mkdir()
    rc, out, err = run(capsys, "emacs")
    assert rc == 0
    target = home / ".emacs.d" / "lisp" / "sidecar.el"
    assert target.read_bytes() == (EDITORS / "emacs" / "sidecar.el").read_bytes()
    assert f'(add-to-list \'load-path "{target.parent}")' in out
    assert "(require 'sidecar)" in out
    assert "(setq sidecar-server-command '(" in out  # `sidecar` is not on PATH here
    assert "copied" in err


def test_emacs_uses_xdg_config_dir_when_there_is_no_emacs_d(home, tmp_path, monkeypatch, capsys):
    config = tmp_path / "config"
    (config / "emacs").mkdir(parents=True)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    assert run(capsys, "emacs")[0] == 0
    assert (config / "emacs" / "lisp" / "sidecar.el").is_file()
    assert not (home / ".emacs.d").exists()


def test_emacs_dry_run_and_foreign_file(home, capsys):
    rc, out, _ = run(capsys, "emacs", "--dry-run")
    assert rc == 0 and "Would copy" in out
    assert not (home / ".emacs.d").exists()
    mine = home / ".emacs.d" / "lisp" / "sidecar.el"
    mine.parent.mkdir(parents=True)
    mine.write_text(";; my own sidecar.el\n")
    rc, _, err = run(capsys, "emacs")
    assert rc == 1 and "not sidecar's" in err
    assert mine.read_text() == ";; my own sidecar.el\n"


# --- Helix ---


def test_helix_prints_snippet_and_never_writes(home, capsys):
    user_file = home / ".config" / "helix" / "languages.toml"
    rc, out, _ = run(capsys, "helix")
    assert rc == 0
    assert not user_file.exists()
    assert "does not support LSP inline completion" in out
    assert "[language-server.sidecar]" in out and 'args = ["serve"]' in out
    assert str(user_file) in out
    user_file.parent.mkdir(parents=True)
    user_file.write_text('[[language]]\nname = "rust"\n')
    rc, out, _ = run(capsys, "helix")
    assert rc == 0
    assert "by hand" in out and "[language-server.sidecar]" in out
    assert user_file.read_text() == '[[language]]\nname = "rust"\n'


def test_helix_snippet_is_valid_toml():
    import tomllib

    data = tomllib.loads((EDITORS / "helix" / "languages.toml").read_text())
    assert data["language-server"]["sidecar"] == {"command": "sidecar", "args": ["serve"]}
    assert all("sidecar" in lang["language-servers"] for lang in data["language"])
    assert tomllib.loads(install_editor.HELIX_SNIPPET)["language-server"]["sidecar"]["args"] == ["serve"]


# --- VS Code / Cursor ---


@pytest.fixture
def unbuilt_vscode(tmp_path, monkeypatch):
    """An editors/ folder whose extension has not been packaged yet."""
    editors = tmp_path / "editors"
    (editors / "vscode").mkdir(parents=True)
    (editors / "vscode" / "package.json").write_text("{}")
    monkeypatch.setattr(install_editor, "editors_dir", lambda: editors)
    return editors / "vscode"


def test_vscode_without_cli_prints_build_and_install_steps(home, capsys, unbuilt_vscode):
    rc, out, _ = run(capsys, "vscode")
    assert rc == 0
    assert f"cd {unbuilt_vscode} && npm ci && npm run package" in out
    assert "Extensions: Install from VSIX…" in out
    assert "`code` is not on PATH" in out
    assert "Cursor Tab" not in out


def test_vscode_with_vsix_but_no_cli_names_the_file(home, capsys, fake_vsix):
    rc, out, _ = run(capsys, "vscode")
    assert rc == 0
    assert f"Install {fake_vsix}" in out
    assert "npm run package" not in out


def test_wheel_install_vscode_instructions(home, monkeypatch, capsys):
    monkeypatch.setattr(install_editor, "editors_dir", lambda: None)
    rc, out, _ = run(capsys, "vscode")
    assert rc == 0
    assert "from a sidecar source checkout: cd editors/vscode && npm ci && npm run package" in out


def test_cursor_says_to_turn_off_cursor_tab(home, capsys, unbuilt_vscode):
    rc, out, _ = run(capsys, "cursor")
    assert rc == 0
    assert "Cursor Settings → Features → Cursor Tab" in out
    assert "cursor --install-extension" in out


# --- the command line ---


def test_usage_errors_and_help(capsys):
    rc, out, err = run(capsys, "notepad")
    assert rc == 2 and "invalid choice" in err and out == ""
    rc, out, _ = run(capsys, "--help")
    assert rc == 0 and "--dry-run" in out and "--prefix" in out
