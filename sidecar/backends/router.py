"""Mode ``auto``: the local engine while it is healthy, the cloud otherwise.

A circuit breaker watches the local side. It starts on the cloud until the local engine
is ready (a cold model load is never waited for in ``auto``). Two local failures in a row
of the kinds that mean "the engine is not there" (connection refused, engine exit, a
timeout, overload) open the breaker: requests go to the cloud for ``cooldown_s`` (30 s,
doubling up to 5 min while the engine keeps failing). Then one request tries the local
engine again (half-open); a success closes the breaker. Each switch is reported once
through ``on_switch(side, reason)``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from .base import Backend, BackendBase
from .errors import CONNECTION, ENGINE, OVERLOADED, TIMEOUT, BackendError

if TYPE_CHECKING:
    from .managed_engine import ManagedEngine
    from .ratelimit import CoolDown

log = logging.getLogger(__name__)

_LOCAL_DOWN = {CONNECTION, ENGINE, TIMEOUT, OVERLOADED}
FAILURES_TO_OPEN = 2
COOLDOWN_S = 30.0
MAX_COOLDOWN_S = 300.0


class RouterBackend(BackendBase):
    """Routes each stream to ``local`` or ``cloud``; see the module doc."""

    def __init__(
        self,
        local: Backend,
        cloud: Backend,
        on_switch: Callable[[str, str], None] | None = None,
        cooldown_s: float = COOLDOWN_S,
    ) -> None:
        super().__init__()
        self.local = local
        self.cloud = cloud
        self._on_switch = on_switch or (lambda _side, _why: None)
        self._failures = 0
        self._open_until = 0.0
        self._base_cooldown = cooldown_s
        self._cooldown = cooldown_s
        self._local_ready = False
        self._side = "cloud"
        self._ready_task: asyncio.Task[None] | None = None
        #: Told about each failed start of the local side (the service reports it):
        #: ``on_local_error`` (from BackendBase).

    # The attributes other code reads describe the side in use now.
    @property
    def current(self) -> Backend:
        return self.pick()

    @property
    def name(self) -> str:
        return f"auto: {self.current.name}"

    @property
    def provider(self) -> str:
        return self.current.provider

    @property
    def model(self) -> str:
        return self.current.model

    @property
    def api(self) -> str:
        return self.current.api

    @property
    def engine(self) -> ManagedEngine | None:
        return self.local.engine

    @property
    def base_url(self) -> str:
        return self.current.base_url

    @property
    def cooldown(self) -> CoolDown | None:
        return self.current.cooldown

    @property
    def ready(self) -> bool:
        return self.current.ready

    def all_backends(self) -> tuple[Backend, ...]:
        return (self, self.local, self.cloud)

    def idle_for_s(self) -> float:
        return self.current.idle_for_s()

    def has_idle_connection(self) -> bool:
        return self.current.has_idle_connection()

    def busy_connections(self) -> int | None:
        return self.current.busy_connections()

    def pick(self) -> Backend:
        """The backend for the next stream."""
        now = time.monotonic()
        alive = self.local.ready  # a managed engine knows if its process lives
        if self._local_ready and not alive and (self._ready_task is None or self._ready_task.done()):
            self._local_ready = False  # it died: bring it back in the background, use the cloud
            self._ready_task = asyncio.ensure_future(self._watch_local())
        side = "local" if self._local_ready and alive and now >= self._open_until else "cloud"
        if side != self._side:
            self._side = side
            why = "the local engine is ready" if side == "local" else "the local engine is unavailable"
            log.info("auto mode: switching to %s (%s)", side, why)
            self._on_switch(side, why)
        return self.local if side == "local" else self.cloud

    def record(self, target: Backend, error: BackendError | None) -> None:
        """Feed the breaker with the outcome of a stream on ``target``."""
        if target is not self.local:
            return
        if error is None:
            self._failures = 0
            self._cooldown = self._base_cooldown
            return
        if error.kind not in _LOCAL_DOWN:
            return
        self._failures += 1
        if self._failures >= FAILURES_TO_OPEN or time.monotonic() < self._open_until + 1:
            self._open_until = time.monotonic() + self._cooldown
            self._cooldown = min(MAX_COOLDOWN_S, self._cooldown * 2)
            self._failures = 0
            self.pick()

    async def _watch_local(self) -> None:
        """Bring the local side up in the background. A failed start is reported through
        ``on_local_error`` (a permanent one as a message the user must act on, a transient
        one as a notice) and tried again after the cooldown (30 s, doubling up to 5 min)
        until it works or fails permanently; meanwhile requests go to the cloud."""
        delay = self._base_cooldown
        while True:
            try:
                await self.local.ensure_ready()
            except BackendError as err:
                log.warning("auto mode: local engine not available: %s", err.message)
                self.on_local_error(err)
                if err.permanent:
                    return
                await asyncio.sleep(delay)
                delay = min(MAX_COOLDOWN_S, delay * 2)
                continue
            break
        self._local_ready = True
        self.pick()

    async def ensure_ready(self) -> None:
        if self._ready_task is None:
            self._ready_task = asyncio.ensure_future(self._watch_local())
        await self.cloud.ensure_ready()

    async def prewarm(self) -> None:
        if self._ready_task is None:
            self._ready_task = asyncio.ensure_future(self._watch_local())
        await asyncio.gather(self.local.prewarm(), self.cloud.prewarm())

    def stream(self, req, info):  # pragma: no cover - the service streams on pick()
        return self.pick().stream(req, info)

    async def aclose(self) -> None:
        if self._ready_task is not None:
            self._ready_task.cancel()
        await asyncio.gather(self.local.aclose(), self.cloud.aclose())
