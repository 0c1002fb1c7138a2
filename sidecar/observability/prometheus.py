"""An opt-in Prometheus endpoint on localhost (``prometheus_port``), for Grafana users.

The exporter reads the same ``Metrics`` object that ``sidecar.stats`` reports, at scrape
time, so both always show the same counts: each counter ``a.b`` becomes
``sidecar_a_b_total``, each latency series ``x`` becomes ``sidecar_x_ms`` with
``quantile`` 0.5/0.9/0.99 and ``_count``. It listens on 127.0.0.1 only.
"""

from __future__ import annotations

import re
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily

_NAME = re.compile(r"[^a-zA-Z0-9_]")


def _name(s: str) -> str:
    return "sidecar_" + _NAME.sub("_", s)


class _Collector:
    def __init__(self, metrics: Any) -> None:
        self.metrics = metrics

    def collect(self):
        snap = self.metrics.snapshot()
        for key, value in sorted(snap["counters"].items()):
            yield CounterMetricFamily(_name(key), f"sidecar counter {key}", value=value)
        for key, st in sorted(snap["latency_ms"].items()):
            fam = SummaryMetricFamily(
                _name(key) + "_ms",
                f"sidecar latency {key} (ms, recent window)",
                count_value=st["count"],
                sum_value=(st["mean"] or 0) * st["count"],
            )
            yield fam
            q = GaugeMetricFamily(
                _name(key) + "_ms_quantile", f"sidecar latency {key} percentiles (ms)", labels=["quantile"]
            )
            for label, k in (("0.5", "p50"), ("0.9", "p90"), ("0.99", "p99")):
                if st[k] is not None:
                    q.add_metric([label], st[k])
            yield q
        for key, st in sorted(snap.get("sizes", {}).items()):  # e.g. prompt tokens per request
            yield SummaryMetricFamily(
                _name(key),
                f"sidecar size {key} (per event, recent window)",
                count_value=st["count"],
                sum_value=(st["mean"] or 0) * st["count"],
            )


def start_exporter(metrics: Any, port: int) -> Any:
    """Serve ``/metrics`` on 127.0.0.1:``port`` in a daemon thread; returns the server.
    Raises OSError when the port is taken."""
    registry = CollectorRegistry()
    registry.register(_Collector(metrics))
    server, _thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    return server
