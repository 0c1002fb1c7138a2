"""Strict JSON, stored gate state and settled settings layers, in process (issue 33,
items 3 and 5; tests/e2e/test_state_faults_e2e.py and test_config_layers_e2e.py run
them over real stdio)."""

from __future__ import annotations

import json
import logging
import math

import pytest

from sidecar import config
from sidecar.completion import gate as G
from sidecar.observability import statsfile
from sidecar.observability.logs import JsonLinesFormatter
from sidecar.observability.strictjson import dumps, finite, strict_bytes


def strict(text):
    def bad(token):
        raise ValueError(token)

    return json.loads(text, parse_constant=bad)


NAN, INF = float("nan"), float("inf")


def test_finite_replaces_non_finite_floats_and_keeps_clean_objects():
    clean = {"a": [1, 2.5, {"b": "NaN"}]}
    assert finite(clean) is clean
    assert finite({"a": [NAN, (INF, -INF)], "b": {"c": 1.0}}) == {"a": [None, [None, None]], "b": {"c": 1.0}}
    assert strict(dumps({"x": NAN, "y": [INF]})) == {"x": None, "y": [None]}
    assert strict(dumps(object(), default=lambda o: NAN)) is None


def test_strict_bytes_rewrites_only_bare_constants():
    body = json.dumps({"result": {"p": NAN, "s": "NaN and Infinity"}}).encode()
    assert strict(strict_bytes(body)) == {"result": {"p": None, "s": "NaN and Infinity"}}
    text_only = b'{"s": "NaN"}'
    assert strict_bytes(text_only) is text_only
    assert strict_bytes(b"not json NaN") == b"not json NaN"  # never raises


def test_log_records_and_the_stats_file_are_strict(tmp_path, monkeypatch):
    rec = logging.LogRecord("sidecar.x", logging.WARNING, __file__, 1, "p=%s", (NAN,), None)
    rec.fields = {"ratio": NAN, "ok": 1.5}
    out = strict(JsonLinesFormatter().format(rec))
    assert out["ratio"] is None and out["ok"] == 1.5 and out["msg"] == "p=nan"
    monkeypatch.setattr(statsfile, "stats_dir", lambda: tmp_path)
    statsfile.write(42, {"gate": {"p_accept": {"blank_line": NAN}}, "rate": INF})
    assert strict((tmp_path / "42.json").read_text()) == {"gate": {"p_accept": {"blank_line": None}}, "rate": None}


def _row(weights, **over):
    d = {"version": G.STATE_VERSION, "features": list(G.FEATURE_NAMES), "weights": list(weights), "updates": 3}
    d.update(over)
    return json.dumps(d)


@pytest.mark.parametrize(
    "text, why",
    [
        (_row([NAN, *G.DEFAULT_WEIGHTS[1:]]), "not a finite number"),
        (_row([*G.DEFAULT_WEIGHTS[:-1], -INF]), "not a finite number"),
        (_row(G.DEFAULT_WEIGHTS[:-2]), "weights for"),
        (_row([*G.DEFAULT_WEIGHTS[:-1], 1e9]), "out of range"),
        (_row([True, *G.DEFAULT_WEIGHTS[1:]]), "not a number"),
        (_row(G.DEFAULT_WEIGHTS).replace('"weights": [', '"weights": {"bias": 1}, "w": ['), "weights for"),
        (_row(G.DEFAULT_WEIGHTS, updates=-1), "updates"),
        (_row(G.DEFAULT_WEIGHTS, updates=1.5), "updates"),
        ("[1, 2]", "not a JSON object"),
        ('"gate"', "not a JSON object"),
        ("{", "not JSON"),
    ],
)
def test_a_broken_stored_model_is_refused_with_a_reason(text, why):
    m, reason = G.GateModel.parse(text)
    assert m is None and why in reason
    assert G.GateModel.from_json(text) is None


def test_a_good_or_other_version_row():
    m, why = G.GateModel.parse(_row(G.DEFAULT_WEIGHTS))
    assert why is None and m.weights == list(G.DEFAULT_WEIGHTS) and m.updates == 3
    assert G.GateModel.parse(_row(G.DEFAULT_WEIGHTS, version=G.STATE_VERSION - 1)) == (None, None)
    assert strict(m.to_json())["weights"] == list(G.DEFAULT_WEIGHTS)


def test_learning_never_stores_a_non_finite_weight():
    m = G.GateModel()
    f = G.Features("blank_line", "stream", "python", 30, 0, mean_logprob=-1.0, min_logprob=-2.0)
    before = list(m.weights)
    m.learn(f, True, lr=1e308)  # a step that would overflow
    assert m.weights == before and m.updates == 0
    assert all(math.isfinite(w) for w in m.weights)


def test_settle_drops_only_the_contradicting_pair_from_the_lowest_layer():
    errors: list[str] = []
    file = {"debounce_min_ms": 300, "debounce_max_ms": 100, "max_tokens": 17}
    env = {"base_url": "http://127.0.0.1:9/v1", "api_key": "k"}
    out = config.settle([file, env], errors, names=("config file c.toml", "the environment"))
    assert out == [{"max_tokens": 17}, env]
    assert len(errors) == 1 and "debounce_min_ms and debounce_max_ms from config file c.toml" in errors[0]
    s = config.build(*out)
    assert s.cloud_provider == "openai" and s.max_tokens == 17


def test_settle_keeps_the_environment_over_the_file():
    errors: list[str] = []
    out = config.settle(
        [{"debounce_max_ms": 100, "model": "m"}, {"debounce_min_ms": 300}],
        errors,
        names=("the file", "the environment"),
    )
    assert out == [{"model": "m"}, {"debounce_min_ms": 300}]
    assert "ignored debounce_max_ms from the file" in errors[0]


def test_settle_leaves_fixed_layers_alone():
    errors: list[str] = []
    out = config.settle(
        [{"debounce_max_ms": 100}, {}, {"debounce_min_ms": 300, "max_tokens": 21}],
        errors,
        names=("", "", "initializationOptions"),
        fixed=2,
    )
    assert out[-1] == {"max_tokens": 21} and "initializationOptions" in errors[0]
    errors.clear()
    out = config.settle([{"local_engine": "llama-server", "max_tokens": 3}, {"mode": "local"}], errors)
    assert out == [{"max_tokens": 3}, {"mode": "local"}] and "local_engine" in errors[0]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_non_finite_numbers_are_invalid_values(value):
    errors: list[str] = []
    assert config.normalize({"temperature": value, "max_tokens": 9}, "test", errors) == {"max_tokens": 9}
    assert "temperature" in errors[0] and "finite" in errors[0]
