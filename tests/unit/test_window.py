"""The context window as a latency budget (completion/window.py; its samples and cost
model, completion/prompt_cost.py): the rule and its hysteresis (the samples the service
records from real streams: tests/e2e/test_window_e2e.py)."""

from __future__ import annotations

import pytest

from sidecar.completion import window
from sidecar.completion.prompt_cost import common_prefix_len, prompt_text
from sidecar.completion.window import WindowBudget


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


def test_levels():
    assert WindowBudget.levels(1024) == [512, 640, 768, 896, 1024]
    assert WindowBudget.levels(1000) == [512, 640, 768, 896, 1000]
    assert WindowBudget.levels(200) == [200]
    assert WindowBudget.levels(600) == [512, 600]
    assert WindowBudget.suffix_levels(256) == [64, 128, 192, 256]
    assert WindowBudget.suffix_levels(100) == [64, 100]
    assert WindowBudget.suffix_levels(32) == [32]
    assert WindowBudget.suffix_levels(0) == [0]


def test_target_defaults():
    assert window.target_ms(None, local=True) == 300
    assert window.target_ms(None, local=False) == 0
    assert window.target_ms(0, local=True) == 0
    assert window.target_ms(800, local=False) == 800


@pytest.mark.parametrize(
    "base,slope,target,expected",
    [
        # (fixed ms, ms per cl100k token, key target ms) -> (prefix, suffix). The suffix is
        # paid after every key: base + slope * suffix <= target. The prefix is paid at a new
        # place: base + slope * (prefix + suffix) <= 4 * target.
        (50, 4.5, 300, (512, 64)),  # a 2-core CPU: both floors (quality floors)
        # The model measures base 74 (the small prompts' 20 tokens) and 1.18 ms a token:
        # suffix <= 191; prefix <= (1200 - 74) / 1.18 - 128 = 826.
        (50, 1.2, 300, (768, 128)),
        (50, 0.6, 300, (1024, 256)),  # both maxima fit
        (50, 2.5, 300, (512, 64)),  # nothing fits: the floors
        # Base near the target: the prompt still gets half of it (430 ms; cold 1,720 ms,
        # 1,912 predicted for the maximum is within the 15 % hysteresis; 512 without the rule).
        (280, 1.5, 300, (1024, 64)),
        (50, 0.3, 0, (1024, 256)),  # budget off
    ],
)
def test_budget_rule(base, slope, target, expected):
    b = WindowBudget(Clock())
    engine(b, base, slope, small=8, large=4)
    assert b.windows(1024, 256, target) == expected


def test_no_suffix_stays_no_suffix():
    b = WindowBudget(Clock())
    engine(b, 50, 4.5, small=8, large=4)
    assert b.windows(1024, 0, 300) == (512, 0)


def test_no_measurements_keep_the_maxima():
    b = WindowBudget(Clock())
    assert b.windows(1024, 256, 300) == (1024, 256)
    b.observe(20, 1300, 40.0)  # only KV-cache hits: nothing known about the per-token cost
    b.observe(1300, 1300, 900.0)  # one cold prompt is not enough
    assert b.model() is None and b.windows(1024, 256, 300) == (1024, 256)


def test_hysteresis_holds_a_level_for_30_s_and_ignores_small_differences():
    clock = Clock()
    b = WindowBudget(clock)
    engine(b, 50, 4.5, small=8, large=4)
    assert b.windows(1024, 256, 300) == (512, 64)
    # The engine got faster (another process stopped): growing waits for the interval.
    for _ in range(32):
        b.observe(1300, 1300, 50 + 1300 * 0.10)
    for _ in range(5):
        assert b.windows(1024, 256, 300) == (512, 64)
    clock.t += window.MIN_CHANGE_INTERVAL_S
    b.observe(1300, 1300, 50 + 1300 * 0.10)
    assert b.windows(1024, 256, 300) == (1024, 256)
    assert b.changes == 2
    # A cold prompt predicted 10 % over the cold target does not shrink the prefix
    # (that needs more than 15 %); the suffix is 1 % over its target.
    clock.t += 100
    b2 = WindowBudget(clock)
    slope = (300 * window.COLD_STRETCH * 1.10 - 50) / (1024 + 256)
    engine(b2, 50, slope, small=8, large=4)
    assert b2.windows(1024, 256, 300) == (1024, 256) and b2.changes == 0


def test_windows_do_not_move_between_samples():
    b = WindowBudget(Clock())
    engine(b, 50, 1.2, small=8, large=4)
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
    assert (
        prompt_text({"input_extra": [{"filename": "f", "text": "t"}], "input_prefix": "P", "input_suffix": "S"})
        == "f\x00t\x00P\x00S"
    )
    assert prompt_text({"messages": [{"role": "system", "content": "a"}, {"role": "user", "content": "b"}]}) == "a\x00b"


def test_a_prior_sizes_the_first_windows_at_once_and_samples_take_over():
    clock = Clock()
    b = WindowBudget(clock)
    b.set_prior(1.5)  # e.g. the warm-up prompt: 242 ms for 161 tokens
    # 1.5 * S <= 300 -> S <= 200; 1.5 * (P + 192) <= 1200 -> P <= 608: moved at once
    assert b.windows(1024, 256, 300) == (512, 192)
    b.set_prior(-1.0)  # ignored
    assert b.prior_ms_per_token == 1.5
    engine(b, 50, 0.10, small=8, large=4)  # the real engine is faster than the prior said
    clock.t += window.MIN_CHANGE_INTERVAL_S
    assert b.windows(1024, 256, 300) == (1024, 256)
