"""``sidecar bench quality`` for real: the engine's port read from a process's command
line, the command line's refusals, and one small real run against the embedded engine.
Hole making and scoring are tests/unit/test_bench_quality.py."""

from __future__ import annotations

import json
import sys

import pytest

from sidecar.tools.bench.quality import engine_port

from conftest import run_module, sidecar_env


def test_engine_port_reads_the_command_line():
    import subprocess

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "--port", "4321"])
    try:
        assert engine_port(proc.pid) == 4321
    finally:
        proc.kill()
        proc.wait()


# -- command line -------------------------------------------------------------------------------

async def test_bad_arguments_exit_2(tmp_path):
    env = sidecar_env(tmp_path)
    prose = tmp_path / "notes.py"
    prose.write_text("# just\n# comments\n# here\n# and\n# more\n")
    for args, says in [
        (["--systems", "sidecar,bogus"], "--systems"),
        (["--files", str(tmp_path / "missing.py")], "no such file"),
        (["--files", str(prose)], "no holes could be made"),
        (["--model", str(tmp_path / "missing.gguf")], "no such file"),
        (["--holes-per-kind", "0"], "at least 1"),
        (["--set", "no-equals-sign"], "KEY=VALUE"),
    ]:
        code, out, err = await run_module(env, "sidecar", "bench", "quality", *args, "--out", str(tmp_path / "o"))
        assert code == 2, (args, out, err)
        assert says in err, (args, err)


SMALL_PY = '''"""Small helpers for the end-to-end run of the quality benchmark."""

import os


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\\n") for line in f]


def count_words(lines):
    total = 0
    for line in lines:
        total += len(line.split())
    return total


def main(path):
    lines = read_lines(path)
    print(len(lines), count_words(lines))
'''


@pytest.mark.timeout(240)
async def test_real_run_and_bad_model(tmp_path):
    """One small real run (the shipped model, sidecar and naive columns, one hole per
    kind) writes JSON with both columns and answers; a model file that is not a GGUF
    makes the bench say it saw nothing and exit 1."""
    env = sidecar_env(tmp_path)
    src = tmp_path / "small.py"
    src.write_text(SMALL_PY)
    out = tmp_path / "out"
    code, stdout, stderr = await run_module(
        env, "sidecar", "bench", "quality", "--files", str(src), "--holes-per-kind", "1", "--max-tokens", "24",
        "--systems", "sidecar,naive", "--set", "request_timeout_ms=30000", "--out", str(out), timeout=200)
    assert code == 0, stdout + stderr
    data = json.loads((out / "quality.json").read_text())
    assert set(data["summaries"]) == {"sidecar", "naive"}
    assert data["setup"]["sidecar_settings"]["request_timeout_ms"] == 30000  # a loaded CI machine: no 8 s cut
    for name in ("sidecar", "naive"):
        s = data["summaries"][name]
        assert s["holes"] == 4
        assert s["answered"] > 0, (name, data["columns"][name]["records"])
        assert s["latency_p50_ms"] is not None
    assert data["columns"]["naive"]["engine"]["pid"] == data["columns"]["sidecar"]["engine"]["pid"]
    assert "exact first line %" in stdout and str(out / "quality.json") in stdout

    bad = tmp_path / "bad.gguf"
    bad.write_text("not a model\n")
    code, stdout, stderr = await run_module(
        env, "sidecar", "bench", "quality", "--files", str(src), "--holes-per-kind", "1", "--systems", "sidecar",
        "--no-default-model", "--model", str(bad), "--out", str(tmp_path / "bad-out"), timeout=120)
    assert code == 1, stdout + stderr
    assert "answered nothing" in stderr and "GGUF" in stderr, stderr
