"""The team benchmark: a tiny real run (N = 1, 2; both modes) and its figures."""

from __future__ import annotations

import json

import pytest

from devtools.bench.team import TeamOptions, run_team
from devtools.bench.typist import TypistModel
from devtools.simulator import EngineConfig

pytestmark = pytest.mark.timeout(150)

FIELDS = (
    "developers",
    "mode",
    "pauses",
    "pauses_shown",
    "tts_p50_ms",
    "tts_p90_ms",
    "tts_p90_km_ms",
    "tts_p90_km_above_ms",
    "tts_p90_all_ms",
    "valid_share",
    "correct_share",
    "engine_utilisation",
    "queue_p50_ms",
    "queue_p90_ms",
    "prefill_tokens",
    "generated_tokens",
    "prefill_per_accepted_char",
    "generated_per_accepted_char",
    "rate_limited_429",
    "cpu",
    "key_lateness_p90_ms",
    "per_developer",
    "engine",
)


async def test_a_tiny_team_run_writes_every_figure(tmp_path):
    # Quick typing with pauses on most lines, so ~40 keys give several pauses each.
    typist = TypistModel(
        iki_median_ms=80,
        iki_sigma=0.3,
        line_end_median_ms=700,
        line_end_sigma=0.2,
        long_pause_p=0.08,
        long_pause_min_s=1.0,
        long_pause_max_s=1.2,
    )
    opts = TeamOptions(
        developers=(1, 2),
        modes=("sidecar", "naive"),
        keystrokes=40,
        seed=1,
        engine=EngineConfig(capacity=4),
        typist=typist,
        grace_s=2.0,
        warmup_s=0.5,
        stagger_s=0.3,
    )
    result = await run_team(opts, tmp_path, plot=False)
    data = json.loads(result.json_path.read_text())
    points = data["points"]
    assert [(p["developers"], p["mode"]) for p in points] == [
        (1, "sidecar"),
        (1, "naive"),
        (2, "sidecar"),
        (2, "naive"),
    ]
    for p in points:
        for key in FIELDS:
            assert key in p, key
        assert p["pauses"] > 0
        assert len(p["per_developer"]) == p["developers"]
        e = p["engine"]
        assert e["config"]["capacity"] == 4
        assert e["requests"] > 0 and e["prefill_tokens"] > 0 and e["generated_tokens"] > 0
        assert e["prompt_tokens"] == e["prefill_tokens"] + e["cached_tokens"]
        assert 0 <= p["engine_utilisation"] <= 1
        assert p["rate_limited_429"] == 0
        assert p["cpu"]["cores"] and "load_max" in p["cpu"] and "bench_process_cores" in p["cpu"]
        assert not [e for e in p["errors"] if "start" in e], p["errors"]
    by = {(p["developers"], p["mode"]): p for p in points}
    # The sidecar shows suggestions at pauses; naive sends far more requests to the engine.
    assert by[(1, "sidecar")]["pauses_shown"] > 0
    assert by[(2, "naive")]["upstream_requests"] > 2 * by[(2, "sidecar")]["upstream_requests"]
    assert set(data["sla"]) == {"sidecar", "naive"}
    assert "CPU cores" in result.table
    assert "p90 all" in result.table
