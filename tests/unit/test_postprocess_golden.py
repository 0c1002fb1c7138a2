"""Golden postprocessing cases: real model output (``origin: recorded``, from
``scripts/record_golden.py`` with the embedded SmolLM2) and hand-made cases for measured
bugs (``origin: hand``), each with the suggestion a careful user would want.

Each case's raw text first gets the stop sequences that ``prompts.stop_sequences`` sends
today (an engine cuts there), then goes through ``clean`` in one piece and through
``StreamFilter`` in 3-character deltas. While streaming, no text shown may be
contradicted by the final text: every shown line but the last is a final line, and the
last is the start of one (no stub that disappears later). A case with ``xfail`` records a
known gap: the test fails strictly once the gap is closed, so the mark gets removed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sidecar.completion.context import build_context
from sidecar.completion.postprocess import StreamFilter, clean
from sidecar.completion.prompts import stop_sequences

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "postprocess"
CURSOR = "<|cursor|>"
CASES = sorted(GOLDEN.glob("*.json"))


def load(path: Path) -> dict:
    case = json.loads(path.read_text())
    assert case.get("expected") is not None, f"{path.name}: no reviewed expectation (write 'expected' by hand)"
    return case


def context_of(case: dict):
    text = case["input"]
    offset = text.index(CURSOR)
    return build_context(text.replace(CURSOR, "", 1), offset, case["language"], 1024, 256)


def upstream(raw: str, ctx) -> str:
    """What the engine sends: ``raw`` cut at the first of today's stop sequences."""
    cut = len(raw)
    for s in stop_sequences(ctx):
        i = raw.find(s)
        if i >= 0:
            cut = min(cut, i)
    return raw[:cut]


def compatible(shown: str, final: str) -> bool:
    """``shown`` is an earlier view of ``final``: its lines are final lines but the last,
    which is the start of the final line at its place."""
    if not shown:
        return True
    s, f = shown.split("\n"), final.split("\n")
    if len(s) > len(f):
        return False
    return s[:-1] == f[: len(s) - 1] and f[len(s) - 1].startswith(s[-1])


def mark(case: dict, request) -> None:
    if case.get("xfail"):
        request.applymarker(pytest.mark.xfail(reason=case["xfail"], strict=True))


def test_there_are_recorded_and_hand_made_cases():
    origins = [json.loads(p.read_text())["origin"] for p in CASES]
    assert origins.count("recorded") >= 10 and origins.count("hand") >= 5


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_clean(path, request):
    case = load(path)
    mark(case, request)
    ctx = context_of(case)
    assert clean(upstream(case["raw"], ctx), ctx) == case["expected"]


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_stream(path, request):
    case = load(path)
    mark(case, request)
    ctx = context_of(case)
    raw = upstream(case["raw"], ctx)
    f = StreamFilter(ctx)
    shown = []
    for i in range(0, len(raw), 3):
        stop = f.feed(raw[i : i + 3])
        shown.append(f.text())
        if stop:
            break
    final = f.text()
    assert final == case["expected"]
    for view in shown:
        assert compatible(view, final), f"shown {view!r} while streaming, final {final!r}"
    # The filter and a one-piece clean of what it kept agree (the cache stores that text).
    assert clean(f.raw_kept(), ctx) == final


def test_the_repeat_loop_stops_the_stream_at_the_second_copy():
    case = load(GOLDEN / "hand_repeat_loop.json")
    ctx = context_of(case)
    f = StreamFilter(ctx)
    fed = 0
    for i in range(0, len(case["raw"]), 3):
        fed = i + 3
        if f.feed(case["raw"][i : i + 3]):
            break
    assert f.done and fed <= len("x = x + 1\n    x = x + 1\n") + 3
    assert f.text() == "x = x + 1"
