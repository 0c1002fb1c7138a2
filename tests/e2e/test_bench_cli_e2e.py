"""``python -m devtools.bench``'s command line as a real process: the refusal to reach SiliconFlow
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
    out = subprocess.run(
        [sys.executable, "-m", "devtools.bench", "--backend", "siliconflow", "--out", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "SILICONFLOW_API_KEY" in out.stderr and "refusing to run" in out.stderr
    assert out.stdout == ""
    assert not any(tmp_path.iterdir())  # nothing ran, nothing written


def test_help_documents_the_command():
    out = subprocess.run(
        [sys.executable, "-m", "devtools.bench", "--help"],
        cwd=ROOT,
        env=_env_without_key(),
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert out.returncode == 0
    for needle in (
        "python -m devtools.bench",
        "--backend",
        "siliconflow",
        "SILICONFLOW_API_KEY",
        "timeline.png",
        "latency_cdf.png",
        "bench.json",
        "--timeline-mode",
        "--modes",
        "--keystrokes",
    ):
        assert needle in out.stdout, needle


@pytest.mark.timeout(240)
def test_local_backend_types_against_the_managed_engine(tmp_path):
    """``--backend local``: the typist types into a real sidecar whose managed engine runs
    the shipped SmolLM2 (no simulator, no key); the run reports the engine's model and
    its answers, and a simulator-only knob is refused."""
    env = {k: v for k, v in _env_without_key().items() if not k.startswith("SIDECAR_")}
    env.update(
        SIDECAR_LOCAL_MODEL="smollm2-135m",
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        XDG_STATE_HOME=str(tmp_path / "state"),
    )
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "devtools.bench",
            "--backend",
            "local",
            "--ttft-ms",
            "100",
            "--out",
            str(tmp_path / "bad"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert bad.returncode == 2 and "--ttft-ms" in bad.stderr
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "devtools.bench",
            "--backend",
            "local",
            "--modes",
            "sidecar",
            "--keystrokes",
            "40",
            "--files",
            str(ROOT / "fixtures/bench/job_queue.py"),
            "--no-plot",
            "--out",
            str(tmp_path / "out"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=220,
    )
    assert out.returncode == 0, (out.stdout[-2000:], out.stderr[-2000:])
    assert "local engine, smollm2-135m" in out.stdout
    import json

    data = json.loads((tmp_path / "out" / "bench.json").read_text())
    assert data["setup"]["backend"] == "local" and data["setup"]["real_backend"]["model"] == "smollm2-135m"
    rows = {r["key"]: r["sidecar"] for r in data["table"]["rows"]}
    assert rows["lsp_unanswered"] == 0
    summary = data["summaries"]["sidecar"] if "summaries" in data else {}
    prefill = rows["prefill_tokens"]  # per upstream request (closed ones included), from sidecar.stats
    assert summary.get("upstream_requests", 1) >= 1, summary
    assert prefill is not None and prefill["count"] >= 1 and 0 <= prefill["p50"] <= prefill["p90"], (prefill, summary)
