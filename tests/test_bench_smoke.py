"""Smoke test of the keystroke-replay benchmark: a tiny slice in both modes, fast backend."""

from __future__ import annotations

import importlib.util
import json

import pytest

from sidecar.bench import run_bench
from sidecar.bench.cli import default_files
from sidecar.bench.report import ROWS
from sidecar.bench.typist import TypistModel

pytestmark = pytest.mark.timeout(120)


async def test_bench_runs_both_modes_and_reports_every_row(tmp_path):
    typist = TypistModel(iki_median_ms=45, iki_sigma=0.3, line_end_median_ms=300, line_end_sigma=0.2,
                         long_pause_p=0.05, long_pause_min_s=0.4, long_pause_max_s=0.6)
    result = await run_bench(
        default_files()[:1], keystrokes=40, seed=1, modes=("sidecar", "naive"), out_dir=tmp_path,
        latency={"ttft_ms": 60, "ttft_jitter": 0.3, "tokens_per_s": 400},
        typist=typist, grace_s=5.0, warmup_s=0.5,
        plot=importlib.util.find_spec("matplotlib") is not None,
    )
    data = json.loads(result.json_path.read_text())
    assert data["table"]["columns"] == ["sidecar", "naive"]
    keys = [row["key"] for row in data["table"]["rows"]]
    for key, _label in ROWS:
        assert key in keys
    for mode in ("sidecar", "naive"):
        raw = data["runs"][mode]
        assert raw["errors"] == [], raw["errors"]
        s = data["summaries"][mode]
        assert raw["files"][0]["planned_keys"] >= 40
        assert 0 < s["keystrokes"] <= raw["files"][0]["planned_keys"]  # accepts skip keys
        assert s["pauses"] > 0
        assert s["upstream_requests"] > 0
    assert data["summaries"]["sidecar"]["lsp_unanswered"] == 0
    # The baseline makes one upstream request per keystroke; the sidecar far fewer.
    assert data["summaries"]["naive"]["upstream_per_100_keys"] > 90
    assert data["summaries"]["sidecar"]["upstream_requests"] < data["summaries"]["naive"]["upstream_requests"]
    assert "time-to-suggestion at pauses p50 (ms)" in result.table
    if result.png_path is not None:
        assert result.png_path.stat().st_size > 1000


def test_plan_is_deterministic_and_oracle_finds_the_cursor():
    from sidecar.bench.truth import Oracle, TrueFile
    from sidecar.bench.typist import plan_file

    path = default_files()[1]
    text = path.read_text()
    a = plan_file(path, text, "typescript", 120, seed=3)
    b = plan_file(path, text, "typescript", 120, seed=3)
    assert a == b and len(a.keys) >= 120
    assert "".join(text[k.start:k.end] for k in a.keys) == text[a.start:a.end]
    assert text.startswith("\n", a.end)  # the document after the cursor starts with a line break
    oracle = Oracle([TrueFile(a.name, text, a.start, a.end)], seed=3, wrong_rate=0.0)
    cursor = a.keys[40].start
    prompt = a.document_at(cursor)[:cursor][-600:]
    assert oracle.locate(prompt) == (oracle.files[0], cursor)
    assert text[cursor:].startswith(oracle.answer(prompt))
    assert Oracle(oracle.files, seed=3, wrong_rate=1.0).answer(prompt) != oracle.answer(prompt) or not any(
        c.isalpha() for c in oracle.answer(prompt)
    )
