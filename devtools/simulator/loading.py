"""Model loads: a llama-server style load window and on-demand loads (Ollama, serverless
clouds). A part of :class:`.server.SimulatedBackend` (a mixin: it uses the server's
recorder, faults, latency model and state)."""

from __future__ import annotations

import asyncio
import logging
import time

logger = logging.getLogger(__name__)


class ModelLoading:
    """Model loads: a llama-server style load window and on-demand loads (Ollama, serverless clouds)."""

    def set_loading(self, seconds: float) -> None:
        """Simulate a model load lasting ``seconds`` (from now; ``0`` ends it).

        Meanwhile ``GET /health`` and ``POST /infill`` answer 503
        ``{"error": {"code": 503, "message": "Loading model", ...}}`` (as llama-server
        does), and ``POST /api/generate`` waits until the load ends before its TTFT (as
        Ollama does); the ``/v1`` endpoints are not affected.

        Raises:
            ValueError: if ``seconds`` is negative.
        """
        if not seconds >= 0:
            raise ValueError(f"seconds must be >= 0, got {seconds!r}")
        self._loading_until = time.monotonic() + seconds

    def set_load_on_demand(self, seconds: float) -> None:
        """Make the ``/v1`` generation endpoints and Ollama's ``/api/generate`` load the
        model on demand, as engines that load lazily do (Ollama, a serverless cloud
        deployment): the model is unloaded now;
        the first request starts a load of ``seconds``, and every request waits for it
        before sending any byte (no headers either). When every waiting request has
        disconnected before the load ends, the load is abandoned and the next request
        starts it again. ``loads_started`` and ``loads_completed`` count them; ``0``
        turns the mode off (model loaded).

        Raises:
            ValueError: if ``seconds`` is negative.
        """
        if not seconds >= 0:
            raise ValueError(f"seconds must be >= 0, got {seconds!r}")
        self._load_on_demand_s = seconds
        self._model_loaded = seconds == 0
        if self._load_task is not None:
            self._load_task.cancel()
            self._load_task = None

    async def _await_model_load(self) -> None:
        if self._load_task is None or self._load_task.done():
            self.loads_started += 1
            self._load_task = asyncio.ensure_future(asyncio.sleep(self._load_on_demand_s))
        task = self._load_task
        self._load_waiters += 1
        try:
            await asyncio.shield(task)
            if not self._model_loaded:
                self._model_loaded = True
                self.loads_completed += 1
        finally:
            self._load_waiters -= 1
            if not self._model_loaded and self._load_waiters == 0 and not task.done():
                task.cancel()  # nobody waits any more: the engine drops the load
                logger.info("simulated backend: model load abandoned (every waiting request left)")

    @property
    def loading_s(self) -> float:
        """Seconds of the simulated model load still to go (0 when loaded)."""
        return max(0.0, self._loading_until - time.monotonic())
