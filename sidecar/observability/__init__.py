"""Observability: structured logs with trace IDs, a Prometheus exporter, a stats file."""
