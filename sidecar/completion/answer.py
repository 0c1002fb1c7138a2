"""The answer policy: when a request that follows a stream is answered, and with what.

A request is answered as soon as the stream's first line is complete (the model wrote a
line break after some text, or the postprocessing filter ended the suggestion) with the
lines finished by then, or
``first_line_deadline_ms`` after the first text arrived with what is there (only for a
client that renders updates: the rest follows as ``sidecar/inlineCompletionUpdate``),
or at the end of the stream. A client that gets no updates is answered only with
finished lines, and with the whole suggestion where it may span lines: never a stub.
A superseded request is answered at once with what it has. See docs/architecture.md.
"""

from __future__ import annotations

import asyncio
import enum
import time
from typing import TYPE_CHECKING, Any, Literal

from .inflight import InflightStream
from .request import Answer, Request

if TYPE_CHECKING:
    from ..metrics import Metrics


class NoStream(enum.Enum):
    """Why a stream gave a request no answer of its own (neither an answer nor "nothing
    to show"): it stopped agreeing with what was typed (``DIVERGED``, from
    :func:`follow`), or there was none to use (``MISS``, from ``session.DocSession.reuse``)."""

    DIVERGED = "diverged"
    MISS = "miss"


async def follow(
    req: Request, s: InflightStream, typed: str, *, first_line_deadline_ms: float, metrics: Metrics
) -> Answer | None | Literal[NoStream.DIVERGED]:
    """Wait on ``s`` for ``req`` per the answer policy (module doc) and return the
    :class:`Answer` (None: nothing to show), or ``NoStream.DIVERGED`` once the stream stops
    agreeing with ``typed`` (what the user typed since the stream's anchor).
    ``first_line_deadline_ms`` counts from the stream's first text."""
    deadline_s = first_line_deadline_ms / 1000
    # A client without updates sees only what it is answered: finished lines, and
    # the whole suggestion where it may span lines (``Request.updates``).
    whole = not req.updates
    sup = asyncio.ensure_future(req.superseded.wait())
    try:
        while True:
            if req.superseded.is_set():
                rem = s.remainder(typed, req.ctx, finished_lines_only=whole)
                return Answer(rem, "superseded", s, typed) if rem else None
            if not s.agrees(typed):
                return NoStream.DIVERGED
            # What the stream has past ``typed``: its answer, and past the answer's end its
            # lookahead (a request after an accept or Enter types into it).
            reach = s.reach
            produced = reach[len(typed) :] if reach.startswith(typed) else ""
            if s.done:
                rem = s.remainder(typed, req.ctx)
                return Answer(rem, "stream" if not typed else "joined", s, typed) if rem else None
            if s.filter.done or ("\n" in produced.lstrip("\n") and not (whole and s.ctx.multiline)):
                # The first line is complete: answer with the finished lines (a line the
                # model is still writing follows as an update, or is asked for again).
                rem = s.remainder(typed, req.ctx, finished_lines_only=True)
                if rem:
                    return Answer(rem, "stream" if not typed else "joined", s, typed)
            timeout = None
            if s.first_text_at and produced.strip() and req.updates:
                left = s.first_text_at + deadline_s - time.perf_counter()
                if left <= 0:
                    rem = s.remainder(typed, req.ctx)
                    if rem:
                        metrics.count("sched.answered_at_deadline")
                        return Answer(rem, "stream" if not typed else "joined", s, typed)
                else:
                    timeout = left
            changed = s.changed()
            t = time.perf_counter()
            either: list[asyncio.Future[Any]] = [changed, sup]
            await asyncio.wait(either, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            req.waited_s += time.perf_counter() - t
            if not changed.done():
                changed.cancel()
    finally:
        sup.cancel()
