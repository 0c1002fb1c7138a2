"""Other programs' CPU use during a speed measurement and for the engine's thread governor
(sidecar/models/cpu_load.py, ``CpuMeter``): read from the real ``/proc/stat`` while a real busy process runs, and from
real files for the edge cases."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from sidecar.models.cpu_load import CpuMeter
from sidecar.models.speed import CONTENDED_CPUS

pytestmark = pytest.mark.skipif(not Path("/proc/stat").exists(), reason="needs Linux's /proc/stat")


def test_a_busy_process_beside_the_measurement_counts_as_contended():
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)  # the hog is running
        meter = CpuMeter()
        meter.start()
        time.sleep(1.0)  # this process sleeps: the busy time is the hog's (and CI's)
        others = meter.others_cpus()
    finally:
        hog.kill()
        hog.wait()
    assert others >= 0.6 and others >= CONTENDED_CPUS


def test_this_process_own_work_is_not_counted_as_others():
    meter = CpuMeter()
    meter.start()
    end = time.perf_counter() + 1.0
    while time.perf_counter() < end:  # one CPU busy, all of it ours
        pass
    others = meter.others_cpus()
    # On a quiet machine about 0; CI may run a hog on one core, which is at most 1 CPU more.
    assert others < 1.5


def test_an_unreadable_or_foreign_stat_file_reads_as_no_load(tmp_path):
    missing = CpuMeter(str(tmp_path / "nope"))
    missing.start()
    assert missing.others_cpus() == 0.0
    odd = tmp_path / "stat"
    odd.write_text("intr 1 2 3\n", encoding="ascii")
    meter = CpuMeter(str(odd))
    meter.start()
    assert meter.others_cpus() == 0.0


def test_busy_time_from_a_real_stat_file(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 50 1000 5 0 0 0 0 0\ncpu0 50 0 25 500 2 0 0 0 0 0\n", encoding="ascii")
    meter = CpuMeter(str(stat))
    meter.start()
    # 200 more ticks of user time by others (this process barely runs meanwhile)
    stat.write_text("cpu  300 0 50 1000 5 0 0 0 0 0\n", encoding="ascii")
    time.sleep(0.2)
    import os

    expected = 200 / os.sysconf("SC_CLK_TCK")
    others = meter.others_cpus()
    assert others > 0 and others <= expected / 0.2 + 0.1


def test_niced_programs_are_not_counted(tmp_path):
    """A ``nice -n 19`` compile barely slows the engine (docs/engines.md, "Threads under
    load"): its time (the ``nice`` column) is not load; the same ticks as user time are."""
    import os

    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 50 1000 5 0 0 0 0 0\n", encoding="ascii")
    meter = CpuMeter(str(stat))
    meter.start()
    stat.write_text("cpu  100 400 50 1000 5 0 0 0 0 0\n", encoding="ascii")
    time.sleep(0.2)
    assert meter.others_cpus() == 0.0
    stat.write_text("cpu  100 0 50 1000 5 0 0 0 0 0\n", encoding="ascii")
    meter.start()
    stat.write_text(f"cpu  100 0 50 1000 5 0 0 {os.sysconf('SC_CLK_TCK') // 5} 0 0\n", encoding="ascii")
    time.sleep(0.2)
    assert meter.others_cpus() > 0.5  # steal: the host ran another guest on our CPU
