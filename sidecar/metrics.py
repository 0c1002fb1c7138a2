"""In-process counters and latency samples, reported by ``sidecar.stats``.

Latencies are milliseconds. Each series keeps its most recent 2,048 samples, which is
what percentiles are computed over.
"""

from __future__ import annotations

from collections import Counter, deque
from typing import Any

_WINDOW = 2048


def percentile(samples: list[float], q: float) -> float | None:
    """Nearest-rank percentile ``q`` in [0, 100] of ``samples`` (None when empty)."""
    if not samples:
        return None
    s = sorted(samples)
    k = max(0, min(len(s) - 1, int(round(q / 100.0 * len(s) + 0.5)) - 1))
    return s[k]


class Metrics:
    """Counters (``count``) and latency series (``observe``) for one sidecar process."""

    def __init__(self) -> None:
        self.counters: Counter[str] = Counter()
        self.series: dict[str, deque[float]] = {}
        self.sizes: dict[str, deque[float]] = {}  # counts per event (tokens), not times

    def count(self, name: str, n: int = 1) -> None:
        self.counters[name] += n

    def observe(self, name: str, ms: float) -> None:
        self.series.setdefault(name, deque(maxlen=_WINDOW)).append(ms)

    def observe_size(self, name: str, n: float) -> None:
        """One event's size (e.g. prompt tokens evaluated by one upstream request)."""
        self.sizes.setdefault(name, deque(maxlen=_WINDOW)).append(n)

    def recent(self, name: str) -> list[float]:
        return list(self.series.get(name, ()))

    def snapshot(self) -> dict[str, Any]:
        """``{"counters": {...}, "latency_ms": {name: {count, p50, p90, p99, mean}},
        "sizes": {name: {...the same}}}`` (sizes: e.g. ``prompt.new_tokens``, cl100k tokens
        of prompt the engine had to evaluate per upstream request)."""

        def summary(series: dict[str, deque[float]]) -> dict[str, Any]:
            out = {}
            for name, dq in series.items():
                xs = list(dq)
                out[name] = {
                    "count": len(xs),
                    "p50": percentile(xs, 50),
                    "p90": percentile(xs, 90),
                    "p99": percentile(xs, 99),
                    "mean": (sum(xs) / len(xs)) if xs else None,
                }
            return out

        return {"counters": dict(self.counters), "latency_ms": summary(self.series), "sizes": summary(self.sizes)}
