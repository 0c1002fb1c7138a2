"""Keystroke-replay benchmark: the sidecar (prefetch on and off) against a naive baseline.

A seeded typist (:mod:`.typist`) writes part of real source files into a live
``sidecar serve`` over stdio, as VS Code would drive it (:mod:`.replay`), against a
simulated SiliconFlow-like backend in its own process (:mod:`.simproc`) whose answers
are the files' true continuations, sometimes wrong ones (:mod:`.truth`). The same
plan runs once per mode: ``sidecar`` (``scheduling = "adaptive"``, speculative prefetch
on), ``sidecar-noprefetch`` (the same, prefetch off) and ``naive``; :mod:`.report`
prints one table and writes JSON, latency CDF plots and the timeline of one session
(keys, requests, aborts and suggestions shown). With ``--backend siliconflow`` and a
``SILICONFLOW_API_KEY``, the runs go to the real SiliconFlow instead of the simulator.

Run it with ``python -m devtools.bench`` (``python -m devtools.bench``, ``scripts/bench_replay``);
``--help`` documents it.
"""

from .cli import BenchResult, run_bench

__all__ = ["BenchResult", "run_bench"]
