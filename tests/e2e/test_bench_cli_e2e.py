"""``sidecar bench``'s command line as a real process: the refusal to reach SiliconFlow
without a key, and ``--help``. Nothing here contacts any backend; the in-process checks
are tests/unit/test_bench_cli.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(60)


def _env_without_key() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SILICONFLOW_API_KEY", "SIDECAR_API_KEY")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    return env


@pytest.mark.parametrize("key", [None, "", "   "])
def test_siliconflow_without_a_key_exits_2_with_the_message(tmp_path, key):
    env = _env_without_key()
    if key is not None:
        env["SILICONFLOW_API_KEY"] = key
    out = subprocess.run([sys.executable, "-m", "sidecar.tools.bench", "--backend", "siliconflow", "--out", str(tmp_path)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=50)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "SILICONFLOW_API_KEY" in out.stderr and "refusing to run" in out.stderr
    assert out.stdout == ""
    assert not any(tmp_path.iterdir())  # nothing ran, nothing written


def test_help_documents_the_command():
    out = subprocess.run([sys.executable, "-m", "sidecar.tools.bench", "--help"], cwd=ROOT, env=_env_without_key(),
                         capture_output=True, text=True, timeout=50)
    assert out.returncode == 0
    for needle in ("sidecar bench", "--backend", "siliconflow", "SILICONFLOW_API_KEY", "timeline.png",
                   "latency_cdf.png", "bench.json", "--timeline-mode", "--modes", "--keystrokes"):
        assert needle in out.stdout, needle
