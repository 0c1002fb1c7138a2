"""Observability: structured logs with trace IDs, redaction, strict JSON, a Prometheus
exporter, a stats file. The lowest layer: every other layer may use it, and it imports
none of them (the ``sidecar.stats`` payload, which reads the completion service, is
``completion/stats.py``)."""
