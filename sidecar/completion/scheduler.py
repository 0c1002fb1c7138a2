"""Keystroke scheduling, in the order a request meets it (``Scheduler._schedule``):

1. **Supersede**: the document's previous request is answered at once with what it has.
2. **Reuse** (``reuse.py``, ``Prefetcher.adopt``): a speculation that came true, the
   running stream the user is typing into, a finished one being typed through; a stream
   that no longer agrees is closed at once.
3. **Cache** (``cache/``), 4. **debounce** (``debounce.py``), then the cold-start gate
   (``coldstart.py``: one model load at a time).
5. **Stream** (one per document, at most ``max_concurrent_streams``: ``slots.py``) and
   **answer** per the answer policy (``answer.py``).
6. **Update** (``updates.py``) while the stream runs; then speculate (``prefetch.py``).

Every request is answered within ``request_timeout_ms`` of its arrival (``_at_deadline``);
a stream still loading the model, or still evaluating its prompt on a local engine, runs
on past that deadline (the request then gets updates, and a later one joins it); a
cancelled one closes its stream unless a newer request joins it within
``CANCEL_GRACE_S``. docs/architecture.md has the reasons.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from typing import Any

from ..observability.logs import new_trace_id
from .acceptance import Acceptance
from .answer import DIVERGED, at_deadline, follow
from .context import CompletionContext
from .debounce import ceiling_ms, debounce_ms, superseded_within
from .inflight import InflightStream
from .coldstart import ColdStart
from .postprocess import StreamFilter
from .prefetch import Prefetcher
from .docstate import DocState, DocStates
from .request import Answer, Request, Upstream
from .reuse import MISS, from_cache, reuse_stream, store_stream
from .slots import StreamSlots
from .updates import UpdateSink, send_updates, speculate_when_done

log = logging.getLogger(__name__)


# How long the stream of a cancelled request waits for a newer request that may join it
# (s). Keeps "closed within 50 ms of the cancel" with room for the close itself.
CANCEL_GRACE_S = 0.025


class Scheduler:
    """Per-document scheduling on top of an :class:`Upstream` (see the module doc).

    ``on_update(req, text, done, seq)`` sends one update notification; ``metrics`` has
    ``count``/``observe``; ``cache`` (a ``CompletionCache`` or None) is asked before
    going upstream and receives every stream's text at its end, under
    ``upstream.cache_key(ctx)``. Speculative prefetch is the :class:`Prefetcher`'s.
    """

    def __init__(self, upstream: Upstream, *, on_update: UpdateSink, metrics, cache=None) -> None:
        self.up = upstream
        self._cache = cache
        self._on_update = on_update
        self.metrics = metrics
        self.cold = ColdStart()
        self._after_load: set[asyncio.Task[None]] = set()  # streams to start once a model is loaded
        self.docs = DocStates(metrics)
        self._ids = itertools.count(1)
        self.slots = StreamSlots()
        self.acceptance = Acceptance(metrics)
        self.prefetch = Prefetcher(upstream, self.docs.by_uri, self.slots, metrics, cache, self._stream_ended)

    # ------------------------------------------------------------------ document events
    def keystroke(self, uri: str) -> None:
        """Record a change of ``uri`` for the typing-cadence estimate."""
        self.docs.get(uri).cadence.keystroke(time.monotonic() * 1000)

    def close_document(self, uri: str) -> None:
        """``uri`` was closed: its request is superseded, its streams close."""
        self.docs.close(uri, self.prefetch.drop)

    def forget_streams(self) -> None:
        """Drop finished streams, so nothing cached survives a cache clear."""
        self.docs.forget_finished()

    def close_all(self) -> None:
        """Close every running stream (a backend switch or shutdown), loaders included."""
        self.docs.close_all(self.prefetch.drop)
        self.cold.close()
        for t in list(self._after_load):
            t.cancel()

    def active_streams(self) -> int:
        return len(self.docs.running())

    # ------------------------------------------------------------------ requests
    async def request(self, req: Request) -> Answer | None:
        """Schedule ``req`` and return its answer, or None when there is nothing to show.

        Raises ``asyncio.CancelledError`` when the LSP request is cancelled; its stream is
        closed first unless a newer request uses it.
        """
        req.id = next(self._ids)
        req.trace_id = new_trace_id()  # follows this completion into every task it starts
        doc = self.docs.get(req.uri)
        self.metrics.count("sched.requests")
        prev = doc.latest
        doc.latest = req
        if prev is not None and not prev.finished:
            prev.superseded.set()
            self.metrics.count("sched.superseded")
        # The deadline counts from the request's arrival (``req.t0``, set by the LSP handler
        # before it read the document and cut the windows), not from here.
        left_s = self.up.settings.request_timeout_ms / 1000 - (time.perf_counter() - req.t0)
        deadline = asyncio.get_running_loop().time() + max(0.0, left_s)
        try:
            try:
                async with asyncio.timeout_at(deadline):
                    answer = await self._schedule(doc, req)
            except TimeoutError:
                answer = self._at_deadline(doc, req)
        except asyncio.CancelledError:
            self.metrics.count("sched.cancelled")
            if doc.latest is req and doc.stream is not None and not doc.stream.done:
                # Editors cancel the old request just before sending the new one (VS Code
                # does), and the new one may join this stream: close it only if no newer
                # request has come within the grace period.
                asyncio.get_running_loop().call_later(
                    CANCEL_GRACE_S, self._close_if_orphaned, doc, req, doc.stream
                )
            raise
        finally:
            req.finished = True
        if answer is not None and doc.latest is req:
            if answer.stream is not None and not answer.stream.done:
                if req.updates:
                    self._start_updates(doc, req, answer)
                else:  # no updates to send: speculate once the stream is over
                    doc.updates = asyncio.ensure_future(speculate_when_done(doc, req, answer, self._speculate_accept))
            else:  # after the answer is on its way: speculation is not on the keystroke path
                asyncio.get_running_loop().call_soon(self._speculate_accept, req, answer.text)
        return answer

    def _at_deadline(self, doc: DocState, req: Request) -> Answer | None:
        """The answer of a request whose deadline passed: what its stream has. A stream
        that is still useful (a loader, or one with text) keeps running and the request
        gets updates; a stalled one is closed so that it frees its slot."""
        self.metrics.count("sched.request_deadline")
        if doc.latest is not req or req.superseded.is_set():
            return None
        s = doc.stream
        if (s is None or s.done) and self.up.backend_cold():
            if self.cold.running():
                # It waited for another document's model load all along: its own stream
                # starts once the model is loaded, its suggestion following as an update.
                self._start_after_load(doc, req)
                return None
            # The deadline ran out before any stream started (a slow first request: the
            # cache opening, the debounce) while the backend is cold: start the load
            # anyway, so the suggestion follows as an update instead of never.
            s = self._start_stream(doc, req)
            self._start_updates(doc, req, Answer("", "deadline", s, ""))
            return None
        if s is None or s.done:
            return None
        answer, keep = at_deadline(req, s, self.metrics)
        if not keep:
            if s.close():
                self.metrics.count("sched.streams_aborted")
            elif s.loader and not s.done:
                # The document's loader, for a place the user has left: spared (the model
                # load goes on); this request's own stream starts once it is loaded.
                self._start_after_load(doc, req)
        elif answer is not None and not answer.text:  # loading the model, or evaluating the prompt
            if s.local and not s.loader and not s.kept:
                s.kept = True  # the prompt's evaluation outlives the request (inflight.py)
                self.metrics.count("sched.prefill_kept")
            if req.updates:
                self._start_updates(doc, req, answer)
            return None
        return answer

    async def _schedule(self, doc: DocState, req: Request) -> Answer | None:
        # 2. Reuse: a speculation that came true, the running stream, a finished one.
        got = self.prefetch.adopt(doc, req)
        if got is not None:
            return got
        got = await reuse_stream(doc, req, ttft_ms=self.up.recent_ttft_ms(), metrics=self.metrics,
                                 first_line_deadline_ms=self.up.settings.first_line_deadline_ms)
        if got is not MISS:
            return got  # type: ignore[return-value]
        # 3. Cache.
        if self._cache is not None:
            got = await from_cache(self._cache, self.up.cache_key(req.ctx), req, self.metrics)
            if got is not None or req.superseded.is_set():
                return got
        # 4. Debounce.
        st = self.up.settings
        wait = debounce_ms(
            invoked=req.invoked, cadence_ms=doc.cadence.interval_ms(),
            line_prefix=req.ctx.line_prefix, line_suffix=req.ctx.line_suffix,
            ttft_ms=self.up.recent_ttft_ms(), floor_ms=st.debounce_min_ms,
            ceiling_ms=max(st.debounce_min_ms, ceiling_ms(st.debounce_max_ms, self.up.local_backend())),
        )
        self.metrics.observe("debounce", wait)
        if wait > 0 and await superseded_within(req, wait / 1000):
            return None
        if req.superseded.is_set():
            return None
        await self.cold.wait(req, self.up.backend_cold, self.metrics)
        if req.superseded.is_set():
            return None

        # 5. Stream, and answer per the answer policy (6. updates follow in ``request``).
        s = self._start_stream(doc, req)
        got = await follow(req, s, "", first_line_deadline_ms=self.up.settings.first_line_deadline_ms, metrics=self.metrics)
        return None if got is DIVERGED else got  # type: ignore[return-value]

    def _start_after_load(self, doc: DocState, req: Request) -> None:
        """Once the running model load has its first text (or ends), start ``req``'s own
        stream if ``req`` is still its document's latest request and no running stream
        of the document agrees with it; its suggestion goes out as updates."""

        async def later() -> None:
            await self.cold.wait(req, self.up.backend_cold, self.metrics)
            if doc.latest is not req or req.superseded.is_set():
                return
            s = doc.stream
            if s is not None and not s.done:
                typed = s.typed_since_anchor(req.doc_prefix, req.doc_suffix)
                if typed is not None and s.agrees(typed):
                    return  # the load's own stream serves this request (typed through)
                s.close()
            self.metrics.count("sched.started_after_load")
            s = self._start_stream(doc, req)
            if req.updates:
                self._start_updates(doc, req, Answer("", "deadline", s, ""))

        task = asyncio.ensure_future(later())
        self._after_load.add(task)
        task.add_done_callback(self._after_load.discard)

    def _start_stream(self, doc: DocState, req: Request) -> InflightStream:
        """Start the upstream stream for ``req`` (a loader when the backend is cold)."""
        s = InflightStream(req.uri, req.ctx, req.doc_prefix, req.doc_suffix)
        s.local = self.up.local_backend()
        # A prompt evaluation kept past its request's deadline in another document gives
        # way to the stream a user waits for now.
        for other in self.docs.by_uri.values():
            o = other.stream
            if other is not doc and o is not None and o.kept and not o.first_text_at and o.close():
                self.metrics.count("sched.prefill_kept_closed")
        if self.up.backend_cold():
            self.cold.mark(s)
            self.metrics.count("sched.loader_streams")
        doc.stream = s
        self.metrics.count("sched.streams_started")
        s.run(lambda filt, on_delta: self._run_pump(req.ctx, filt, on_delta), self._stream_ended)
        return s

    def shown(self, item_id: str, req: Request, text: str) -> None:
        self.acceptance.shown(item_id, req, text)  # an accept can be traced back

    def _speculate_accept(self, req: Request, text: str) -> None:
        if text:  # the completion that follows accepting what was shown
            self.prefetch.speculate(req.uri, req.doc_prefix + text, req.doc_suffix, req.ctx.language, "after_shown")

    def _close_if_orphaned(self, doc: DocState, req: Request, s: InflightStream) -> None:
        if doc.latest is req and s.close():
            self.metrics.count("sched.streams_aborted")

    def _stream_ended(self, s: InflightStream) -> None:
        if s.aborted:
            self.metrics.count("sched.streams_ended.aborted")
        if self._cache is not None:
            store_stream(self._cache, self.up.cache_key(s.ctx), s, self.metrics)

    async def _run_pump(self, ctx: CompletionContext, filt: StreamFilter, on_delta) -> str:
        async with self.slots.user(self.up.settings.max_concurrent_streams, self.prefetch.cancel_all):
            return await self.up.pump(ctx, filt, on_delta)

    def _start_updates(self, doc: DocState, req: Request, answer: Answer) -> None:
        if doc.updates is not None and not doc.updates.done():
            doc.updates.cancel()
        doc.updates = asyncio.ensure_future(
            send_updates(doc, req, answer, self._on_update, self.metrics, self._speculate_accept))

    def snapshot(self) -> dict[str, Any]:
        """Runtime figures for ``sidecar.stats``: documents, running streams (with where
        each waits, for a stream that does not end), slots, prefetches."""
        running = self.docs.running()
        return {
            "documents": len(self.docs.by_uri),
            "active_streams": len(running),
            "active_stream_info": [s.diagnostics() for s in running[:8]],
            "stream_slots": self.slots.snapshot(),
            "active_prefetches": self.slots.active_prefetch,
        }
