"""The cold-start gate: one model load at a time.

While no byte has come from the backend since it started or came back
(``Upstream.backend_cold()``), its first stream is a *loader*: it may be loading the
model (an engine that loads on the first request, a managed engine still starting). The
loader runs past the request's deadline, up to ``cold_start_timeout_ms``, and is not
closed when its request moves on (``InflightStream.close`` spares it), so the load is
never cut off and done again. Other requests start no streams of their own meanwhile
but wait for it (within their own deadline). See docs/architecture.md.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Callable

from .inflight import InflightStream
from .request import Request

if TYPE_CHECKING:
    from ..metrics import Metrics


class ColdStart:
    """The running loader stream, if any."""

    def __init__(self) -> None:
        self.stream: InflightStream | None = None

    def mark(self, s: InflightStream) -> None:
        """``s`` is the loader (it was started while the backend was cold)."""
        s.loader = True
        self.stream = s

    def running(self) -> bool:
        return self.stream is not None and not self.stream.done

    def close(self) -> None:
        """Close the loader (a backend switch, shutdown)."""
        if self.stream is not None:
            self.stream.close(force=True)
            self.stream = None

    async def wait(self, req: Request, backend_cold: Callable[[], bool], metrics: Metrics) -> None:
        """While the backend is cold and a loader runs, wait until it has text or ends,
        or ``req`` is superseded (``sched.waited_for_loader``)."""
        while True:
            s = self.stream
            if s is None or s.done or s.first_text_at or not backend_cold() or req.superseded.is_set():
                return
            metrics.count("sched.waited_for_loader")
            changed = s.changed()
            sup = asyncio.ensure_future(req.superseded.wait())
            t = time.perf_counter()
            try:
                await asyncio.wait({changed, sup}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                req.waited_s += time.perf_counter() - t
                sup.cancel()
                if not changed.done():
                    changed.cancel()
