"""What the user hears about upstream problems: one message per cause.

- An error the user must act on (a bad key, a model not found, rate limits, ...) goes to
  ``on_error`` (the server's ``window/showMessage``) once, and again only after the
  cause has been absent for ``ERROR_QUIET_S`` seconds, so an intermittent 429 does not
  pop up on every other keystroke.
- A notice that needs no action (a managed engine that died is restarted on its own)
  goes to ``on_log`` (``window/logMessage``), once per message per ``ERROR_QUIET_S``.
- Slowness: when the p90 TTFT of the last 20 streams passes ``latency_warn_ms``, one
  message (then at most every ``LATENCY_WARN_EVERY_S``) names the likely cause: the
  network (response headers were slow too) or the model.

Every error is counted (``errors.<kind>``). See docs/architecture.md.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..backends.errors import BackendError
from ..providers import is_local

if TYPE_CHECKING:
    from ..backends.base import Backend, StreamInfo
    from ..metrics import Metrics

log = logging.getLogger(__name__)

ERROR_QUIET_S = 60.0
LATENCY_WARN_EVERY_S = 600.0


class Reports:
    """Error and slowness reporting for one service (see the module doc)."""

    def __init__(
        self,
        metrics: Metrics,
        *,
        on_error: Callable[[BackendError], None],
        on_log: Callable[[str], None],
        on_slow: Callable[[], None],
        warn_ms: Callable[[], float],
    ) -> None:
        self.metrics = metrics
        self._on_error = on_error
        self._on_log = on_log
        self._on_slow = on_slow
        self._warn_ms = warn_ms
        self._error_seen: dict[str, float] = {}  # cause -> monotonic time last seen
        self._logged: dict[str, float] = {}  # notice -> monotonic time last sent to the log channel
        self._latency_warned_at = -1e9

    def reset(self) -> None:
        """Forget which causes were shown (new settings: the user may have fixed them)."""
        self._error_seen.clear()

    def error(self, err: BackendError) -> None:
        """Count an upstream error and tell the user once per cause (module doc)."""
        self.metrics.count(f"errors.{err.kind}")
        log.warning("upstream error (%s): %s", err.kind, err.message)
        now = time.monotonic()
        if not err.actionable:
            # Every request waiting on one engine start gets the same error: one line.
            if now - self._logged.get(err.message, -1e9) > ERROR_QUIET_S:
                self._logged[err.message] = now
                while len(self._logged) > 64:
                    self._logged.pop(next(iter(self._logged)))
                self._on_log(err.message)
            return
        last = self._error_seen.get(err.kind)
        self._error_seen[err.kind] = now
        if last is None or now - last > ERROR_QUIET_S:
            self._on_error(err)

    def latency(self, info: StreamInfo, target: Backend, recent_ttft_ms: list[float]) -> None:
        """Warn when the p90 of ``recent_ttft_ms`` (at least 5) passes ``latency_warn_ms``,
        naming the likely cause from ``info`` (the last stream's ``StreamInfo``) and
        ``target`` (its backend)."""
        xs = recent_ttft_ms
        if len(xs) < 5:
            return
        p90 = sorted(xs)[int(0.9 * (len(xs) - 1))]
        now = time.monotonic()
        if p90 < self._warn_ms() or now - self._latency_warned_at < LATENCY_WARN_EVERY_S:
            return
        self._latency_warned_at = now
        headers_ms = (info.headers_at - info.sent_at) * 1000 if info.headers_at else None
        if headers_ms is not None and headers_ms > 0.5 * (info.ttft_ms or 0):
            cause = (
                f"the connection is slow (response headers took {headers_ms:.0f} ms): check the network, "
                f"a proxy, or the region (SiliconFlow .cn vs .com)"
            )
        else:
            fix = (
                "a smaller model, or a GPU (local_n_gpu_layers)"
                if is_local(target.provider)
                else "a smaller model or local mode"
            )
            cause = f"{target.name} is slow to start generating ({target.model}); try {fix}"
        self.metrics.count("latency_warnings")
        self._on_slow()
        self._on_error(
            BackendError(
                "slow",
                f"completions are slow: p90 time to first token {p90:.0f} ms over the last "
                f"{len(xs)} requests; likely cause: {cause}. Run `sidecar doctor` for details.",
            )
        )
