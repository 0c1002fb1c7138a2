"""The confidence gate's pure parts (completion/gate.py): hole kinds, features, the
first line's log-probabilities, learning direction, and the stored model's format; and
the OpenAI ``logprobs`` shapes read from stream chunks (backends/openai_events.py)."""

from __future__ import annotations

import pytest

from sidecar.backends.openai_events import _logprobs_of
from sidecar.completion import gate
from sidecar.metrics import Metrics


@pytest.mark.parametrize("before, after, kind", [
    ("    ", "", "blank_line"), ("", "", "blank_line"), ("x = fo", "", "mid_word"),
    ("x = foo(", ")", "mid_line"), ("x = foo()", "", "end_of_line"), ("    total_", "", "mid_word"),
])
def test_hole_kind(before, after, kind):
    assert gate.hole_kind(before, after) == kind


def test_first_line_logprobs_stop_at_the_first_line_break_after_text():
    toks = [("\n", -0.1), ("    ", -0.2), ("return", -0.3), (" x", -0.4), ("\n", -5.0), ("y", -6.0)]
    assert gate.first_line_logprobs(toks) == [-0.1, -0.2, -0.3, -0.4]
    # A token that ends the line and starts the next keeps the part before the break.
    assert gate.first_line_logprobs([("a", -1.0), ("b\nc", -2.0), ("d", -3.0)]) == [-1.0, -2.0]


def test_features_of_a_multi_line_suggestion():
    f = gate.features("\nfoo(1)\nbar()\nbaz()", "end_of_line", "cache_sqlite", "Python",
                      [("\n", -0.5), ("foo(1)", -1.5), ("\n", -9.0)], open_stream=True)
    assert (f.first_line_chars, f.more_lines, f.origin, f.language, f.open) == (6, 2, "stored", "python", True)
    assert f.mean_logprob == pytest.approx(-1.0) and f.min_logprob == -1.5
    assert len(f.vector()) == len(gate.FEATURE_NAMES) == len(gate.DEFAULT_WEIGHTS)
    none = gate.features("x", "mid_word", "stream", "cobol")
    assert none.mean_logprob is None and none.vector()[gate.FEATURE_NAMES.index("lang=other")] == 1.0


def test_rejects_lower_and_accepts_raise_the_estimate_mostly_for_that_kind():
    m = gate.GateModel()
    blank = gate.features("x = 1", "blank_line", "stream", "python")
    word = gate.features("x = 1", "mid_word", "stream", "python")
    p_blank, p_word = m.p_accept(blank), m.p_accept(word)
    for _ in range(10):
        m.learn(blank, False)
    assert m.p_accept(blank) < p_blank
    assert p_blank - m.p_accept(blank) > p_word - m.p_accept(word) >= 0
    low = m.p_accept(blank)
    for _ in range(10):
        m.learn(blank, True)
    assert m.p_accept(blank) > low


def test_stored_model_round_trip_and_other_formats_are_ignored():
    m = gate.GateModel()
    m.learn(gate.features("x", "mid_word", "stream", "go"), True)
    back = gate.GateModel.from_json(m.to_json())
    assert back is not None and back.weights == m.weights and back.updates == 1
    assert gate.GateModel.from_json('{"version": 1, "weights": [1]}') is None
    assert gate.GateModel.from_json("not json") is None


def test_a_disabled_gate_admits_everything_and_counts_nothing():
    metrics = Metrics()
    g = gate.Gate(metrics, enabled=False, threshold=1.0)
    assert g.admit(gate.features("x", "blank_line", "stream", "python"))
    assert not metrics.snapshot()["counters"].get("gate.held_back")
    g.enabled = True
    assert not g.admit(gate.features("x", "blank_line", "stream", "python"))
    assert metrics.snapshot()["counters"]["gate.held_back"] == 1


def test_logprobs_shapes_from_stream_chunks():
    out: list = []
    _logprobs_of({"logprobs": {"tokens": ["a", "b"], "token_logprobs": [-0.1, -0.2]}}, out)
    _logprobs_of({"logprobs": {"content": [{"token": "c", "logprob": -0.3}, {"token": 5, "logprob": -1}]}}, out)
    _logprobs_of({"logprobs": None}, out)
    _logprobs_of({"logprobs": {"tokens": ["d"], "token_logprobs": [True]}}, out)
    assert out == [("a", -0.1), ("b", -0.2), ("c", -0.3)]
