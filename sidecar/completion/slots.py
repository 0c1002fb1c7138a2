"""Upstream stream slots: at most ``max_concurrent_streams`` streams at once in the
process, user streams and speculative prefetches together (settings;
docs/configuration.md). A user stream that finds every slot taken makes the prefetches give
theirs up first (``Prefetcher.cancel_all``). See docs/architecture.md."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager


class StreamSlots:
    """A semaphore sized by the live setting (rebuilt when it changes) and the counts of
    running user streams and prefetches."""

    def __init__(self) -> None:
        self._sem: asyncio.Semaphore | None = None
        self._size = 0
        self.active_user = 0
        self.active_prefetch = 0

    def full(self, size: int) -> bool:
        """Every one of ``size`` slots is taken by a running stream."""
        return self.active_user + self.active_prefetch >= size

    @asynccontextmanager
    async def user(self, size: int, make_room: Callable[[], None]) -> AsyncIterator[None]:
        """Hold a slot for one user stream. When all ``size`` slots are taken,
        ``make_room()`` first (it cancels the prefetches: user requests come first), then
        wait for one."""
        if self.full(size):
            make_room()
        if self._sem is None or self._size != size:
            self._sem = asyncio.Semaphore(size)
            self._size = size
        async with self._sem:
            self.active_user += 1
            try:
                yield
            finally:
                self.active_user -= 1

    @asynccontextmanager
    async def prefetch(self) -> AsyncIterator[None]:
        """Count one running prefetch (prefetches are admitted by ``Prefetcher``'s own
        limits, never by waiting here)."""
        self.active_prefetch += 1
        try:
            yield
        finally:
            self.active_prefetch -= 1

    def snapshot(self) -> dict[str, int | None]:
        """``size``, running ``user`` streams and ``free`` permits, for ``sidecar.stats``."""
        return {"size": self._size, "user": self.active_user, "free": getattr(self._sem, "_value", None)}
