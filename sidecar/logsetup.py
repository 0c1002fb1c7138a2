"""Logging to stderr (never stdout: in ``serve`` it is the LSP channel)."""

from __future__ import annotations

import logging
import os
import sys

from .observability.redact import protect


def setup(level: str | None = None) -> None:
    """Send all logging to stderr at ``level`` (default ``$SIDECAR_LOG_LEVEL`` or warning)."""
    level = (level or os.environ.get("SIDECAR_LOG_LEVEL") or "warning").upper()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    protect(handler)  # secrets never reach stderr (observability/redact.py)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    logging.getLogger("sidecar").setLevel(level if level in ("DEBUG", "INFO", "WARNING", "ERROR") else "WARNING")
    # Library chatter stays at warning unless asked for.
    for noisy in ("httpx", "httpcore", "pygls"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
