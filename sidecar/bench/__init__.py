"""Keystroke-replay benchmark: the sidecar (prefetch on and off) against a naive baseline.

A seeded typist (:mod:`.typist`) writes part of real source files into a live
``sidecar serve`` over stdio, as VS Code would drive it (:mod:`.replay`), against a
simulated SiliconFlow-like backend in its own process (:mod:`.simproc`) whose answers
are the files' true continuations, sometimes wrong ones (:mod:`.truth`). The same
plan runs once per mode: ``sidecar`` (``scheduling = "adaptive"``, speculative prefetch
on), ``sidecar-noprefetch`` (the same, prefetch off) and ``naive``; :mod:`.report`
prints one table and writes JSON and latency CDF plots.

Run it with ``scripts/bench_replay`` or ``python -m sidecar.bench --help``.
"""

from .cli import BenchResult, run_bench

__all__ = ["BenchResult", "run_bench"]
