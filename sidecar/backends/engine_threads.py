"""How many threads the managed engine computes with, chosen from what else is running.

Runs inside the engine's process (:mod:`.engine_launcher` installs it). The engine is
started with its most threads (``--n_threads``: :func:`sidecar.models.hardware.default_threads`
or the user's ``local_threads``; prompt evaluation ``n_threads_batch``, every CPU). Each
graph step of llama.cpp ends in a barrier where all its threads wait for the slowest, so
when another program at normal priority takes one of those CPUs, every step waits for a
thread that is not running. Measured on 2 vCPUs of an AMD EPYC with the 0.5B code model
(docs/engines.md, "Threads under load"): beside two busy programs, two decode threads
took 78 ms a token at the median and 1,063 ms at worst, one thread 42 ms and 56 ms;
on a quiet machine two threads are faster (18.6 against 23.0 ms a token).

So before each evaluation (:meth:`ThreadGovernor.apply`, called from ``Llama.eval``) the
governor sets llama.cpp's thread counts (``llama_set_n_threads``: decode and prompt) to
the CPUs that other programs leave free, never more than the engine started with and
never fewer than one. "Other programs" is :mod:`sidecar.models.cpu_load`: busy time at
normal priority less this process's own, so a niced compile does not count, nor does
the engine itself. A background thread samples it every ``interval_s`` (0.25 s) and
smooths it (the mean of the last two samples); a change of thread count is written
to the engine's log. Hysteresis: one decode thread fewer once others use ``k + 0.5``
CPUs, back only below ``k + 0.3`` (prompt threads: ``k + 0.75`` and ``k + 0.55``), so a
load hovering at a boundary does not flip the count at every token.
"""

from __future__ import annotations

import math
import os
import sys
import threading
from collections.abc import Callable

from sidecar.models.cpu_load import CpuMeter

#: Seconds between two samples of the other programs' CPU use.
INTERVAL_S = 0.25
#: Fewer decode threads once others use ``k + DOWN_AT`` CPUs (k whole CPUs) ...
DOWN_AT = 0.5
#: ... and more again only below ``k + UP_BELOW``.
UP_BELOW = 0.3
#: The same for prompt evaluation, later: a prompt's matrix products are long between two
#: barriers. Beside a program busy half the time (2 vCPUs of an AMD EPYC, the 0.5B), two
#: prompt threads took 5.7-6.1 ms a token against 6.5 with one; busy three quarters of the
#: time, 6.4 against 6.6; one whole CPU busy, 8.9 against 6.3 (docs/engines.md).
DOWN_AT_BATCH = 0.75
UP_BELOW_BATCH = 0.55


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask; ``os.cpu_count`` elsewhere)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def threads_for(
    others_cpus: float, cpus: int, limit: int, current: int, down_at: float = DOWN_AT, up_below: float = UP_BELOW
) -> int:
    """The thread count for the next evaluation: the CPUs free of other programs, within
    ``1..limit``, moving from ``current`` with hysteresis (module doc).

    ``others_cpus``: other programs' use in CPUs (1.0: one CPU kept busy); ``cpus``: the
    CPUs this process may use; ``limit``: the most threads the engine was started with;
    one thread fewer once others use ``k + down_at`` CPUs, back below ``k + up_below``."""
    limit = max(1, limit)
    down = max(1, min(limit, cpus - math.floor(others_cpus + 1.0 - down_at)))
    if down < current:
        return down
    up = max(1, min(limit, cpus - math.floor(others_cpus + (1.0 - up_below))))
    if up > current:
        return up
    return max(1, min(limit, current))


class ThreadGovernor:
    """Other programs' CPU use, sampled in a daemon thread, and the thread counts that
    follow from it (module doc). ``limit_decode`` / ``limit_batch``: the engine's thread
    counts at start (decode, prompt evaluation); ``provisional``: they are a guess until
    :meth:`set_limits`, and changes are not logged before. ``log`` receives one line per
    change."""

    def __init__(
        self,
        limit_decode: int,
        limit_batch: int,
        *,
        cpus: int | None = None,
        interval_s: float = INTERVAL_S,
        meter: CpuMeter | None = None,
        log: Callable[[str], None] | None = None,
        provisional: bool = False,
    ) -> None:
        self.limit_decode = max(1, limit_decode)
        self.limit_batch = max(1, limit_batch)
        self.cpus = cpus or usable_cpus()
        self.interval_s = interval_s
        self._meter = meter or CpuMeter()
        self._log = log or _stderr
        self._samples: list[float] = []
        self.others_cpus = 0.0
        self.decode = self.limit_decode
        self.batch = self.limit_batch
        self._applied: dict[int, tuple[int, int]] = {}
        self._limited = not provisional  # provisional limits: no log line until set_limits
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start sampling in a daemon thread (it dies with the process)."""
        if self._thread is not None:
            return
        self._meter.start()
        self._thread = threading.Thread(target=self._run, name="sidecar-thread-governor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def sample(self) -> None:
        """Take one sample (others' use since the last one) and update the counts."""
        others = self._meter.others_cpus()
        self._meter.start()
        with self._lock:
            self._samples = [*self._samples[-1:], others]
            self.others_cpus = sum(self._samples) / len(self._samples)
            decode = threads_for(self.others_cpus, self.cpus, self.limit_decode, self.decode)
            batch = threads_for(
                self.others_cpus, self.cpus, self.limit_batch, self.batch, DOWN_AT_BATCH, UP_BELOW_BATCH
            )
            if (decode, batch) != (self.decode, self.batch) and self._limited:
                self._log(
                    f"threads {self.decode} -> {decode} (decode), {self.batch} -> {batch} (prompt): "
                    f"other programs keep {self.others_cpus:.2f} of {self.cpus} CPUs busy"
                )
                self.decode, self.batch = decode, batch

    def set_limits(self, limit_decode: int, limit_batch: int) -> None:
        """The engine's thread counts at start (decode, prompt): the most it may use."""
        with self._lock:
            self.limit_decode, self.limit_batch = max(1, limit_decode), max(1, limit_batch)
            self._limited = True
            self.decode = threads_for(self.others_cpus, self.cpus, self.limit_decode, self.limit_decode)
            self.batch = threads_for(
                self.others_cpus, self.cpus, self.limit_batch, self.limit_batch, DOWN_AT_BATCH, UP_BELOW_BATCH
            )
            if (self.decode, self.batch) != (self.limit_decode, self.limit_batch):
                self._log(
                    f"threads {self.limit_decode} -> {self.decode} (decode), {self.limit_batch} -> {self.batch} "
                    f"(prompt): other programs keep {self.others_cpus:.2f} of {self.cpus} CPUs busy"
                )

    def counts(self) -> tuple[int, int]:
        """(decode threads, prompt threads) for the next evaluation."""
        with self._lock:
            return self.decode, self.batch

    def apply(self, ctx: object, set_threads: Callable[[object, int, int], None]) -> None:
        """Give llama.cpp context ``ctx`` the current counts through ``set_threads``
        (``llama_cpp.llama_set_n_threads``) when they differ from what it last got."""
        counts = self.counts()
        key = id(ctx)
        if self._applied.get(key) != counts:
            set_threads(ctx, *counts)
            self._applied[key] = counts


def _stderr(line: str) -> None:
    sys.stderr.write(f"sidecar engine launcher: {line}\n")
    sys.stderr.flush()


def install_thread_governor() -> ThreadGovernor:
    """Start the governor (sampling begins now, so that the load is known by the time the
    model has loaded) and wrap ``llama_cpp.Llama.eval`` so that each evaluation runs with
    its thread counts. The limits are the first model's ``n_threads`` and
    ``n_threads_batch``, read at its first evaluation. Idempotent: returns the governor."""
    import llama_cpp

    Llama = llama_cpp.Llama
    installed = getattr(Llama.eval, "_sidecar_threads", None)
    if installed is not None:
        return installed
    original_eval = Llama.eval
    gov = ThreadGovernor(usable_cpus(), usable_cpus(), provisional=True)
    gov.start()
    limited: list[bool] = []

    def eval(self, tokens):  # noqa: A001 - the name llama-cpp-python calls
        if not limited:
            gov.set_limits(self.n_threads, self.n_threads_batch)
            limited.append(True)
        gov.apply(self._ctx.ctx, llama_cpp.llama_set_n_threads)
        return original_eval(self, tokens)

    eval._sidecar_threads = gov  # type: ignore[attr-defined]
    Llama.eval = eval  # type: ignore[method-assign]
    return gov
