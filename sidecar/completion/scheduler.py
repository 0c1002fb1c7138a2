"""Keystroke scheduling, in the order a request meets it (``Scheduler.request``). First
the document's last suggestion gets its label for the gate (``acceptance.moved_on``:
typed, or passed over); then:

1. **Supersede** (``DocSession.supersede``): the document's previous request is answered
   at once with what it has.
2. **Reuse** (``Prefetcher.adopt``, ``DocSession.reuse``): a speculation that came true,
   the running stream the user is typing into, a finished one being typed through; a
   stream that no longer agrees is closed at once.
3. **Cache** (``cached.py``, ``cache/``), 4. **debounce** (``debounce.py``), then the
   cold-start gate (``coldstart.py``: one model load at a time).
5. **Stream** (one per document, at most ``max_concurrent_streams``: ``launch.py``,
   ``slots.py``) and **answer** per the answer policy (``answer.py``). Steps 2-5 run
   within the request deadline: every request is answered within ``request_timeout_ms``
   of its arrival (``DocSession.at_deadline``, which may itself start a stream or its
   updates and answer nothing now: steps 6 and 7 then come with the updates); a
   cancelled one closes its stream unless a newer request joins it
   (``DocSession.cancelled``).
6. **Gate** (``gate.py``, when on): an answer it holds back leaves as nothing and
   nothing is speculated on it; an answer with no text yet is judged on the first text
   its updates would show; the suggestion already on screen at the very place, asked
   for again, is not judged again (``Acceptance.shown_here``).
7. **Follow-up** (``launch.StreamLauncher.after_answer``), for the document's latest
   request only: updates (``updates.py``) while the stream runs; then speculate
   (``prefetch.py``).

When a stream dies, and who decides, is ``session.py``. docs/architecture.md has the
reasons.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..observability.logs import new_trace_id
from .acceptance import Acceptance
from .answer import NoStream, follow
from .cached import from_cache, store_stream
from .debounce import ceiling_ms, debounce_ms, superseded_within
from .gate import Gate
from .inflight import InflightStream
from .launch import StreamLauncher
from .prefetch import Prefetcher
from .request import Answer, Request, Upstream
from .session import DocSession, DocSessions, request_deadline
from .slots import StreamSlots
from .updates import UpdateSink, update_item_id

if TYPE_CHECKING:
    from ..metrics import Metrics
    from .cache import CompletionCache

log = logging.getLogger(__name__)


class Scheduler:
    """Per-document scheduling on top of an :class:`Upstream` (see the module doc).

    ``on_update(req, text, done, seq)`` sends one update notification; ``cache`` (or
    None) is asked before going upstream and receives every stream's text at its end,
    under ``upstream.cache_key(ctx)``. Starting streams is the :class:`StreamLauncher`'s,
    speculative prefetch the :class:`Prefetcher`'s.
    """

    def __init__(
        self,
        upstream: Upstream,
        *,
        on_update: UpdateSink,
        metrics: Metrics,
        cache: CompletionCache | None = None,
        gate: Gate | None = None,
    ) -> None:
        self.upstream = upstream
        self.gate = gate if gate is not None else Gate(metrics, enabled=False)
        self._cache = cache
        self.metrics = metrics
        self.docs = DocSessions(metrics)
        self._ids = itertools.count(1)
        self.slots = StreamSlots()
        self.acceptance = Acceptance(metrics, self.gate)
        self.prefetch = Prefetcher(upstream, self.docs.by_uri, self.slots, metrics, cache, self._stream_ended)
        self._send_update = on_update
        self.launcher = StreamLauncher(
            upstream,
            self.docs,
            self.slots,
            self.prefetch,
            metrics,
            on_update=self._on_update,
            on_end=self._stream_ended,
        )
        self.launcher.judge_for = self._judge_for

    # ------------------------------------------------------------------ document events
    def keystroke(self, uri: str) -> None:
        """Record a change of ``uri`` for the typing-cadence estimate."""
        self.docs.get(uri).cadence.keystroke(time.monotonic() * 1000)

    def typed_within(self, uri: str, seconds: float) -> bool:
        """``uri`` changed less than ``seconds`` ago (its typing cadence)."""
        doc = self.docs.by_uri.get(uri)
        return doc is not None and doc.cadence.typed_within(time.monotonic() * 1000, seconds * 1000)

    def close_document(self, uri: str) -> None:
        """``uri`` was closed: its request is superseded, its streams close."""
        self.docs.close(uri, self.prefetch.drop)

    def forget_streams(self) -> None:
        """Drop finished streams, so nothing cached survives a cache clear."""
        self.docs.forget_finished()

    def close_all(self) -> None:
        """Close every running stream (a backend switch or shutdown), loaders included."""
        self.docs.close_all(self.prefetch.drop)
        self.launcher.close()

    def active_streams(self) -> int:
        return len(self.docs.running())

    # ------------------------------------------------------------------ requests
    async def request(self, req: Request) -> Answer | None:
        """Schedule ``req`` (the steps of the module doc, in order) and return its answer,
        or None when there is nothing to show.

        Raises ``asyncio.CancelledError`` when the LSP request is cancelled; its stream is
        closed first unless a newer request uses it.
        """
        req.id = next(self._ids)
        req.trace_id = new_trace_id()  # follows this completion into every task it starts
        doc = self.docs.get(req.uri)
        self.metrics.count("sched.requests")
        self.acceptance.moved_on(req)  # the last suggestion shown here: taken by typing, or rejected
        # 1. Supersede.
        doc.supersede(req)
        # 2-5. Reuse, cache, debounce, stream: within the request deadline.
        try:
            try:
                async with asyncio.timeout_at(request_deadline(req, self.upstream.settings.request_timeout_ms)):
                    answer = await self._find_answer(doc, req)
            except TimeoutError:
                answer = doc.at_deadline(req, self.upstream, self.launcher)
        except asyncio.CancelledError:
            doc.cancelled(req)
            raise
        finally:
            req.finished = True
        # 6. Gate.
        judge = None
        if answer is not None and self.gate.enabled:
            # Held back, the request gets nothing and nothing is speculated on it; the
            # stream runs on for later requests. An answer with no text yet (a local
            # engine still reading the prompt) is judged on the first text its updates
            # would show.
            if answer.text:
                if self.acceptance.shown_here(req, answer.text):
                    # Asked again where this suggestion is on screen (an editor fetching the
                    # rest of a streamed suggestion): the gate judged it when it was shown.
                    # Judged again as a new one (a stored or re-shown suggestion is judged on
                    # its text), it could take back what the user sees; VS Code then keeps
                    # that empty answer at the place until the next key.
                    self.metrics.count("gate.reshown")
                elif not self._judge(req, answer, answer.text, answer.stream is not None and answer.stream.done):
                    return None
            else:
                judge = functools.partial(self._judge_update, req, answer)
        # 7. Follow-up: updates, then speculation.
        if answer is not None and doc.latest is req:
            self.launcher.after_answer(doc, req, answer, judge)
        return answer

    async def _find_answer(self, doc: DocSession, req: Request) -> Answer | None:
        """Steps 2-5 of the module doc: the first that answers ``req``."""
        # 2. Reuse: a speculation that came true, the running stream, a finished one.
        got = self.prefetch.adopt(doc, req)
        if got is not None:
            return got
        reused = await doc.reuse(
            req,
            ttft_ms=self.upstream.recent_ttft_ms(),
            first_line_deadline_ms=self.upstream.settings.first_line_deadline_ms,
        )
        if reused is not NoStream.MISS:
            return reused
        # 3. Cache.
        if self._cache is not None:
            got = await from_cache(self._cache, self.upstream.cache_key(req.ctx), req, self.metrics)
            if got is not None or req.superseded.is_set():
                return got
        # 4. Debounce, then the cold-start gate.
        st = self.upstream.settings
        wait = debounce_ms(
            invoked=req.invoked,
            cadence_ms=doc.cadence.interval_ms(),
            line_prefix=req.ctx.line_prefix,
            line_suffix=req.ctx.line_suffix,
            ttft_ms=self.upstream.recent_ttft_ms(),
            floor_ms=st.debounce_min_ms,
            ceiling_ms=max(st.debounce_min_ms, ceiling_ms(st.debounce_max_ms, self.upstream.local_backend())),
        )
        self.metrics.observe("debounce", wait)
        if wait > 0 and await superseded_within(req, wait / 1000):
            return None
        if req.superseded.is_set():
            return None
        await self.launcher.cold.wait(req, self.upstream.backend_cold, self.metrics)
        if req.superseded.is_set():
            return None
        # 5. Stream, and answer per the answer policy.
        s = self.launcher.start(doc, req)
        followed = await follow(
            req, s, "", first_line_deadline_ms=self.upstream.settings.first_line_deadline_ms, metrics=self.metrics
        )
        return None if followed is NoStream.DIVERGED else followed

    def _judge(self, req: Request, answer: Answer, text: str, done: bool) -> bool:
        """The gate's verdict on ``text`` for ``req`` (its features are kept on ``req``
        for the label the user's next move gives)."""
        s = answer.stream
        req.gate_features = self.gate.features_of(
            req.ctx, text, answer.source, s.logprobs if s is not None else None, open_stream=s is not None and not done
        )
        where = f"{req.uri}:{req.doc_prefix.count(chr(10))}:{len(req.ctx.line_prefix)}"  # line, code points
        return self.gate.admit(req.gate_features, where)

    def _judge_for(self, req: Request, answer: Answer) -> Callable[[str, bool], bool] | None:
        """The gate's judge of the first text of ``req``, answered with nothing (None: off)."""
        return functools.partial(self._judge_update, req, answer) if self.gate.enabled else None

    def _judge_update(self, req: Request, answer: Answer, text: str, done: bool) -> bool:
        admitted = self._judge(req, answer, text, done)
        if admitted:
            self.acceptance.shown_by_update(req, text)
        return admitted

    def shown(self, item_id: str, req: Request, text: str) -> None:
        self.acceptance.shown(item_id, req, text)  # an accept can be traced back

    def _on_update(self, req: Request, text: str, done: bool, seq: int) -> None:
        """Send one update, and remember its item for accepts (acceptance.py)."""
        self._send_update(req, text, done, seq)
        self.acceptance.shown_update(update_item_id(req.id, seq), req, text)

    def _stream_ended(self, s: InflightStream) -> None:
        """A stream is over: counted, and its text stored in the cache."""
        if s.aborted:
            self.metrics.count("sched.streams_ended.aborted")
        if self._cache is not None:
            store_stream(self._cache, self.upstream.cache_key(s.ctx), s, self.metrics)

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
