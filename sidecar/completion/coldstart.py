"""The cold-start gate: one model load at a time.

While no byte has come from the backend since it started or came back
(``Upstream.backend_cold()``), its first stream is a *loader*: it may be loading the
model (an engine that loads on the first request, a managed engine still starting). The
loader runs past the request's deadline, up to ``cold_start_timeout_ms``, and is not
closed when its request moves on (``InflightStream.close`` spares it), so the load is
never cut off and done again. Other requests start no streams of their own meanwhile
but wait for it (within their own deadline).

A cloud (an OpenAI-compatible URL, which does not say whether it loads models) gets the
same for its first stream while it has sent nothing (``Upstream.backend_silent()``): a
*waking* loader, since a serverless endpoint, or vLLM or Ollama behind a ``/v1`` URL,
may be loading its model. It runs in the background up to ``cold_start_timeout_ms``
and is spared from closes, but nobody waits for it: later requests send their own
streams as usual (a true stall must hold nothing). A request answered with nothing at
its deadline while it runs gets its suggestion as an update once the model answers
(``StreamLauncher.start_after_load``). See docs/architecture.md ("Cold backends").
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .inflight import InflightStream, StreamRole
from .request import Request

if TYPE_CHECKING:
    from ..metrics import Metrics


class ColdStart:
    """The running loader stream, if any."""

    def __init__(self) -> None:
        self.stream: InflightStream | None = None

    def mark(self, s: InflightStream, *, waking: bool = False) -> None:
        """``s`` is the loader (it was started while the backend was cold); ``waking``:
        a cloud's first stream (module doc)."""
        s.role = StreamRole.WAKING if waking else StreamRole.LOADER
        self.stream = s

    def running(self) -> bool:
        return self.stream is not None and not self.stream.done

    def loading(self) -> bool:
        """A loader runs and has no text yet (the model is still loading or waking)."""
        s = self.stream
        return s is not None and not s.done and not s.first_text_at

    def waking(self) -> bool:
        """A cloud's waking loader runs without text yet (module doc)."""
        return self.loading() and self.stream is not None and self.stream.waking

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
                either: list[asyncio.Future[Any]] = [changed, sup]
                await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            finally:
                req.waited_s += time.perf_counter() - t
                sup.cancel()
                if not changed.done():
                    changed.cancel()
