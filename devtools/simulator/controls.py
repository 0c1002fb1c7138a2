"""What a test sets: scripted outputs, a responder, the latency model, faults, rate limits
and a shared engine. A part of :class:`.server.SimulatedBackend` (a mixin: it uses the
server's recorder, faults, latency model and state)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .faults import Fault
from .latency import LatencyModel
from .ratelimits import RateLimiter
from .shared_engine import EngineConfig, SharedEngine

if TYPE_CHECKING:
    from .server import Responder


class Controls:
    """What a test sets: scripted outputs, a responder, the latency model, faults, rate limits and a shared engine."""

    def script(self, outputs: Iterable[str]) -> None:
        """Append output texts to the queue; each generation request takes the next one.

        Raises:
            TypeError: if an output is not a string.
        """
        items = list(outputs)
        for item in items:
            if not isinstance(item, str):
                raise TypeError(f"scripted outputs must be strings, got {type(item).__name__}")
        self._script.extend(items)

    @property
    def pending_outputs(self) -> int:
        """How many scripted outputs are still queued."""
        return len(self._script)

    def set_responder(self, responder: Responder | None) -> None:
        """Replace the responder (``body dict -> output text``; ``None`` removes it)."""
        self.responder = responder

    def set_latency(self, latency: LatencyModel) -> None:
        """Use ``latency`` for requests that arrive from now on."""
        self.latency = latency

    def inject(self, fault: Fault, persistent: bool = False) -> None:
        """Apply ``fault`` to the next matching request, or to all of them.

        One-shot faults form a queue: each request takes the first queued fault whose
        :meth:`Fault.applies_to` matches its path (by default the two generation paths).
        A persistent fault applies to every matching request until :meth:`clear_faults`;
        one-shot faults take priority, and among persistent faults the latest wins.
        """
        if persistent:
            self._persistent_faults.append(fault)
        else:
            self._faults.append(fault)

    def clear_faults(self) -> None:
        """Drop all queued and persistent faults."""
        self._faults.clear()
        self._persistent_faults.clear()

    def set_rate_limits(
        self,
        rpm: int | None = None,
        tpm: int | None = None,
        *,
        retry_after_s: float | None = None,
        send_retry_after: bool = True,
    ) -> None:
        """Limit the generation endpoints to ``rpm`` requests and ``tpm`` tokens per
        sliding minute (None: no limit; both None turns limits off), as a shared
        SiliconFlow key is. A request over a limit gets 429 with SiliconFlow's body naming
        it and a ``Retry-After`` header in seconds: ``retry_after_s`` when given, else the
        whole seconds until the window lets it through; ``send_retry_after=False`` sends
        no header. See :mod:`devtools.simulator.ratelimits`.

        Raises:
            ValueError: for a limit that is not a positive integer, a negative wait.
        """
        self.rate_limiter = RateLimiter(rpm, tpm, retry_after_s=retry_after_s, send_retry_after=send_retry_after)
        self._refused_base = 0

    def set_engine(self, config: EngineConfig | None) -> SharedEngine | None:
        """Pace the ``/v1`` generation endpoints by one :class:`SharedEngine` with
        ``config`` (a new engine: empty cache, fresh counters), or, with ``None``, by the
        latency model again. Returns the engine. The local-engine endpoints keep theirs."""
        self.engine = None if config is None else SharedEngine(config)
        self._refused_base = self.rate_limiter.refused
        return self.engine

    def reset_engine_counters(self) -> None:
        """Start the engine's counters (and its count of 429s) afresh now."""
        if self.engine is not None:
            self.engine.reset_counters()
        self._refused_base = self.rate_limiter.refused

    def engine_stats(self) -> dict[str, Any] | None:
        """The engine's counters (:meth:`SharedEngine.stats`) plus ``rate_limited``: the
        429s the rate limiter sent since they were reset, and ``rate_limits``. None
        without an engine."""
        if self.engine is None:
            return None
        return {
            **self.engine.stats(),
            "rate_limited": self.rate_limiter.refused - self._refused_base,
            "rate_limits": self.rate_limiter.to_dict(),
        }
