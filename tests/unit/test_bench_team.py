"""The team benchmark's figures: the SLA rule, the Kaplan-Meier p90, the developers'
files, the command line and the table (the tiny real run is
tests/e2e/test_bench_team_e2e.py)."""

from __future__ import annotations

import pytest

from devtools.bench.cli import main as bench_main
from devtools.bench.team import developer_plans, format_table, km_quantile, largest_under_sla, team_files
from devtools.bench.typist import TypistModel

pytestmark = pytest.mark.timeout(150)


def test_sla_is_the_largest_n_with_every_smaller_n_passing():
    pts = [
        {"mode": "m", "developers": n, "tts_p90_ms": v, "pauses_shown": 3}
        for n, v in ((1, 400), (5, 900), (10, 1600), (20, 1200))
    ]
    assert largest_under_sla(pts, "m", "tts_p90_ms") == 5
    assert largest_under_sla([{**pts[0], "tts_p90_ms": 2000}], "m", "tts_p90_ms") is None
    assert largest_under_sla(pts, "m", "tts_p90_all_ms") is None


def test_kaplan_meier_p90_counts_pauses_that_showed_nothing():
    shown = [{"tts_ms": float(t), "duration_ms": 2000.0} for t in (100, 200, 300, 400, 500, 600, 700, 800, 900)]
    # Ten observed: the p90 is the 9th smallest.
    assert km_quantile(shown + [{"tts_ms": 1000.0, "duration_ms": 2000.0}], 90) == (900.0, None)
    # A short pause that showed nothing is censored: it only leaves the risk set.
    short = shown + [{"tts_ms": None, "duration_ms": 50.0}]
    assert km_quantile(short, 90) == (900.0, None)
    # Most pauses showing nothing for a long time: the p90 lies beyond the longest pause.
    blind = shown[:2] + [{"tts_ms": None, "duration_ms": 3000.0}] * 8
    assert km_quantile(blind, 90) == (None, 3000.0)
    assert km_quantile([], 90) == (None, None)


def test_developers_type_different_files():
    plans = developer_plans(10, 30, 0, TypistModel())
    names = [p.name for p in plans]
    assert len(set(names[:8])) == 8 == len(team_files())
    assert (plans[0].start, plans[0].keys) != (plans[8].start, plans[8].keys)  # same file, another session


def test_cli_dispatch_and_bad_arguments(capsys):
    assert bench_main(["team", "--developers", "0"]) == 2
    assert bench_main(["team", "--modes", "bogus", "--developers", "1"]) == 2
    assert bench_main(["team", "--capacity", "0"]) == 2
    assert "capacity" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench_main(["team", "--help"])
    assert "shared engine" in capsys.readouterr().out


def test_table_marks_inf_and_missing():
    p = {
        "developers": 1,
        "mode": "naive",
        "pauses": 3,
        "pauses_shown": 0,
        "tts_p50_ms": None,
        "tts_p90_ms": None,
        "tts_p90_all_ms": None,
        "tts_p90_all_inf": True,
        "tts_p90_km_ms": None,
        "tts_p90_km_above_ms": 2500.0,
        "valid_share": 0.0,
        "correct_share": 0.0,
        "engine_utilisation": 0.9,
        "queue_p50_ms": 100.0,
        "queue_p90_ms": 900.0,
        "prefill_per_accepted_char": None,
        "generated_per_accepted_char": None,
        "rate_limited_429": 4,
        "upstream_per_100_keys": 90.0,
        "key_lateness_p90_ms": 3.0,
        "cpu": {"load_max": 1.5, "cpu_busy_share": 0.5, "bench_process_cores": 0.1},
    }
    text = format_table([p], "header")
    assert "inf" in text and "100/900" in text and ">2500" in text
