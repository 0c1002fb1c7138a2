"""What the `--help` tests share (tests/unit/test_cli_help.py in process,
tests/e2e/test_cli_help_e2e.py as processes): every command the `sidecar` parser knows,
and the markup that plain help text never has."""

from __future__ import annotations

import argparse
import re

from sidecar import cli

# Any backtick (``literal``, `interpreted`, :role:`target`), a "::" that opens a literal
# block or a directive, **strong**.
MARKUP = re.compile(r"`|::(?:\s|$)|\*\*\S")


def markup_in(text: str) -> list[str]:
    """The lines of ``text`` that carry markup."""
    return [line for line in text.splitlines() if MARKUP.search(line)]


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def every_command() -> list[list[str]]:
    """``[]`` (the top level), each subcommand, and each action of a subcommand that has
    actions (``model list``, ...), as argument lists to put before ``--help``. Read from
    the parser, so a new subcommand is checked without a change to the tests."""
    out: list[list[str]] = [[]]
    for name, sub in _subparsers(cli.build_parser()).items():
        out.append([name])
        out += [[name, action] for action in _subparsers(sub)]
    return out
