"""Starting a document's user stream, and what follows its answer (steps 5 and 7 of
``scheduler.py``).

- **Start** (``StreamLauncher.start``): one stream per document (the session closed
  the document's previous one, or it joined it), within the stream slots
  (``slots.py``; a user stream that finds none free cancels the prefetches first); a
  *loader* while the backend is cold (``coldstart.py``); a prompt evaluation kept past
  its request's deadline in another document gives way to it
  (``session.DocSessions.give_way``).
- **After a model load** (``StreamLauncher.start_after_load``): a request that waited
  for another place's load gets its own stream once the model is loaded.
- **After the answer** (``StreamLauncher.after_answer``): a stream still running sends
  the request's updates (``updates.py``), for a client that renders them; then the
  completion that follows accepting the suggestion is speculated (``prefetch.py``).

Which streams this module closes, and why, is listed in ``session.py`` ("When a stream
dies"). See docs/architecture.md ("Cold backends").
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from .coldstart import ColdStart
from .inflight import InflightStream, StreamEnd
from .request import Answer, Request, Upstream
from .updates import UpdateSink, send_updates, speculate_when_done

if TYPE_CHECKING:
    from ..metrics import Metrics
    from .context import CompletionContext
    from .postprocess import StreamFilter
    from .prefetch import Prefetcher
    from .session import DocSession, DocSessions
    from .slots import StreamSlots


class StreamLauncher:
    """Starts the user streams of the scheduler's documents (module doc). ``on_end(s)``
    runs when a stream ends (the scheduler stores its text in the cache)."""

    def __init__(
        self,
        upstream: Upstream,
        docs: DocSessions,
        slots: StreamSlots,
        prefetch: Prefetcher,
        metrics: Metrics,
        *,
        on_update: UpdateSink,
        on_end: Callable[[InflightStream], None],
    ) -> None:
        self.upstream = upstream
        self.docs = docs
        self.slots = slots
        self.prefetch = prefetch
        self.metrics = metrics
        self._on_update = on_update
        self._on_end = on_end
        self.cold = ColdStart()
        #: ``judge_for(req, answer)``: the confidence gate's judge of the first text of a
        #: request answered with nothing (``send_updates``), or None when the gate is off;
        #: the scheduler sets it.
        self.judge_for: Callable[[Request, Answer], Callable[[str, bool], bool] | None] = lambda _r, _a: None
        self._after_load: set[asyncio.Task[None]] = set()  # streams to start once a model is loaded

    def start(self, doc: DocSession, req: Request) -> InflightStream:
        """Start the upstream stream for ``req`` (a loader when the backend is cold)."""
        st = self.upstream.settings
        s = InflightStream(
            req.uri, req.ctx, req.doc_prefix, req.doc_suffix, st.confidence_cut_logprob or None, st.lookahead_lines
        )
        s.local = self.upstream.local_backend()
        self.docs.give_way(doc)
        if self.upstream.backend_cold():
            self.cold.mark(s)
            self.metrics.count("sched.loader_streams")
        elif not s.local and not self.cold.running() and self.upstream.backend_silent():
            # A cloud that has sent nothing yet: its model may be waking (coldstart.py).
            self.cold.mark(s, waking=True)
            self.metrics.count("sched.waking_streams")
            self._keep(self._close_when_unwanted(s))
        doc.stream = s
        self.metrics.count("sched.streams_started")
        s.run(lambda filt, on_delta: self._run_in_slot(req.ctx, filt, on_delta, s.waking), self._on_end)
        return s

    async def _run_in_slot(
        self, ctx: CompletionContext, filt: StreamFilter, on_delta: Callable[[], None], waking: bool
    ) -> StreamEnd:
        async with self.slots.user(self.upstream.settings.max_concurrent_streams, self.prefetch.cancel_all):
            return await self.upstream.run_stream(ctx, filt, on_delta, waking=waking)

    def start_after_load(self, doc: DocSession, req: Request) -> None:
        """Once the running model load has its first text (or ends), start ``req``'s own
        stream if ``req`` is still its document's latest request and no running stream
        of the document agrees with it (the loader included: its text then goes out for
        ``req``); its suggestion goes out as updates."""

        async def later() -> None:
            await self.cold.wait(req, lambda: self.upstream.backend_cold() or self.cold.waking(), self.metrics)
            if doc.latest is not req or req.superseded.is_set():
                return
            loader = self.cold.stream
            if loader is not None and loader is not doc.stream and loader.uri == req.uri:
                typed = loader.match(req.doc_prefix, req.doc_suffix)
                if typed is not None and (loader.remainder(typed, req.ctx) or not loader.done):
                    self.metrics.count("sched.loader_adopted")
                    if doc.stream is not None:
                        doc.stream.close()
                    doc.stream = loader  # the load's own text goes to the request shown now
                    if req.updates:
                        self.start_updates(doc, req, Answer("", "deadline", loader, typed))
                    return
                if not loader.done and loader.first_text_at and loader.close():
                    self.metrics.count("sched.streams_aborted")  # loaded, for a place the user left
            s = doc.stream
            if s is not None and not s.done:
                if s.match(req.doc_prefix, req.doc_suffix) is not None:
                    return  # the load's own stream serves this request (typed through)
                s.close()
            self.metrics.count("sched.started_after_load")
            s = self.start(doc, req)
            if req.updates:
                self.start_updates(doc, req, Answer("", "deadline", s, ""))

        self._keep(later())

    def _keep(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._after_load.add(task)
        task.add_done_callback(self._after_load.discard)

    async def _close_when_unwanted(self, s: InflightStream) -> None:
        """A cloud's waking loader that has its first text, for a place its document has
        left (no request adopted it: ``start_after_load``): closed, so that a model that
        answers after all costs no whole completion nobody sees."""
        while not s.done and not s.first_text_at:
            await s.changed()
        await asyncio.sleep(0.05)  # a request waiting for the load adopts it first
        doc = self.docs.by_uri.get(s.uri)
        if not s.done and (doc is None or doc.stream is not s) and s.close():
            self.metrics.count("sched.streams_aborted")

    def after_answer(
        self, doc: DocSession, req: Request, answer: Answer, judge: Callable[[str, bool], bool] | None = None
    ) -> None:
        """``req`` (its document's latest) was answered with ``answer``: updates while its
        stream runs, then speculation (module doc). ``judge``: see ``send_updates``."""
        if answer.stream is not None and not answer.stream.done:
            if req.updates:
                self.start_updates(doc, req, answer, judge)
            else:  # no updates to send: speculate once the stream is over
                doc.updates = asyncio.ensure_future(speculate_when_done(doc, req, answer, self.speculate_accept))
        else:  # after the answer is on its way: speculation is not on the keystroke path
            asyncio.get_running_loop().call_soon(self.speculate_accept, req, answer.text)

    def start_updates(
        self, doc: DocSession, req: Request, answer: Answer, judge: Callable[[str, bool], bool] | None = None
    ) -> None:
        """Send ``req``'s updates from ``answer.stream`` (the previous request's stop). A
        request answered with nothing (at its deadline, after a model load) has its first
        text judged by the gate (``judge_for``) as one answered at once would."""
        if judge is None and not answer.text:
            judge = self.judge_for(req, answer)
        if doc.updates is not None and not doc.updates.done():
            doc.updates.cancel()
        doc.updates = asyncio.ensure_future(
            send_updates(doc, req, answer, self._on_update, self.metrics, self.speculate_accept, judge)
        )

    def speculate_accept(self, req: Request, text: str) -> None:
        if text:  # the completion that follows accepting what was shown
            self.prefetch.speculate(req.uri, req.doc_prefix + text, req.doc_suffix, req.ctx.language, "after_shown")

    def close(self) -> None:
        """Close the loader, and forget the streams waiting for it (a backend switch, shutdown)."""
        self.cold.close()
        for t in list(self._after_load):
            t.cancel()
