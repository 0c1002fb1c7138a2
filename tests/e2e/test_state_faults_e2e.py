"""Faults in the gate's stored state, over real stdio (issue 33, item 3).

A cache file whose ``gate`` row passes as "this version" but holds numbers the model
cannot use (NaN, infinities, weights of the wrong length or far out of range, a JSON
value that is not an object) is not loaded: the sidecar says so in one log line and runs
on the default weights. Every JSON it writes stays strict JSON (no bare ``NaN`` or
``Infinity``): the LSP frames (checked here as raw bytes, below pytest-lsp's own lenient
parser), the stats file and the JSON log file.
"""

from __future__ import annotations

import asyncio
import json
import math

import pygls.io_
import pytest
from lsprotocol import types

from conftest import inline_params, open_doc, sidecar, sidecar_env
from devtools.simulator import LatencyModel, SimulatedBackend
from sidecar.completion import gate as G
from support.cache import make

pytestmark = pytest.mark.timeout(90)
URI = "file:///w/state.py"
TEXT = "def f(xs):\n    \n    return y\n"


def _reject(token: str):
    raise ValueError(f"not strict JSON: bare {token}")


def strict_loads(text) -> object:
    """``json.loads`` as a strict parser: NaN, Infinity and -Infinity are errors."""
    return json.loads(text, parse_constant=_reject)


class _StrictRecorder:
    """Stands in for the ``json`` module of pytest-lsp's reader (``pygls.io_``): every
    frame the sidecar sends is also parsed strictly, and a frame that fails is kept in
    ``bad`` (then parsed as pygls would, so the client goes on and the test can say so)."""

    def __init__(self) -> None:
        self.bad: list[str] = []
        self.frames = 0

    def loads(self, body, **kw):
        self.frames += 1
        try:
            strict_loads(body)
        except ValueError as exc:
            self.bad.append(f"{exc}: {body[:300]!r}")
        return json.loads(body, **kw)

    def __getattr__(self, name):
        return getattr(json, name)


@pytest.fixture
def wire(monkeypatch):
    rec = _StrictRecorder()
    monkeypatch.setattr(pygls.io_, "json", rec)
    return rec


@pytest.fixture
async def sim():
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=5, tokens_per_s=2000, seed=3)) as s:
        s.set_responder(lambda body: "total = sum(xs)")
        yield s


def env_for(tmp_path, sim):
    return sidecar_env(
        tmp_path,
        SIDECAR_PROVIDER="openai",
        SIDECAR_BASE_URL=sim.base_url,
        SIDECAR_API_KEY="sk-state-123456789",
        SIDECAR_GATE="true",
        SIDECAR_CACHE_PATH=str(tmp_path / "completions.sqlite3"),
        SIDECAR_LOG_FILE=str(tmp_path / "sidecar.jsonl"),
    )


def default_estimates() -> dict[str, float]:
    m = G.GateModel()
    return {k: round(m.p_accept(G.Features(k, "stream", "", 30, 0)), 4) for k in G.KINDS}


def row(weights, **over) -> str:
    """A gate row of this version and feature list (``json.dumps`` writes NaN and
    Infinity as a careless writer would)."""
    d = {"version": G.STATE_VERSION, "features": list(G.FEATURE_NAMES), "weights": weights, "updates": 7}
    d.update(over)
    return json.dumps(d)


async def store_gate_row(tmp_path, text: str) -> None:
    """Write ``text`` as the cache file's ``gate`` row with the real store code."""
    cache = await make(tmp_path / "completions.sqlite3")
    await cache.put_state("gate", text)
    assert await cache.get_state("gate") == text
    await cache.close()


def log_records(tmp_path) -> list[dict]:
    """The JSON log file's records, each parsed strictly."""
    path = tmp_path / "sidecar.jsonl"
    if not path.exists():
        return []
    return [strict_loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def gate_warnings(tmp_path) -> list[dict]:
    return [r for r in log_records(tmp_path) if r["logger"] == "sidecar.completion.gate" and r["level"] == "warning"]


async def stats(client) -> dict:
    return await asyncio.wait_for(
        client.workspace_execute_command_async(types.ExecuteCommandParams(command="sidecar.stats", arguments=[])), 20
    )


async def run_on_stored_row(tmp_path, sim, text: str, wire) -> tuple[dict, object, list]:
    """Start the sidecar on a cache file holding ``text`` as the gate row; wait until it
    has read the row (the warning, or the model's update count); return the stats, a
    completion it answered and the stats files' texts (removed when the sidecar exits)."""
    await store_gate_row(tmp_path, text)
    async with sidecar(env_for(tmp_path, sim)) as client:
        open_doc(client, URI, TEXT)
        for _ in range(100):
            snap = await stats(client)
            if gate_warnings(tmp_path) or snap["gate"]["updates"]:
                break
            await asyncio.sleep(0.05)
        snap = await stats(client)
        answer = await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(URI, 1, 4)), 20)
        # The stats file is written while the counters change (every 2 s at most).
        await asyncio.sleep(2.3)
        files = [f.read_text() for f in stats_files(tmp_path)]
    return snap, answer, files


def stats_files(tmp_path):
    d = tmp_path / "state"
    return sorted(d.rglob("stats/*.json")) if d.exists() else []


def assert_defaults_and_one_line(tmp_path, snap, answer, files, wire, why: str) -> None:
    assert not wire.bad, wire.bad
    assert wire.frames > 0
    gate = snap["gate"]
    assert gate["p_accept"] == default_estimates(), gate
    assert gate["updates"] == 0
    assert all(isinstance(v, float) and math.isfinite(v) for v in gate["p_accept"].values())
    warnings = gate_warnings(tmp_path)
    assert len(warnings) == 1, warnings
    msg = warnings[0]["msg"]
    assert "default" in msg and why in msg, msg
    # It goes on serving: the suggestion is shown.
    assert answer is not None and answer.items[0].insert_text == "total = sum(xs)"
    # The JSON log file parsed strictly above; so must the stats file.
    assert files, "no stats file written"
    for text in files:
        data = strict_loads(text)
        assert data["gate"]["p_accept"] == default_estimates()


async def test_a_nan_gate_row_falls_back_to_the_defaults_with_one_line(tmp_path, sim, wire):
    weights = list(G.DEFAULT_WEIGHTS)
    weights[0] = float("nan")
    weights[3] = float("nan")
    snap, answer, files = await run_on_stored_row(tmp_path, sim, row(weights), wire)
    assert_defaults_and_one_line(tmp_path, snap, answer, files, wire, "not a finite number")


@pytest.mark.parametrize(
    "text, why",
    [
        # +inf in the bias
        (row([float("inf"), *G.DEFAULT_WEIGHTS[1:]]), "not a finite number"),
        # -inf in a log-probability slope
        (row([*G.DEFAULT_WEIGHTS[:-1], float("-inf")]), "not a finite number"),
        # one weight too few
        (row(list(G.DEFAULT_WEIGHTS[:-1])), "weights"),
        # a weight far out of what learning can reach
        (row([*G.DEFAULT_WEIGHTS[:5], 1e300, *G.DEFAULT_WEIGHTS[6:]]), "out of range"),
        # weights that are not numbers
        (row(["0.8", *G.DEFAULT_WEIGHTS[1:]]), "not a number"),
        # a negative update count
        (row(list(G.DEFAULT_WEIGHTS), updates=-4), "updates"),
        # JSON, but not an object
        (json.dumps([G.STATE_VERSION, list(G.DEFAULT_WEIGHTS)]), "not a JSON object"),
        # not JSON at all
        ('{"version": 5, "weights": [0.8,', "not JSON"),
    ],
    ids=["inf-bias", "minus-inf", "short", "huge", "strings", "negative-updates", "array", "truncated"],
)
async def test_other_bad_gate_rows_fall_back_to_the_defaults(tmp_path, sim, wire, text, why):
    snap, answer, files = await run_on_stored_row(tmp_path, sim, text, wire)
    assert_defaults_and_one_line(tmp_path, snap, answer, files, wire, why)


async def test_a_good_row_of_another_version_is_ignored_quietly(tmp_path, sim, wire):
    """A row of an older format is no fault (an upgrade): the defaults, no warning."""
    await store_gate_row(tmp_path, row(list(G.DEFAULT_WEIGHTS), version=G.STATE_VERSION - 1))
    async with sidecar(env_for(tmp_path, sim)) as client:
        await asyncio.sleep(0.5)
        snap = await stats(client)
    assert snap["gate"]["p_accept"] == default_estimates()
    assert gate_warnings(tmp_path) == [] and not wire.bad


async def test_a_good_stored_model_is_still_loaded(tmp_path, sim, wire):
    weights = [w + 0.25 if i == 4 else w for i, w in enumerate(G.DEFAULT_WEIGHTS)]  # blank line raised
    await store_gate_row(tmp_path, row(weights))
    async with sidecar(env_for(tmp_path, sim)) as client:
        for _ in range(100):
            snap = await stats(client)
            if snap["gate"]["updates"]:
                break
            await asyncio.sleep(0.05)
    assert snap["gate"]["updates"] == 7
    assert snap["gate"]["p_accept"]["blank_line"] > default_estimates()["blank_line"]
    assert gate_warnings(tmp_path) == [] and not wire.bad
