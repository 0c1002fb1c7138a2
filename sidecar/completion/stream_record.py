"""How one upstream stream went (``StreamRecord``), and what it measured, recorded
once it is over (``record_stream``): the window budget's and load's samples
(``context_budget.py``), TTFT and stream time, tokens generated, slowness
(``reports.py``), and one log line. See docs/architecture.md.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..backends.base import StreamInfo
from ..backends.errors import BackendError
from . import tokens

if TYPE_CHECKING:
    from ..backends.base import Backend, UpstreamRequest
    from ..metrics import Metrics
    from .context_budget import ContextBudget
    from .postprocess import StreamFilter
    from .reports import Reports

log = logging.getLogger(__name__)


@dataclass
class StreamRecord:
    """How one upstream stream went. Times in milliseconds."""

    info: StreamInfo
    strategy: str = ""
    wait_ms: float = 0.0  # waiting for the backend to be ready (cold engine start)
    upstream_ms: float = 0.0
    error: BackendError | None = None
    deadline_hit: bool = False


def record_stream(
    out: StreamRecord,
    filt: StreamFilter,
    target: Backend,
    req: UpstreamRequest,
    *,
    was_warm: bool,
    metrics: Metrics,
    reports: Reports,
    context_budget: ContextBudget,
) -> None:
    """Record what the stream ``out`` (of ``req`` to ``target``, into ``filt``) measured.
    Only a stream to a backend that was warm before it gives latency samples (a cold
    backend's first TTFT includes its model load), and one cut at its deadline none."""
    info = out.info
    t_end = time.perf_counter()
    if info.phases > 1:
        metrics.count("heal.two_phase")
    context_budget.observe(target, req, info, record=was_warm and not out.deadline_hit)
    log.info(
        "upstream stream ended",
        extra={
            "fields": {
                "backend": target.name,
                "model": target.model,
                "strategy": out.strategy,
                "upstream_trace_id": info.trace_id,
                "ttft_ms": info.ttft_ms,
                "events": info.events,
                "chars": len(filt.raw),
                "closed_early": filt.done,
                "truncated": info.truncated,
                "deadline": out.deadline_hit,
            }
        },
    )
    out.upstream_ms = ((info.ended_at or t_end) - info.sent_at) * 1000 if info.sent_at else 0.0
    if info.ttft_ms is not None:
        metrics.observe("upstream_ttft", info.ttft_ms)
        reports.latency(info, target, metrics.recent("upstream_ttft")[-20:])
        if was_warm:  # a cold backend's first TTFT includes its model load
            context_budget.load.observe(target, info.ttft_ms)
    metrics.observe("upstream_stream", out.upstream_ms)
    metrics.count("upstream.malformed_events", info.malformed_events)
    generated = info.usage.get("completion_tokens") if isinstance(info.usage.get("completion_tokens"), int) else None
    metrics.count(
        "tokens.generated", generated if generated is not None else (tokens.count(filt.raw) if filt.raw else 0)
    )
    if info.truncated:
        metrics.count("upstream.truncated")
