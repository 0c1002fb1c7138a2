"""In-flight upstream streams, and whether a newer request can use one.

A stream is anchored at the document text before and after the cursor when it started
(line breaks normalized to ``\\n``). A later request for the same document can use it
when its text after the cursor is unchanged and its text before the cursor is the anchor
plus ``typed``, where ``typed`` agrees with what the stream has produced: either the
stream's text starts with ``typed`` (the user typed what is shown) or ``typed`` starts
with the stream's text (the user typed ahead of the stream, which may still produce it).
The request is then answered with the rest of the stream's text after ``typed``.
The same test serves typing-through a finished suggestion (the stream is done).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Awaitable, Callable

from .context import CompletionContext
from .postprocess import StreamFilter, clean

log = logging.getLogger(__name__)


class InflightStream:
    """One upstream stream (a user's or a speculative prefetch): its anchor, the text so
    far, and a task that pumps it.

    ``run(pump)`` starts the task; ``pump(filt, on_delta)`` is the coroutine that feeds
    ``filt`` from the backend. ``changed`` is set on every new piece of text and at the
    end. ``close()`` cancels the task, which closes the HTTP response and its socket.
    """

    def __init__(self, uri: str, ctx: CompletionContext, doc_prefix: str, doc_suffix: str) -> None:
        self.uri = uri
        self.ctx = ctx
        self.doc_prefix = doc_prefix
        self.doc_suffix = doc_suffix
        self.filter = StreamFilter(ctx)
        self.started_at = time.perf_counter()
        self.first_text_at = 0.0
        self.done = False
        self.aborted = False
        self.failed = False
        self.outcome: str | None = None  # complete | partial | error | aborted | cached
        self.used = False  # a prefetch that answered a request
        self._waiters: list[asyncio.Future[None]] = []
        self.task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ text
    @property
    def text(self) -> str:
        """Model text so far, up to where the filter decided the completion ends."""
        return self.filter.raw_kept()

    def typed_since_anchor(self, doc_prefix: str, doc_suffix: str) -> str | None:
        """What the user typed after the anchor, or None when the document moved elsewhere."""
        if doc_suffix != self.doc_suffix or not doc_prefix.startswith(self.doc_prefix):
            return None
        return doc_prefix[len(self.doc_prefix):]

    def agrees(self, typed: str) -> bool:
        """True when ``typed`` is consistent with the stream (see module doc)."""
        produced = self.text
        if produced.startswith(typed):
            return True
        return not self.done and typed.startswith(produced)

    def remainder(self, typed: str, ctx: CompletionContext) -> str:
        """The cleaned suggestion that is left after ``typed``, for a request at ``ctx``."""
        produced = self.text
        if not produced.startswith(typed):
            return ""
        return clean(produced[len(typed):], ctx)

    # ------------------------------------------------------------------ task
    def run(self, pump: Callable[[StreamFilter, Callable[[], None]], Awaitable[str]],
            on_end: Callable[[InflightStream], None] | None = None) -> None:
        """Start pumping. ``pump`` returns ``complete``, ``partial`` (cut, deadline) or
        ``error``; ``on_end(self)`` runs once the stream is over, however it ended."""

        async def body() -> None:
            try:
                self.outcome = await pump(self.filter, self._on_delta)
                self.failed = self.outcome == "error"
            finally:
                self.done = True
                if self.outcome is None:
                    self.outcome = "aborted"
                self._wake()
                if on_end is not None:
                    try:
                        on_end(self)
                    except Exception:  # noqa: BLE001 - a cache problem must not break a stream
                        log.exception("stream end hook failed")

        self.task = asyncio.ensure_future(body())

    def _on_delta(self) -> None:
        if not self.first_text_at and self.filter.raw:
            self.first_text_at = time.perf_counter()
        self._wake()

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    def changed(self) -> asyncio.Future[None]:
        """A future resolved at the next piece of text or the end of the stream."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.done:
            fut.set_result(None)
        else:
            self._waiters.append(fut)
        return fut

    def close(self) -> bool:
        """Abort the stream if it is still running. Returns True when it was."""
        if self.done or self.task is None or self.task.done():
            return False
        self.aborted = True
        self.task.cancel()
        return True
