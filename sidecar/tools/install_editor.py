"""``sidecar install-editor vscode|cursor|neovim|emacs|helix [--dry-run] [--prefix DIR]``.

Puts the editor configuration from ``editors/`` in place where that is safe (Neovim: the
plugin into the user's pack directory; Emacs: sidecar.el into the user's lisp directory;
VS Code / Cursor: the built .vsix through the editor's CLI), and otherwise prints exactly
what to do. It never overwrites a file it did not write (Helix's languages.toml is only
ever printed).

``editors/`` is the source checkout's folder, or in a wheel install the copy that setup.py
packages as ``sidecar/_editors`` (the Neovim plugin, sidecar.el, Helix's languages.toml and,
when it was built before the wheel, the VS Code extension's sidecar.vsix).

stdout carries only the instructions for the user; progress and errors go to stderr.
"""

from __future__ import annotations

import argparse
import filecmp
import importlib.resources
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

EDITORS = ("vscode", "cursor", "neovim", "emacs", "helix")

KEY_HINT = (
    "The API key: export SILICONFLOW_API_KEY in the environment the editor starts from, or set "
    "api_key in ~/.config/sidecar/config.toml (see `sidecar config`)."
)

VSCODE_KEY_HINT = (
    'The API key: run "Set SiliconFlow API Key" from the Command Palette (kept in the editor\'s '
    "secret storage), or export SILICONFLOW_API_KEY in the environment the editor starts from."
)

# What an install without the editor files can still offer.
NEOVIM_012_SNIPPET = """\
vim.lsp.config("sidecar", {{
  cmd = {cmd},
  filetypes = {{ "python", "lua", "javascript", "typescript", "go", "rust" }},
}})
vim.lsp.enable("sidecar")
vim.lsp.inline_completion.enable()
vim.keymap.set("i", "<Tab>", function()
  if not vim.lsp.inline_completion.get() then return "<Tab>" end
end, {{ expr = true, replace_keycodes = true }})"""

HELIX_SNIPPET = """\
[language-server.sidecar]
command = "sidecar"
args = ["serve"]

[[language]]
name = "python"
language-servers = ["pylsp", "sidecar"]  # keep your servers (`hx --health python`), add "sidecar"
"""

SOURCE_HINT = (
    "This sidecar install has no editor files (neither a wheel's sidecar/_editors nor a "
    "source checkout's editors/ folder). Reinstall it from a wheel of sidecar-lsp, or clone "
    "the sidecar source repository and run `sidecar install-editor {editor}` from a checkout "
    "installed with `pip install -e .`, or copy its editors/{editor} folder by hand."
)


def editors_dir() -> Path | None:
    """The editor files: the copy a wheel install carries (``sidecar/_editors``, see
    setup.py), else the ``editors/`` folder of the source checkout this package runs from;
    None when there is neither."""
    try:
        packaged = importlib.resources.files("sidecar") / "_editors"
    except (ImportError, TypeError):  # pragma: no cover - sidecar imported oddly
        packaged = None
    if isinstance(packaged, Path) and packaged.is_dir():
        return packaged
    d = Path(__file__).resolve().parents[2] / "editors"
    return d if d.is_dir() else None


def _say(text: str = "") -> None:
    """An instruction for the user (stdout)."""
    sys.stdout.write(text + "\n")  # a CLI: its instructions are its output


def _note(text: str) -> None:
    """Progress or an error (stderr)."""
    print(f"sidecar install-editor: {text}", file=sys.stderr)


def _home() -> Path:
    return Path(os.environ.get("HOME") or Path.home())


def _xdg(var: str, default: str) -> Path:
    value = os.environ.get(var)
    return Path(value) if value and os.path.isabs(value) else _home() / default


def _server_cmd() -> list[str]:
    """The command an editor should start: ``sidecar serve`` if it is on PATH, else this
    Python with ``-m sidecar serve``."""
    if shutil.which("sidecar"):
        return ["sidecar", "serve"]
    return [sys.executable, "-m", "sidecar", "serve"]


def _lua_list(items: list[str]) -> str:
    return "{ " + ", ".join(json.dumps(i) for i in items) + " }"


def _copy_tree(src: Path, dest: Path) -> None:
    """Copy src to dest, replacing an older copy at dest, via a sibling temp folder."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".sidecar-", dir=dest.parent))
    try:
        staged = tmp / "x"
        shutil.copytree(src, staged, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*"))
        if dest.exists():
            shutil.rmtree(dest)
        staged.rename(dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _copy_file(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".sidecar-", dir=dest.parent)
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# --- Neovim -------------------------------------------------------------------------


def _neovim(args: argparse.Namespace) -> int:
    cmd = _server_cmd()
    setup_opts = "" if cmd == ["sidecar", "serve"] else f"{{ cmd = {_lua_list(cmd)} }}"
    setup_line = f'require("sidecar").setup({setup_opts})'
    editors = editors_dir()
    src = editors / "neovim" if editors else None
    if src is None or not (src / "lua" / "sidecar" / "init.lua").is_file():
        _note("editors/neovim not found")
        _say(SOURCE_HINT.format(editor="neovim"))
        _say()
        _say("On Neovim 0.12 or later no plugin is needed; add to your init.lua:")
        _say()
        _say(NEOVIM_012_SNIPPET.format(cmd=_lua_list(cmd)))
        _say()
        _say(KEY_HINT)
        return 0

    if args.prefix is not None:
        target = args.prefix.expanduser().resolve()
    else:
        target = _xdg("XDG_DATA_HOME", ".local/share") / "nvim" / "site" / "pack" / "sidecar" / "start" / "sidecar"

    if target.is_symlink():
        _note(f"{target} is a symbolic link (a development setup?); left as it is")
    elif target.exists() and not (target / "lua" / "sidecar" / "init.lua").is_file() and any(target.iterdir()):
        _note(f"{target} exists and is not a sidecar plugin; not touching it (use --prefix)")
        return 1
    elif args.dry_run:
        _say(f"Would copy {src} to {target}")
    else:
        _copy_tree(src, target)
        _note(f"copied {src} to {target}")

    _say(f"The Neovim plugin is in {target}.")
    if args.prefix is not None:
        _say("That folder is not on Neovim's packpath; add to your init.lua:")
        _say(f"  vim.opt.runtimepath:append({json.dumps(str(target))})")
    _say("Add to your init.lua:")
    _say(f"  {setup_line}")
    _say("Neovim 0.12+ uses its native inline completion; 0.7-0.11 get the plugin's ghost text.")
    _say("<Tab> accepts a suggestion; :Sidecar stats | mode | toggle-local | clear-cache | status.")
    _say(f"See {src / 'README.md'} for lazy.nvim and the options.")
    _say(KEY_HINT)
    return 0


# --- Emacs --------------------------------------------------------------------------


def _emacs_lisp_dir() -> Path:
    home_dir = _home() / ".emacs.d"
    xdg_dir = _xdg("XDG_CONFIG_HOME", ".config") / "emacs"
    if not home_dir.exists() and xdg_dir.exists():
        return xdg_dir / "lisp"
    return home_dir / "lisp"


def _emacs(args: argparse.Namespace) -> int:
    editors = editors_dir()
    src = editors / "emacs" / "sidecar.el" if editors else None
    if src is None or not src.is_file():
        _note("editors/emacs/sidecar.el not found")
        _say(SOURCE_HINT.format(editor="emacs"))
        return 0
    target_dir = args.prefix.expanduser().resolve() if args.prefix is not None else _emacs_lisp_dir()
    target = target_dir / "sidecar.el"
    if target.exists() and not filecmp.cmp(src, target, shallow=False):
        head = target.read_text(encoding="utf-8", errors="replace")[:200]
        if not head.startswith(";;; sidecar.el"):
            _note(f"{target} exists and is not sidecar's; not touching it (use --prefix)")
            return 1
    if args.dry_run:
        _say(f"Would copy {src} to {target}")
    else:
        _copy_file(src, target)
        _note(f"copied {src} to {target}")
    cmd = _server_cmd()
    _say(f"sidecar.el is in {target_dir}. Add to your init.el (needs lsp-mode 9.0.1 or later):")
    _say()
    _say(f"(add-to-list 'load-path {json.dumps(str(target_dir))})")
    if cmd != ["sidecar", "serve"]:
        _say(f"(setq sidecar-server-command '({' '.join(json.dumps(c) for c in cmd)}))")
    _say("(with-eval-after-load 'lsp-mode")
    _say("  (require 'sidecar))")
    _say()
    _say("Then M-x lsp in a code buffer: suggestions show as ghost text; TAB or RET accepts.")
    _say(KEY_HINT)
    return 0


# --- Helix --------------------------------------------------------------------------


def _helix(args: argparse.Namespace) -> int:
    if args.prefix is not None:
        _note("--prefix does not apply to helix: its languages.toml is only printed")
    editors = editors_dir()
    snippet_file = editors / "helix" / "languages.toml" if editors else None
    snippet = snippet_file.read_text(encoding="utf-8") if snippet_file and snippet_file.is_file() else HELIX_SNIPPET
    user_file = _xdg("XDG_CONFIG_HOME", ".config") / "helix" / "languages.toml"
    _say("Helix does not support LSP inline completion yet (helix-editor/helix#13039; a pull")
    _say("request is open), so no ghost text will show. Helix can still run the sidecar, ready")
    _say("for when it does.")
    _say()
    if user_file.exists():
        text = user_file.read_text(encoding="utf-8", errors="replace")
        if "[language-server.sidecar]" in text:
            _say(f"{user_file} already defines [language-server.sidecar]; nothing to do.")
            return 0
        _say(f"Merge these lines into your {user_file} by hand (it exists; this command")
        _say("never changes it). A language's `language-servers` list replaces Helix's")
        _say("default one, so keep the servers you already use:")
    else:
        _say(f"Save these lines as {user_file} (or merge them into it):")
    _say()
    _say(snippet.rstrip("\n"))
    return 0


# --- VS Code / Cursor ---------------------------------------------------------------


def _newest_vsix(editors: Path | None) -> Path | None:
    if editors is None:
        return None
    found = sorted((editors / "vscode").glob("*.vsix"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def _vscode(args: argparse.Namespace) -> int:
    editor = args.editor
    cli_name = "cursor" if editor == "cursor" else "code"
    app = "Cursor" if editor == "cursor" else "VS Code"
    if args.prefix is not None:
        _note(f"--prefix does not apply to {editor}: {app} installs extensions itself")
    editors = editors_dir()
    vsix = _newest_vsix(editors)
    cli = shutil.which(cli_name)
    cursor_tab = (
        "In Cursor, turn off Cursor's own completion so the two do not fight: Cursor Settings → "
        "Features → Cursor Tab (off)."
    )
    if cli and vsix:
        command = [cli, "--install-extension", str(vsix)]
        if args.dry_run:
            _say("Would run: " + " ".join(command))
        else:
            _note("running " + " ".join(command))
            proc = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if proc.stdout:
                sys.stderr.write(proc.stdout)
            if proc.returncode != 0:
                _note(f"{cli_name} --install-extension failed with exit code {proc.returncode}")
                return proc.returncode
            _say(f"Installed {vsix.name} into {app}. Reload the window (Developer: Reload Window).")
        if editor == "cursor":
            _say(cursor_tab)
        _say(VSCODE_KEY_HINT)
        return 0

    # Buildable sources (a checkout); a wheel's copy holds at most the built sidecar.vsix.
    vscode_dir = editors / "vscode" if editors and (editors / "vscode" / "package.json").is_file() else None
    _say(f"To install the sidecar extension in {app}:")
    step = 1
    if vsix is None:
        if vscode_dir is not None:
            _say(f"  {step}. Build it: cd {vscode_dir} && npm ci && npm run package")
        else:
            _say(f"  {step}. Build it from a sidecar source checkout: cd editors/vscode && npm ci && npm run package")
        step += 1
        vsix_text = f"{vscode_dir or 'editors/vscode'}/sidecar.vsix"
    else:
        vsix_text = str(vsix)
    _say(f"  {step}. Install {vsix_text}:")
    _say(f"     {cli_name} --install-extension {vsix_text}")
    _say(f'     or in {app}: Command Palette → "Extensions: Install from VSIX…" and pick the file.')
    if cli is None:
        _say(
            f'     (`{cli_name}` is not on PATH: in {app}, Command Palette → "Shell Command: Install '
            f"'{cli_name}' command in PATH\".)"
        )
    step += 1
    if editor == "cursor":
        _say(f"  {step}. {cursor_tab}")
        step += 1
    _say(f"  {step}. Reload the window. The extension starts `sidecar serve`; set sidecar.* in Settings.")
    _say(VSCODE_KEY_HINT)
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sidecar install-editor",
        description="Put the sidecar's editor configuration in place, or print exactly what to do.",
    )
    p.add_argument("editor", choices=EDITORS)
    p.add_argument("--dry-run", action="store_true", help="say what would be done and change nothing")
    p.add_argument(
        "--prefix",
        type=Path,
        default=None,
        metavar="DIR",
        help="install into DIR instead of the usual place (neovim: the plugin folder; emacs: the folder for sidecar.el)",
    )
    return p


def main(argv: list[str]) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # --help or a usage error (already printed)
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    handlers = {"neovim": _neovim, "emacs": _emacs, "helix": _helix, "vscode": _vscode, "cursor": _vscode}
    try:
        return handlers[args.editor](args)
    except BrokenPipeError:  # stdout closed early (`... | head`): stop quietly
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (AttributeError, OSError, ValueError):
            pass
        return 1
    except OSError as exc:
        _note(str(exc))
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
