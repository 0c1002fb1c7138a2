"""Other programs' CPU use: what a local model competes with on this machine.

Read from the kernel's counters (``/proc/stat``: the machine's busy time, steal included,
that is a hypervisor giving the CPU to another guest) less this process's own CPU time
(``os.times``, all its threads). Time spent by *niced* programs (``nice`` > 0: the
``nice`` column) is left out: the scheduler gives them a small share beside normal work
(weight 15 against 1,024 at ``nice`` 19), and measured on 2 vCPUs of an AMD EPYC the
engine ran as fast beside a ``nice -n 19`` two-job compile as on a quiet machine (SmolLM2
prefill 2.34 against 2.40 ms a token, decode 6.6 against 7.6 ms), while one busy program
at normal priority slowed its two-thread decode 2-10x (docs/engines.md, "Threads under
load").

Used by the speed measurement (:mod:`.speed`) to tell a quiet pass from a contended one,
and by the managed engine's thread governor (:mod:`sidecar.backends.engine_threads`).
Where ``/proc/stat`` cannot be read (not Linux) the figure is 0.0: no load is seen.
"""

from __future__ import annotations

import os
import time


def busy_seconds(stat_path: str = "/proc/stat") -> float | None:
    """The machine's busy CPU time in s at normal priority or above, all CPUs summed
    (user + system + irq + softirq + steal of ``/proc/stat``'s first line; guest time is
    inside user); None when the file cannot be read or is not in that format."""
    try:
        with open(stat_path, encoding="ascii") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if len(fields) < 9 or fields[0] != "cpu":
        return None
    try:
        # user nice system idle iowait irq softirq steal
        user, _nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    except ValueError:
        return None
    return (user + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def own_seconds() -> float:
    """This process's CPU time in s (user + system, all threads)."""
    t = os.times()
    return t.user + t.system


class CpuMeter:
    """Other programs' CPU use over an interval, in CPUs (1.0: one CPU kept busy the whole
    time): ``start()`` then ``others_cpus()`` (rounded to 0.01; 0.0 where ``/proc/stat``
    cannot be read)."""

    def __init__(self, stat_path: str = "/proc/stat") -> None:
        self._stat_path = stat_path
        self._t0 = 0.0
        self._busy0: float | None = None
        self._own0 = 0.0

    def start(self) -> None:
        self._t0 = time.perf_counter()
        self._busy0 = busy_seconds(self._stat_path)
        self._own0 = own_seconds()

    def others_cpus(self) -> float:
        busy = busy_seconds(self._stat_path)
        wall = time.perf_counter() - self._t0
        if busy is None or self._busy0 is None or wall <= 0:
            return 0.0
        others = (busy - self._busy0) - (own_seconds() - self._own0)
        return round(max(0.0, others / wall), 2)
