"""The README's main job, shortened: the demo types into the fixture through a real LSP
client against the real embedded engine, and every pause is answered."""

from __future__ import annotations

import io

import pytest

from conftest import sidecar_env
from sidecar.demo import run_demo

pytestmark = pytest.mark.timeout(240)


async def test_demo_on_embedded_engine(tmp_path):
    out = io.StringIO()
    summary = await run_demo(pauses=3, seed=1, speed=40, env=sidecar_env(tmp_path),
                             json_out=str(tmp_path / "demo.json"), stream=out)
    assert summary["all_answered"], summary["errors"]
    assert summary["answered"] == summary["pauses"] == 3
    assert summary["non_empty"] >= 1
    assert summary["time_to_suggestion_ms"]["count"] == 3
    assert summary["server_latency_ms"]["sidecar_overhead"]["count"] >= 1
    text = out.getvalue()
    assert "time to suggestion" in text and "every request answered: yes" in text
    assert (tmp_path / "demo.json").is_file()
