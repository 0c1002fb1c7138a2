"""The naive pipeline (``scheduling = "naive"``): the baseline the benchmarks compare
with, behind the scheduler's interface so the LSP surface does not branch. Every request
streams its own completion to the end: no debounce, no reuse of running or finished
streams, no cache, no updates, no speculation. See docs/architecture.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .postprocess import StreamFilter
from .request import Answer, Request

if TYPE_CHECKING:
    from ..metrics import Metrics
    from .stream import StreamRunner


class NaivePipeline:
    """``request(req) -> Answer | None`` and ``shown(...)``, like ``Scheduler``, on the
    stream runner (``stream.py``)."""

    def __init__(self, runner: StreamRunner, metrics: Metrics) -> None:
        self.runner = runner
        self.metrics = metrics

    async def request(self, req: Request) -> Answer | None:
        """Stream one completion for ``req`` to its end and return it cleaned, or None when
        there is nothing to show (empty text, an upstream error, a deadline with no text).
        The time spent waiting for the backend to be ready and streaming goes to
        ``req.waited_s`` and ``req.upstream_s`` (seconds).

        Raises ``asyncio.CancelledError`` when cancelled (the upstream stream is closed
        first). Never raises BackendError."""
        metrics = self.metrics
        metrics.count("requests")
        filt = StreamFilter(req.ctx)
        out = await self.runner.run(req.ctx, filt)
        req.waited_s = out.wait_ms / 1000
        req.upstream_s = out.upstream_ms / 1000
        if out.error is not None:
            return None
        text = filt.text()
        if not text:
            metrics.count("empty")
            return None
        metrics.count("suggestions")
        return Answer(text, "stream")

    def shown(self, item_id: str, req: Request, text: str) -> None:
        """Nothing: the naive path keeps no bookkeeping of what it showed."""
