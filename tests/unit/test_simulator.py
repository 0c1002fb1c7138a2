"""The simulated SiliconFlow/OpenAI backend's data: error bodies, the latency model and
faults (the backend through a real HTTP client: tests/e2e/test_simulator_e2e.py)."""

from __future__ import annotations

import pytest

from devtools.simulator import SILICONFLOW_ERRORS, Fault, LatencyModel


def test_siliconflow_bodies_match_documented_facts():
    assert SILICONFLOW_ERRORS["bad_key"] == (401, "Invalid token")
    assert SILICONFLOW_ERRORS["model_not_found"][1]["code"] == 20012
    assert SILICONFLOW_ERRORS["overloaded"] == (
        503,
        {"code": 50505, "message": "Model service overloaded. Please try again later.", "data": None},
    )
    assert "RPM" in SILICONFLOW_ERRORS["rate_limit_rpm"][1]["message"]
    assert "TPM" in SILICONFLOW_ERRORS["rate_limit_tpm"][1]["message"]
    with pytest.raises(ValueError):
        Fault.siliconflow("nope")


def test_latency_model_sampling():
    fixed = LatencyModel(ttft_ms=250, ttft_jitter=0.0, tokens_per_s=40)
    assert fixed.sample_ttft_s() == 0.25
    assert fixed.token_interval_s() == 0.025
    a = LatencyModel(ttft_ms=100, ttft_jitter=0.5, seed=7)
    b = LatencyModel(ttft_ms=100, ttft_jitter=0.5, seed=7)
    draws = [a.sample_ttft_s() for _ in range(2000)]
    assert draws[:5] == [b.sample_ttft_s() for _ in range(5)]
    median = sorted(draws)[len(draws) // 2]
    assert 0.09 < median < 0.11 and max(draws) > 0.2
    assert LatencyModel.from_dict({"ttft_ms": 5}, base=fixed).tokens_per_s == 40
    for bad in ({"ttft_ms": -1}, {"tokens_per_s": 0}, {"ttft_jitter": -0.1}):
        with pytest.raises(ValueError):
            LatencyModel(**bad)
    with pytest.raises(ValueError):
        LatencyModel.from_dict({"speed": 3})


def test_fault_dict_round_trip_and_validation():
    for fault in (
        Fault.stall(3, keepalive_s=0.5),
        Fault.cut(1),
        Fault.malformed(0).on("/v1/chat/completions"),
        Fault.siliconflow("bad_key"),
    ):
        assert Fault.from_dict(fault.to_dict()) == fault
    assert Fault.from_dict({"siliconflow": "overloaded", "paths": ["/v1/models"]}).applies_to("/v1/models")
    for bad in ({"kind": "cut", "after_tokens": -1}, {"kind": "status"}, {"nope": 1}, {}):
        with pytest.raises(ValueError):
            Fault.from_dict(bad)
