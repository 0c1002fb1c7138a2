"""The scheduler's state per document (``DocState``) and the set of them (``DocStates``):
created on the first event of a document, dropped (streams closed, request superseded)
when it closes, so nothing grows with documents that are gone. See docs/architecture.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from .debounce import Cadence

if TYPE_CHECKING:
    from ..metrics import Metrics
    from .inflight import InflightStream
    from .request import Request


class DocState:
    """The scheduler's state of one document: its typing cadence, its latest user stream
    and prefetch, its latest request and the task sending that request's updates."""

    def __init__(self) -> None:
        self.cadence = Cadence()
        self.stream: InflightStream | None = None
        self.prefetch: InflightStream | None = None
        self.latest: Request | None = None
        self.updates: asyncio.Task[None] | None = None


class DocStates:
    """``DocState`` by document URI (``by_uri``)."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self.by_uri: dict[str, DocState] = {}

    def get(self, uri: str) -> DocState:
        """The state of ``uri``, created on first use."""
        d = self.by_uri.get(uri)
        if d is None:
            d = self.by_uri[uri] = DocState()
        return d

    def close(self, uri: str, drop_prefetch: Callable[[DocState, str], None]) -> None:
        """Forget ``uri``: its latest request is superseded, its stream closed (a loader
        is spared: ``InflightStream.close``), its prefetch dropped."""
        d = self.by_uri.pop(uri, None)
        if d is None:
            return
        if d.latest is not None:
            d.latest.superseded.set()
        if d.stream is not None and d.stream.close():
            self.metrics.count("sched.streams_aborted")
        drop_prefetch(d, "closed")

    def close_all(self, drop_prefetch: Callable[[DocState, str], None]) -> None:
        """Close every document's streams, loaders included (a backend switch, shutdown)."""
        for uri in list(self.by_uri):
            d = self.by_uri.get(uri)
            if d is not None and d.stream is not None:
                d.stream.close(force=True)
            self.close(uri, drop_prefetch)

    def forget_finished(self) -> None:
        """Drop finished streams (a cache clear: nothing cached may answer again)."""
        for d in self.by_uri.values():
            if d.stream is not None and d.stream.done:
                d.stream = None

    def running(self) -> list[InflightStream]:
        """The documents' user streams that are still running."""
        return [d.stream for d in self.by_uri.values() if d.stream is not None and not d.stream.done]
