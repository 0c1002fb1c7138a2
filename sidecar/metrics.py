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

    def count(self, name: str, n: int = 1) -> None:
        self.counters[name] += n

    def observe(self, name: str, ms: float) -> None:
        self.series.setdefault(name, deque(maxlen=_WINDOW)).append(ms)

    def recent(self, name: str) -> list[float]:
        return list(self.series.get(name, ()))

    def snapshot(self) -> dict[str, Any]:
        """``{"counters": {...}, "latency_ms": {name: {count, p50, p90, p99, mean}}}``."""
        lat = {}
        for name, dq in self.series.items():
            xs = list(dq)
            lat[name] = {
                "count": len(xs),
                "p50": percentile(xs, 50),
                "p90": percentile(xs, 90),
                "p99": percentile(xs, 99),
                "mean": (sum(xs) / len(xs)) if xs else None,
            }
        return {"counters": dict(self.counters), "latency_ms": lat}
