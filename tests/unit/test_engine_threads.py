"""The managed engine's thread governor (sidecar/backends/engine_threads.py): the thread
count for a given load, with hysteresis, and the governor reading a real stat file."""

from __future__ import annotations

import os
import time

import pytest

from sidecar.backends.engine_threads import ThreadGovernor, threads_for
from sidecar.models.cpu_load import CpuMeter


@pytest.mark.parametrize(
    ("others", "cpus", "limit", "current", "expected"),
    [
        (0.0, 2, 2, 2, 2),  # quiet: every thread
        (0.49, 2, 2, 2, 2),
        (0.5, 2, 2, 2, 1),  # half a CPU taken: one thread fewer
        (1.0, 2, 2, 2, 1),
        (2.0, 2, 2, 2, 1),  # never fewer than one
        (0.4, 2, 2, 1, 1),  # hysteresis: back up only below 0.3
        (0.29, 2, 2, 1, 2),
        (3.6, 8, 4, 4, 4),  # 8 CPUs, started with 4: 4 left free is enough
        (4.5, 8, 4, 4, 3),
        (6.9, 8, 4, 3, 1),
        (0.0, 8, 4, 1, 4),  # never more than the engine started with
        (0.0, 2, 1, 1, 1),
    ],
)
def test_threads_for(others, cpus, limit, current, expected):
    assert threads_for(others, cpus, limit, current) == expected


@pytest.mark.parametrize(
    ("others", "current", "expected"),
    [(0.6, 2, 2), (0.74, 2, 2), (0.75, 2, 1), (1.0, 2, 1), (0.6, 1, 1), (0.54, 1, 2)],
)
def test_prompt_threads_go_later(others, current, expected):
    """Prompt evaluation keeps two threads beside a program busy up to three quarters of
    the time (measured faster there), then gives one up."""
    from sidecar.backends.engine_threads import DOWN_AT_BATCH, UP_BELOW_BATCH

    assert threads_for(others, 2, 2, current, DOWN_AT_BATCH, UP_BELOW_BATCH) == expected


def _write(stat, user_ticks):
    stat.write_text(f"cpu  {user_ticks} 0 50 1000 5 0 0 0 0 0\n", encoding="ascii")


def test_the_governor_follows_the_load_it_reads(tmp_path):
    """Fed a real stat file: one other CPU's worth of busy time takes a thread away (and
    says so once), and a quiet stretch gives it back after the smoothing."""
    hz = os.sysconf("SC_CLK_TCK")
    stat = tmp_path / "stat"
    ticks = 1000
    _write(stat, ticks)
    lines: list[str] = []
    gov = ThreadGovernor(2, 2, cpus=2, meter=CpuMeter(str(stat)), log=lines.append)
    gov._meter.start()
    assert gov.counts() == (2, 2)

    def step(busy_cpus):
        nonlocal ticks
        time.sleep(0.3)
        ticks += int(busy_cpus * 0.3 * hz)
        _write(stat, ticks)
        gov.sample()

    step(1.0)
    assert gov.counts() == (1, 1)
    assert len(lines) == 1 and "2 -> 1 (decode)" in lines[0] and "of 2 CPUs busy" in lines[0], lines
    step(1.0)
    assert gov.counts() == (1, 1) and len(lines) == 1
    step(0.0)  # the mean of the last two samples is about 0.5: prompt threads come back first
    assert gov.counts() == (1, 2)
    step(0.0)
    assert gov.counts() == (2, 2)
    assert len(lines) == 3 and "1 -> 2 (prompt)" in lines[1] and "1 -> 2 (decode)" in lines[2], lines


def test_the_counts_reach_each_context_once_per_change(tmp_path):
    stat = tmp_path / "stat"
    _write(stat, 1000)
    gov = ThreadGovernor(2, 2, cpus=2, meter=CpuMeter(str(stat)), log=lambda _line: None)
    given: list[tuple[object, int, int]] = []

    def set_threads(ctx, n, nb):
        given.append((ctx, n, nb))

    ctx = object()
    gov.apply(ctx, set_threads)
    gov.apply(ctx, set_threads)
    assert given == [(ctx, 2, 2)]
    gov.decode = 1
    gov.apply(ctx, set_threads)
    assert given[-1] == (ctx, 1, 2) and len(given) == 2
