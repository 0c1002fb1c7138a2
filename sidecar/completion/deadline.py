"""The request deadline and cancellation: every request is answered within
``request_timeout_ms`` of its arrival, and a cancelled one closes its stream unless a
newer request may still join it.

- **Deadline** (``request_deadline``, ``answer_at_deadline``): counted from the
  request's arrival (``Request.t0``, set by the LSP handler before it read the document
  and cut the windows). At the deadline the request gets what its stream has
  (``answer.at_deadline``); a stream that is still useful runs on and the request gets
  updates: a loader still loading the model (a cloud's waking first stream included,
  ``coldstart.py``), a stream with text, or a local engine still evaluating the prompt (*kept*: the evaluation outlives the request, ``inflight.py``). A
  stalled one is closed so that it frees its slot. A request that waited for another
  document's model load gets its own stream once the model is loaded.
- **Cancel** (``on_cancel``): editors cancel the old request just before sending the new
  one (VS Code does), and the new one may join the old one's stream: it is closed only
  if no newer request came within ``CANCEL_GRACE_S``.

See docs/architecture.md ("Cold backends", "Long prompts on a warm local engine").
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from .answer import at_deadline
from .request import Answer, Request, Upstream

if TYPE_CHECKING:
    from ..metrics import Metrics
    from .docstate import DocState
    from .inflight import InflightStream
    from .launch import StreamLauncher

# How long the stream of a cancelled request waits for a newer request that may join it
# (s). Keeps "closed within 50 ms of the cancel" with room for the close itself.
CANCEL_GRACE_S = 0.025


def request_deadline(req: Request, request_timeout_ms: float) -> float:
    """The event loop time by which ``req`` is answered."""
    left_s = request_timeout_ms / 1000 - (time.perf_counter() - req.t0)
    return asyncio.get_running_loop().time() + max(0.0, left_s)


def answer_at_deadline(
    doc: DocState, req: Request, up: Upstream, streams: StreamLauncher, metrics: Metrics
) -> Answer | None:
    """The answer of a request whose deadline passed: what its stream has. A stream
    that is still useful keeps running and the request gets updates; a stalled one is
    closed (module doc)."""
    metrics.count("sched.request_deadline")
    if doc.latest is not req or req.superseded.is_set():
        return None
    s = doc.stream
    if (s is None or s.done) and (up.backend_cold() or streams.cold.waking()):
        if streams.cold.running():
            # It waited for another document's model load all along: its own stream
            # starts once the model is loaded, its suggestion following as an update.
            streams.start_after_load(doc, req)
            return None
        # The deadline ran out before any stream started (a slow first request: the
        # cache opening, the debounce) while the backend is cold: start the load
        # anyway, so the suggestion follows as an update instead of never.
        s = streams.start(doc, req)
        streams.start_updates(doc, req, Answer("", "deadline", s, ""))
        return None
    if s is None or s.done:
        return None
    answer, keep = at_deadline(req, s, metrics)
    if not keep:
        closed = s.close()
        if closed:
            metrics.count("sched.streams_aborted")
        if (not closed and s.loader and not s.done) or (closed and streams.cold.waking()):
            # The document's loader, for a place the user has left: spared (the model
            # load goes on); or this request's own stream, silent while a cloud's model
            # wakes: this request's suggestion follows once the model answers.
            streams.start_after_load(doc, req)
    elif answer is not None and not answer.text:  # loading the model, or evaluating the prompt
        if s.local and not s.loader and not s.kept:
            s.kept = True  # the prompt's evaluation outlives the request (inflight.py)
            metrics.count("sched.prefill_kept")
        if req.updates:
            streams.start_updates(doc, req, answer)
        return None
    return answer


def on_cancel(doc: DocState, req: Request, metrics: Metrics) -> None:
    """``req`` was cancelled: close its running stream after ``CANCEL_GRACE_S`` unless a
    newer request came meanwhile (module doc)."""
    metrics.count("sched.cancelled")
    if doc.latest is req and doc.stream is not None and not doc.stream.done:
        asyncio.get_running_loop().call_later(CANCEL_GRACE_S, _close_if_orphaned, doc, req, doc.stream, metrics)


def _close_if_orphaned(doc: DocState, req: Request, s: InflightStream, metrics: Metrics) -> None:
    if doc.latest is req and s.close():
        metrics.count("sched.streams_aborted")
