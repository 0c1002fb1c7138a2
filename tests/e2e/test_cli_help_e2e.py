"""`python -m sidecar [COMMAND] --help` as a real process prints plain text and exits 0
(every command and `model` action in process: tests/unit/test_cli_help.py; the markup
pattern: tests/support/cli_help.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.cli_help import every_command, markup_in

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("argv", [c for c in every_command() if len(c) < 2], ids=lambda a: " ".join(a) or "sidecar")
def test_help_as_a_process_is_plain_text(argv: list[str]):
    env = {**os.environ, "COLUMNS": "100"}
    r = subprocess.run(
        [sys.executable, "-m", "sidecar", *argv, "--help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: sidecar") and not r.stderr, (r.stdout[:200], r.stderr)
    assert not markup_in(r.stdout), markup_in(r.stdout)
