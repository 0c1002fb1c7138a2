"""The keystroke-replay benchmark's report rows and its typing plan, without running it
(the smoke run in every mode is tests/e2e/test_bench_smoke_e2e.py)."""

from __future__ import annotations

import pytest

from devtools.bench.cli import default_files
from devtools.bench.report import compare, format_table, summarize

pytestmark = pytest.mark.timeout(120)


def _raw(mode, prefetch, tokens, accepts, stats):
    return {
        "mode": mode,
        "prefetch": prefetch,
        "pauses": [],
        "upstream": [{"path": "/v1/completions", "tokens_sent": tokens, "completed": True, "disconnected": False}],
        "keystrokes": 10,
        "keys_typed": 10 - len(accepts),
        "accepts": len(accepts),
        "accepted_chars": 5 * len(accepts),
        "wall_s": 1.0,
        "errors": [],
        "lsp": {
            "inline_sent": 10,
            "inline_answered": 10,
            "commands_sent": 0,
            "commands_answered": 0,
            "non_empty_answers": 3,
        },
        "key_lateness_ms": {"count": 10, "mean": 1.0, "max": 2.0},
        "after_accept": accepts,
        "server_stats": stats,
    }


def _accept(tts=None, late=None, empty=None, region_end=False):
    return {"tts_ms": tts, "late_ms": late, "answered_empty_ms": empty, "window_ms": 150.0, "region_end": region_end}


def test_after_accept_and_prefetch_rows():
    stats = {
        "prefetch": {
            "issued": 4,
            "used": 3,
            "wasted": 1,
            "skipped_budget": 2,
            "tokens_reserved": 900,
            "tokens_generated": 40,
        },
        "counters": {"answers.prefetch": 5},
    }
    on = _raw(
        "sidecar",
        True,
        130,
        [
            _accept(tts=4),
            _accept(tts=10),
            _accept(tts=6),
            _accept(late=300),
            _accept(empty=20),
            _accept(region_end=True),
        ],
        stats,
    )
    off = _raw("sidecar-noprefetch", False, 100, [_accept(), _accept(tts=5)], {"prefetch": {}, "counters": {}})
    s = compare({"sidecar": summarize(on), "sidecar-noprefetch": summarize(off)})
    assert s["sidecar"]["accepts_measured"] == 5 and s["sidecar"]["accepts_at_region_end"] == 1
    assert s["sidecar"]["accepts_without_suggestion"] == 2
    assert (s["sidecar"]["accept_tts_p50_ms"], s["sidecar"]["accept_tts_p90_ms"]) == (6, 10)
    assert s["sidecar"]["prefetch_hit_rate"] == 0.75
    assert s["sidecar"]["tokens_vs_noprefetch"] == 30
    assert s["sidecar-noprefetch"]["accepts_without_suggestion"] == 1
    table = format_table(s)
    line = lambda label: next(x for x in table.splitlines() if x.startswith(label))  # noqa: E731
    assert "75% (3/4)" in line("prefetch hit rate")
    assert line("prefetch hit rate").rstrip().endswith("-")
    assert "900 / 40" in line("prefetch tokens reserved / generated")
    assert "+30 (+30%)" in line("tokens generated vs no-prefetch")
    assert "2/5" in line("accepts with no suggestion") and line("accepts with no suggestion").rstrip().endswith("1/2")


def test_plan_is_deterministic_and_oracle_finds_the_cursor():
    from devtools.bench.truth import Oracle, TrueFile
    from devtools.bench.typist import plan_file

    path = default_files()[1]
    text = path.read_text()
    a = plan_file(path, text, "typescript", 120, seed=3)
    b = plan_file(path, text, "typescript", 120, seed=3)
    assert a == b and len(a.keys) >= 120
    assert "".join(text[k.start : k.end] for k in a.keys) == text[a.start : a.end]
    assert text.startswith("\n", a.end)  # the document after the cursor starts with a line break
    oracle = Oracle([TrueFile(a.name, text, a.start, a.end)], seed=3, wrong_rate=0.0)
    cursor = a.keys[40].start
    prompt = a.document_at(cursor)[:cursor][-600:]
    assert oracle.locate(prompt) == (oracle.files[0], cursor)
    assert text[cursor:].startswith(oracle.answer(prompt))
    assert Oracle(oracle.files, seed=3, wrong_rate=1.0).answer(prompt) != oracle.answer(prompt) or not any(
        c.isalpha() for c in oracle.answer(prompt)
    )
