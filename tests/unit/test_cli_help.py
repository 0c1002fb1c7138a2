"""`sidecar --help` and every subcommand's `--help`, in process: argparse prints help text
as it is written, so it must be plain text, never reStructuredText or Markdown (a module
docstring handed to argparse showed its double backticks). The commands are read from
the parser itself, so a new subcommand or `model` action is checked without a change
here (tests/support/cli_help.py). The same through `python -m sidecar` as a process:
tests/e2e/test_cli_help_e2e.py."""

from __future__ import annotations

import pytest

from sidecar import cli
from sidecar.tools.demo import cli as demo_cli
from sidecar.tools.doctor import cli as doctor_cli
from support.cli_help import every_command, markup_in


def help_of(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    try:  # argparse exits after --help; install-editor catches that and returns the status
        code = cli.main([*argv, "--help"])
    except SystemExit as exc:
        code = exc.code
    assert code == 0, argv
    out = capsys.readouterr().out
    assert out.startswith("usage: sidecar"), (argv, out[:200])
    return out


def test_every_command_is_found():
    commands = every_command()
    assert {"serve", "demo", "doctor", "install-editor", "config", "stats", "cache", "model"} <= {
        c[0] for c in commands if c
    }
    assert ["model", "bench"] in commands


@pytest.mark.parametrize("argv", every_command(), ids=lambda a: " ".join(a) or "sidecar")
def test_help_is_plain_text(argv: list[str], capsys: pytest.CaptureFixture[str]):
    out = help_of(argv, capsys)
    assert not markup_in(out), f"`sidecar {' '.join(argv)} --help` prints markup: {markup_in(out)}"


@pytest.mark.parametrize("argv", [c for c in every_command() if c], ids=" ".join)
def test_every_command_says_what_it_does(argv: list[str], capsys: pytest.CaptureFixture[str]):
    # A description under the usage lines, not only the list of options.
    out = help_of(argv, capsys)
    body = out.split("\n\n", 1)[1]
    assert not body.startswith(("positional arguments:", "options:")), f"`sidecar {' '.join(argv)} --help`:\n{out}"


@pytest.mark.parametrize("main", [demo_cli.main, doctor_cli.main], ids=["tools.demo", "tools.doctor"])
def test_module_entry_points_are_plain_text(main, capsys: pytest.CaptureFixture[str]):
    # python -m sidecar.tools.demo / python -m sidecar.tools.doctor build their own parsers.
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage:") and not markup_in(out), markup_in(out)


def test_the_check_can_fail():
    # The module docstring that used to be the top-level description is caught.
    assert markup_in(cli.__doc__ or "")
    for text in (":func:`main`", "Example::", "**bold**", "`auto`"):
        assert markup_in(text), text
    for text in ("python -m sidecar serve", 'local_model = "auto"', "host ::1 or 127.0.0.1", "a*b"):
        assert not markup_in(text), text
