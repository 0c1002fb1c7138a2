"""Development tools that are not part of the installed product: the simulated backend
(``devtools.simulator``) and the benchmarks (``devtools.bench``). They run from a clone
(``scripts/bench_*``, the tests), never from an installed wheel; see docs/benchmarks.md."""
