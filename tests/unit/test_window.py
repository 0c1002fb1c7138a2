"""The context window as a latency budget (completion/window.py): the rule and its
hysteresis (the samples the service records from real streams:
tests/e2e/test_window_e2e.py)."""

from __future__ import annotations

import pytest

from sidecar.completion import window
from sidecar.completion.window import WindowBudget, common_prefix_len, prompt_text


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def engine(budget: WindowBudget, base_ms: float, ms_per_token: float, *, small=4, large=4, total=1300) -> None:
    """Feed samples of an engine with a fixed cost and a per-token cost: ``small``
    KV-cache hits (20 new tokens) and ``large`` cold prompts of ``total`` tokens."""
    for _ in range(small):
        budget.observe(20, total, base_ms + 20 * ms_per_token)
    for _ in range(large):
        budget.observe(total, total, base_ms + total * ms_per_token)


def test_levels_and_suffix_share():
    assert WindowBudget.levels(1024) == [256, 384, 512, 640, 768, 896, 1024]
    assert WindowBudget.levels(1000) == [256, 384, 512, 640, 768, 896, 1000]
    assert WindowBudget.levels(200) == [200]
    assert WindowBudget.levels(300) == [256, 300]
    assert WindowBudget.suffix_for(256, 1024, 256) == 64
    assert WindowBudget.suffix_for(1024, 1024, 256) == 256
    assert WindowBudget.suffix_for(384, 1024, 0) == 0


def test_target_defaults():
    assert window.target_ms(None, local=True) == 300
    assert window.target_ms(None, local=False) == 0
    assert window.target_ms(0, local=True) == 0
    assert window.target_ms(800, local=False) == 800


@pytest.mark.parametrize("base,slope,target,expected", [
    # (fixed ms, ms per cl100k token, target ms) -> prefix window. Predicted cold TTFT
    # is base + slope * 1.25 * prefix (the suffix is a quarter of the prefix).
    (50, 0.60, 300, 256),    # slow CPU engine: 50 + 0.75 * P <= 300 -> P <= 333
    (50, 0.30, 300, 640),    # 50 + 0.375 * P <= 300 -> P <= 666
    (50, 0.10, 300, 1024),   # fast: the maximum already fits (178 ms)
    (50, 2.00, 300, 256),    # nothing fits: the floor
    (280, 0.20, 300, 512),   # base near the target: the prompt still gets half of it (150 ms)
    (50, 0.30, 0, 1024),     # budget off
])
def test_budget_rule(base, slope, target, expected):
    b = WindowBudget(Clock())
    engine(b, base, slope, small=8, large=4)  # a third reused: no stretch
    prefix, suffix = b.windows(1024, 256, target)
    assert prefix == expected and suffix == WindowBudget.suffix_for(expected, 1024, 256)


def test_no_measurements_keep_the_maxima():
    b = WindowBudget(Clock())
    assert b.windows(1024, 256, 300) == (1024, 256)
    b.observe(20, 1300, 40.0)  # only KV-cache hits: nothing known about the per-token cost
    b.observe(1300, 1300, 900.0)  # one cold prompt is not enough
    assert b.model() is None and b.windows(1024, 256, 300) == (1024, 256)


def test_kv_cache_reuse_doubles_the_target():
    b = WindowBudget(Clock())
    engine(b, 50, 0.30, small=24, large=4)  # 6 of 7 prompts reused their beginning
    assert b.reuse_share() >= window.REUSE_SHARE
    assert b.windows(1024, 256, 300) == (1024, 256)  # 50 + 0.375 * 1024 = 434 <= 600


def test_hysteresis_holds_a_level_for_30_s_and_ignores_small_differences():
    clock = Clock()
    b = WindowBudget(clock)
    engine(b, 50, 0.60, small=8, large=4)
    assert b.windows(1024, 256, 300)[0] == 256
    # The engine got faster (another process stopped): growing waits for the interval.
    for _ in range(32):
        b.observe(1300, 1300, 50 + 1300 * 0.10)
    for _ in range(5):
        assert b.windows(1024, 256, 300)[0] == 256
    clock.t += window.MIN_CHANGE_INTERVAL_S
    b.observe(1300, 1300, 50 + 1300 * 0.10)
    assert b.windows(1024, 256, 300)[0] == 1024
    assert b.changes == 2
    # A prediction 10 % over the target does not shrink (needs more than 15 %).
    clock.t += 100
    b2 = WindowBudget(clock)
    slope = (300 * 1.10 - 50) / (1024 * 1.25)
    engine(b2, 50, slope, small=8, large=4)
    assert b2.windows(1024, 256, 300)[0] == 1024 and b2.changes == 0


def test_windows_do_not_move_between_samples():
    b = WindowBudget(Clock())
    engine(b, 50, 0.30, small=8, large=4)
    first = b.windows(1024, 256, 300)
    assert all(b.windows(1024, 256, 300) == first for _ in range(50))
    assert b.changes == 1


def test_queued_outliers_do_not_move_the_model():
    b = WindowBudget(Clock())
    engine(b, 50, 0.10, small=8, large=6)
    b.observe(1300, 1300, 5000.0)  # waited behind a prefetch on a one-slot engine
    b.observe(1300, 1300, 4000.0)
    assert b.windows(1024, 256, 300) == (1024, 256)


def test_new_text_is_what_follows_the_shared_beginning():
    b = WindowBudget()
    assert b.new_text("abcdef") == "abcdef"
    assert b.new_text("abcdXY") == "XY"
    assert b.new_text("zzz") == "zzz"
    assert common_prefix_len("a" * 5000 + "b", "a" * 5000 + "c") == 5000
    assert common_prefix_len("abc", "abc") == 3 and common_prefix_len("", "x") == 0


def test_prompt_text_covers_every_body_shape():
    assert prompt_text({"prompt": "P", "suffix": "S"}) == "P\x00S"
    assert prompt_text({"input_extra": [{"filename": "f", "text": "t"}], "input_prefix": "P", "input_suffix": "S"}) == "f\x00t\x00P\x00S"
    assert prompt_text({"messages": [{"role": "system", "content": "a"}, {"role": "user", "content": "b"}]}) == "a\x00b"


def test_a_prior_sizes_the_first_windows_at_once_and_samples_take_over():
    clock = Clock()
    b = WindowBudget(clock)
    b.set_prior(0.30)  # e.g. the warm-up prompt: 48 ms for 161 tokens
    assert b.windows(1024, 256, 300) == (768, 192)  # 0.375 * P <= 300 -> P <= 800: moved at once
    b.set_prior(-1.0)  # ignored
    assert b.prior_ms_per_token == 0.30
    engine(b, 50, 0.10, small=8, large=4)  # the real engine is faster than the prior said
    clock.t += window.MIN_CHANGE_INTERVAL_S
    assert b.windows(1024, 256, 300) == (1024, 256)
