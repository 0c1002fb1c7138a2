"""Smoke test of the keystroke-replay benchmark: a tiny slice in every mode, fast backend."""

from __future__ import annotations

import importlib.util
import json

import pytest

from devtools.bench import run_bench
from devtools.bench.cli import default_files
from devtools.bench.replay import DEFAULT_MODES, MODE_SPECS
from devtools.bench.report import ROWS, build_timeline
from devtools.bench.typist import TypistModel

pytestmark = pytest.mark.timeout(120)


async def test_bench_runs_every_mode_and_reports_every_row(tmp_path):
    assert DEFAULT_MODES == ("sidecar", "sidecar-noprefetch", "naive")
    assert MODE_SPECS["sidecar"].prefetch and not MODE_SPECS["sidecar-noprefetch"].prefetch
    typist = TypistModel(
        iki_median_ms=45,
        iki_sigma=0.3,
        line_end_median_ms=300,
        line_end_sigma=0.2,
        long_pause_p=0.05,
        long_pause_min_s=0.4,
        long_pause_max_s=0.6,
    )
    result = await run_bench(
        default_files()[:1],
        keystrokes=60,
        seed=2,
        wrong_rate=0.0,
        out_dir=tmp_path,
        latency={"ttft_ms": 60, "ttft_jitter": 0.3, "tokens_per_s": 400},
        typist=typist,
        grace_s=5.0,
        warmup_s=0.5,
        plot=importlib.util.find_spec("matplotlib") is not None,
    )
    data = json.loads(result.json_path.read_text())
    assert data["table"]["columns"] == list(DEFAULT_MODES)
    keys = [row["key"] for row in data["table"]["rows"]]
    for key, _label in ROWS:
        assert key in keys
    for mode in DEFAULT_MODES:
        raw = data["runs"][mode]
        assert raw["errors"] == [], raw["errors"]
        assert raw["prefetch"] is MODE_SPECS[mode].prefetch
        s = data["summaries"][mode]
        assert raw["files"][0]["planned_keys"] >= 60
        assert 0 < s["keystrokes"] <= raw["files"][0]["planned_keys"]  # accepts skip keys
        assert s["pauses"] > 0
        assert s["upstream_requests"] > 0
        # Per key: every typed key asked once; shown-and-right within shown within asked.
        assert s["keys_asked"] == s["keys_typed"]
        assert 0 <= s["keys_shown_right"] <= s["keys_shown"] <= s["keys_asked"]
        assert (s["keys_shown_p50_ms"] is None) == (s["keys_shown"] == 0)
        # One record per accept, each with the re-request sent right after it.
        assert len(raw["after_accept"]) == s["accepted"]
        sent = {r["id"]: r for r in raw["requests"]}
        for a in raw["after_accept"]:
            assert a["request_id"] in sent and a["window_ms"] is not None
        assert s["accepts_measured"] + s["accepts_at_region_end"] == s["accepted"]
        assert s["accepts_without_suggestion"] == s["accepts_measured"] - s["accept_tts_samples"]
    for mode in ("sidecar", "sidecar-noprefetch"):
        assert data["summaries"][mode]["lsp_unanswered"] == 0
        assert data["summaries"][mode]["accepted"] > 0
    on, off = data["summaries"]["sidecar"], data["summaries"]["sidecar-noprefetch"]
    # Prefetch ran only where it is on, and the server's counters reached the table.
    assert on["prefetch_issued"] > 0 and on["prefetch_tokens_reserved"] > 0
    assert on["prefetch_hit_rate"] == on["prefetch_used"] / on["prefetch_issued"]
    assert off["prefetch_issued"] == 0 and off["prefetch_hit_rate"] is None
    assert on["tokens_vs_noprefetch"] == on["tokens_generated"] - off["tokens_generated"]
    assert off["tokens_vs_noprefetch"] is None
    row = {r["key"]: r for r in data["table"]["rows"]}
    assert row["prefetch_hit_rate"]["display"]["sidecar-noprefetch"] == "-"
    assert row["prefetch_hit_rate"]["display"]["sidecar"].endswith(f"({on['prefetch_used']}/{on['prefetch_issued']})")
    assert row["prefetch_tokens"]["sidecar"]["reserved"] == on["prefetch_tokens_reserved"]
    # The baseline makes one upstream request per keystroke; the sidecar far fewer.
    assert data["summaries"]["naive"]["upstream_per_100_keys"] > 90
    for mode in ("sidecar", "sidecar-noprefetch"):
        assert data["summaries"][mode]["upstream_requests"] < data["summaries"]["naive"]["upstream_requests"]
    for label in (
        "time-to-suggestion at pauses p50 (ms)",
        "prefetch hit rate (used / issued)",
        "time-to-suggestion after an accept p50 (ms)",
        "tokens generated vs no-prefetch",
    ):
        assert label in result.table
    if result.png_path is not None:
        assert result.png_path.stat().st_size > 1000
    # The session timeline: the first file of the first mode, its raw events in the JSON.
    tl = data["timeline"]
    assert tl["mode"] == "sidecar" and tl["file"] == "job_queue.py" and tl["upstream_recorded"] is True
    events = tl["events"]
    assert events == sorted(events, key=lambda e: e["t"]) and all(e["t"] >= 0 for e in events)
    kinds = {e["type"] for e in events}
    assert {"key", "request", "upstream", "suggestion", "pause", "accept"} <= kinds, kinds
    raw = data["runs"]["sidecar"]
    assert tl["counts"]["key"] == raw["keys_typed"] and tl["counts"]["accept"] == raw["accepts"]
    assert tl["counts"]["request"] == raw["lsp"]["inline_sent"]
    assert tl["counts"]["upstream"] == on["upstream_requests"]  # one file: every stream is in its session
    assert tl["counts"].get("abort", 0) == on["upstream_aborted"]
    for e in events:
        if e["type"] == "upstream":
            assert e["end_t"] is not None and e["end_t"] >= e["t"] and e["outcome"] in ("completed", "aborted")
        if e["type"] == "suggestion":
            assert e["text"]
        if e["type"] == "accept":
            assert e["text"] and e["chars"] == len(e["text"])
    # Aborted streams are marked at their disconnect (the naive run always has some).
    naive_tl = build_timeline(data["runs"]["naive"], 0)
    assert naive_tl["counts"]["upstream"] == data["summaries"]["naive"]["upstream_requests"]
    assert naive_tl["counts"].get("abort", 0) == data["summaries"]["naive"]["upstream_aborted"]
    if importlib.util.find_spec("matplotlib") is not None:
        assert result.timeline_path == tmp_path / "timeline.png"
        assert result.timeline_path.stat().st_size > 1000
        assert (tmp_path / "latency_cdf.png").is_file()
