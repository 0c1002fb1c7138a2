"""The confidence gate's pure parts (completion/gate.py): hole kinds, features, the
first line's log-probabilities, learning direction, and the stored model's format; and
the OpenAI ``logprobs`` shapes read from stream chunks (backends/openai_events.py)."""

from __future__ import annotations

import pytest

from sidecar.backends.openai_events import _logprobs_of
from sidecar.completion import gate
from sidecar.metrics import Metrics


@pytest.mark.parametrize(
    "before, after, kind",
    [
        ("    ", "", "blank_line"),
        ("", "", "blank_line"),
        ("x = fo", "", "mid_word"),
        ("x = foo(", ")", "mid_line"),
        ("x = foo()", "", "end_of_line"),
        ("    total_", "", "mid_word"),
    ],
)
def test_hole_kind(before, after, kind):
    assert gate.hole_kind(before, after) == kind


def test_first_line_logprobs_stop_at_the_first_line_break_after_text():
    toks = [("\n", -0.1), ("    ", -0.2), ("return", -0.3), (" x", -0.4), ("\n", -5.0), ("y", -6.0)]
    assert gate.first_line_logprobs(toks) == [-0.1, -0.2, -0.3, -0.4]
    # A token that ends the line and starts the next keeps the part before the break.
    assert gate.first_line_logprobs([("a", -1.0), ("b\nc", -2.0), ("d", -3.0)]) == [-1.0, -2.0]


def test_features_of_a_multi_line_suggestion():
    f = gate.features(
        "\nfoo(1)\nbar()\nbaz()",
        "end_of_line",
        "cache_sqlite",
        "Python",
        [("\n", -0.5), ("foo(1)", -1.5), ("\n", -9.0)],
        open_stream=True,
    )
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
    unsure = [("x", -3.0)]
    assert not g.admit(gate.features("x", "blank_line", "stream", "python", unsure))
    assert metrics.snapshot()["counters"]["gate.held_back"] == 1


def test_a_suggestion_without_log_probabilities_is_shown_unjudged():
    metrics = Metrics()
    g = gate.Gate(metrics, enabled=True, threshold=1.0)  # a bar nothing judged can pass
    assert g.admit(gate.features("x", "blank_line", "stream", "python"))
    c = metrics.snapshot()["counters"]
    assert c["gate.unjudged"] == 1 and not c.get("gate.held_back") and not g.recent
    assert not g.admit(gate.features("x", "blank_line", "stream", "python", [("x", -0.1)]))
    # a stored suggestion is judged on what it has, so one held back is not shown from the cache
    assert not g.admit(gate.features("x", "blank_line", "cache", "python"))


def test_logprobs_shapes_from_stream_chunks():
    out: list = []
    _logprobs_of({"logprobs": {"tokens": ["a", "b"], "token_logprobs": [-0.1, -0.2]}}, out)
    _logprobs_of({"logprobs": {"content": [{"token": "c", "logprob": -0.3}, {"token": 5, "logprob": -1}]}}, out)
    _logprobs_of({"logprobs": None}, out)
    _logprobs_of({"logprobs": {"tokens": ["d"], "token_logprobs": [True]}}, out)
    assert out == [("a", -0.1), ("b", -0.2), ("c", -0.3)]


def test_recent_decisions_keep_where_features_estimate_and_verdict():
    g = gate.Gate(Metrics(), enabled=True, threshold=0.5)
    sure = gate.features("return total", "end_of_line", "stream", "python", [("return", -0.01), (" total", -0.02)])
    assert g.admit(sure, "file:///a.py:3:4")
    d = g.summary()["recent"][-1]
    assert d["where"] == "file:///a.py:3:4" and d["kind"] == "end_of_line" and d["shown"] is True
    assert d["mean_logprob"] == pytest.approx(-0.015) and d["min_logprob"] == pytest.approx(-0.02)
    assert 0.5 <= d["p_accept"] <= 1
    g.threshold = 1.0
    assert not g.admit(sure, "file:///a.py:9:0")
    assert g.summary()["recent"][-1]["shown"] is False
    for i in range(gate.RECENT + 5):
        g.admit(sure, f"file:///a.py:{i}:0")
    assert len(g.summary()["recent"]) == gate.RECENT


def test_default_weights_hold_back_an_unsure_blank_line_suggestion_and_keep_a_sure_one():
    # The log-probability slopes at blank lines are what the benchmark fit found to
    # separate right from wrong there (docs/benchmarks.md, "Confidence gate").
    m = gate.GateModel()
    text = "count += 1"
    sure = gate.features(text, "blank_line", "stream", "go", [("count", -0.05), (" +=", -0.02), (" 1", -0.1)])
    unsure = gate.features(text, "blank_line", "stream", "go", [("count", -2.5), (" +=", -0.9), (" 1", -1.8)])
    assert m.p_accept(sure) >= gate.DEFAULT_THRESHOLD > m.p_accept(unsure)


def test_gate_fit_reads_the_sidecars_decisions_and_leaves_languages_unfitted():
    from devtools.bench import gate_fit

    def record(file, kind, lp, right):
        d = {
            "where": "x",
            "kind": kind,
            "origin": "stream",
            "language": "python",
            "first_line_chars": 12,
            "more_lines": 0,
            "open": False,
            "mean_logprob": lp,
            "min_logprob": lp * 2,
            "p_accept": 0.5,
            "shown": True,
        }
        return {
            "hole": f"q:{file}:1:1",
            "kind": kind,
            "first": "x = f(y)",
            "final": "x = f(y)",
            "shown": "x = f(y)",
            "gate": d,
            "score": {"accepted_chars": 8 if right else 0, "exact": right},
        }

    recs = [record(f, "blank_line", lp, lp > -1) for f in ("a.py", "b.py") for lp in (-0.05, -0.2, -1.5, -2.5) * 5]
    exs = gate_fit.examples({"columns": {"sidecar": {"records": recs}}}, "sidecar")
    assert len(exs) == len(recs) and all("bare" in e for e in exs)
    f_sure = exs[0]["x"][gate.FEATURE_NAMES.index("mean_logprob@blank_line")]
    assert f_sure == pytest.approx(-0.05) and exs[0]["bare"][gate.FEATURE_NAMES.index("has_logprobs")] == 0.0
    w = gate_fit.fit(exs + [dict(e, x=e["bare"]) for e in exs], epochs=300, lr=0.5)
    assert w[gate.FEATURE_NAMES.index("mean_logprob@blank_line")] > 0  # surer is righter here
    assert all(w[i] == 0.0 for i in gate_fit.FROZEN)
    t = gate_fit.choose_threshold(exs, w, 5.0)
    on = gate_fit.row(exs, w, t)
    assert on["shown_and_wrong"] < gate_fit.row(exs, None, t)["shown_and_wrong"]
