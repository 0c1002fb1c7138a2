"""Load-aware speculation: prefetch pauses while a shared backend's TTFT says it is
loaded, and comes back when it is idle again (sidecar/completion/load.py). The busy rule
and the windows under load; the real sidecar against the simulator is
tests/e2e/test_load_e2e.py."""

from __future__ import annotations

import pytest

from sidecar.completion.load import BackendLoad

pytestmark = pytest.mark.timeout(120)


def judge(samples):
    b = BackendLoad()
    states = []
    for x in samples:
        b.observe(x)
        states.append(b.busy)
    return states


@pytest.mark.parametrize(
    "samples, busy_at_end",
    [
        ([40] * 30, False),  # idle
        ([40] * 5 + [900] * 6, False),  # 11 samples: too few for a baseline
        ([40] * 20 + [900] * 5, True),  # queueing: 22x the idle TTFT
        ([40] * 20 + [100] * 8, False),  # 2.5x, but only 60 ms more: jitter, not load
        ([400] * 20 + [700] * 8, False),  # 1.75x a slow backend: not busy
        ([400] * 20 + [900] * 8, True),  # 2.25x and 500 ms more
        ([40] * 20 + [900] * 8 + [40] * 5, False),  # idle again once the median falls
        ([40] * 20 + [900] * 8 + [40] * 3, True),  # hysteresis: three fast answers are not enough
    ],
)
def test_busy_rule(samples, busy_at_end):
    assert judge(samples)[-1] is busy_at_end


def test_negative_ttft_is_ignored():
    b = BackendLoad()
    for _ in range(20):
        b.observe(-5)
    assert b.baseline_ms() is None and not b.busy


@pytest.mark.parametrize(
    "given, busy, expected",
    [
        ((1024, 256), False, (1024, 256)),  # idle: unchanged
        ((1024, 256), True, (512, 128)),  # busy: half
        ((384, 96), True, (256, 64)),  # not under the floor
        ((200, 50), True, (200, 50)),  # a window under the floor stays
        ((1024, 0), True, (512, 0)),  # no suffix window
        ((1000, 300), True, (500, 150)),
    ],
)
def test_windows_under_load(given, busy, expected):
    from sidecar.completion.load import windows_under_load

    assert windows_under_load(*given, busy) == expected


def test_the_managed_engine_is_never_busy():
    """Slow answers from our own child engine are our own prompts, not other users' load:
    the windows must not halve (that broke the engine's cached prompt beginning)."""
    from types import SimpleNamespace

    from sidecar.completion.load import LoadTracker

    shared = SimpleNamespace(provider="openai", name="vLLM at x", model="m", engine=None)
    managed = SimpleNamespace(provider="local", name="local engine", model="m", engine=object())
    for target, expected in ((shared, True), (managed, False)):
        tracker = LoadTracker(lambda t=target: t)
        for ttft in [100.0] * 20 + [900.0] * 8:
            tracker.observe(target, ttft)
        assert tracker.busy() is expected
