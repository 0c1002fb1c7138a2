"""Keystroke scheduling: supersede, reuse, debounce, stream, answer, update.

For each inline completion request of a document, in order:

1. **Supersede.** The document's previous request, if still waiting, is answered at once
   with what it has (often nothing): the editor has moved on.
2. **Reuse.** If the document's latest stream agrees with what the user typed since it
   started (see ``inflight``), the request joins it: a finished stream answers the
   remainder at once (typing through a shown suggestion), a running one is followed.
   Otherwise a running stream is closed now, so its socket closes within milliseconds.
3. **Debounce.** Wait the adaptive debounce (``debounce``); a newer request ends the wait.
4. **Stream.** Start one upstream stream (at most one per document, and at most
   ``max_concurrent_streams`` in the process).
5. **Answer** when the first line is complete, or ``first_line_deadline_ms`` after the
   first text arrived with whatever is there, or at the end of the stream.
6. **Update.** After answering, while the request is still the document's latest and its
   stream runs, send ``sidecar/inlineCompletionUpdate`` with the growing text; the last
   one has ``done: true``. A superseded request gets no more updates.

A cancelled request (``$/cancelRequest``) closes its stream unless a newer request joins it
within ``CANCEL_GRACE_S`` (25 ms): editors cancel the old request just before they send
the new one.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

from ..observability.logs import new_trace_id
from . import tokens
from .context import CompletionContext
from .debounce import Cadence, debounce_ms
from .inflight import InflightStream
from .postprocess import StreamFilter, clean
from .prefetch import CLOUD_TOKENS_PER_MIN, LOCAL_TOKENS_PER_MIN, TokenBudget, next_line_indent

log = logging.getLogger(__name__)

_DIVERGED = object()

# How long the stream of a cancelled request waits for a newer request that may join it
# (s). Keeps "closed within 50 ms of the cancel" with room for the close itself.
CANCEL_GRACE_S = 0.025


@dataclass
class Request:
    """One inline completion request as the scheduler sees it.

    ``doc_prefix``/``doc_suffix`` are the whole document before/after the cursor with
    line breaks normalized to ``\\n``; ``version`` is the LSP document version.
    """

    uri: str
    version: int
    ctx: CompletionContext
    doc_prefix: str
    doc_suffix: str
    invoked: bool
    id: int = 0
    superseded: asyncio.Event = field(default_factory=asyncio.Event)
    finished: bool = False
    t0: float = field(default_factory=time.perf_counter)
    source: str = ""  # how it was answered: stream, joined, typed_through, superseded, ...
    waited_s: float = 0.0  # time spent awaiting the debounce or the backend (not sidecar work)
    place: Any = None  # the LSP surface's note of where the text goes
    trace_id: str = ""


@dataclass
class Answer:
    """The text for one request (never empty) and where it came from."""

    text: str
    source: str
    stream: InflightStream | None = None
    typed: str = ""


class _Doc:
    def __init__(self) -> None:
        self.cadence = Cadence()
        self.stream: InflightStream | None = None
        self.prefetch: InflightStream | None = None
        self.latest: Request | None = None
        self.updates: asyncio.Task[None] | None = None


UpdateSink = Callable[[Request, str, bool, int], None]


class Scheduler:
    """Per-document scheduling on top of a stream pump.

    ``pump(ctx, filt, on_delta) -> bool`` runs one upstream stream into ``filt`` (True
    when it ended without an upstream error); ``settings()`` returns the live settings;
    ``recent_ttft_ms()`` the backend's recent median TTFT or None; ``on_update(req, text,
    done, seq)`` sends one update notification; ``metrics`` has ``count``/``observe``;
    ``cache`` (a ``CompletionCache`` or None) is asked before going upstream and receives
    every stream's text at its end, under ``cache_key(ctx)``; ``make_context(doc_prefix,
    doc_suffix, language)`` cuts the windows for a speculated document (prefetch), and
    ``local_backend()`` says whether the backend is a local engine (its prefetch budget).
    """

    def __init__(self, *, pump, settings, recent_ttft_ms, on_update: UpdateSink, metrics,
                 cache=None, cache_key=None, make_context=None, local_backend=lambda: False) -> None:
        self._pump = pump
        self._cache = cache
        self._cache_key = cache_key
        self._make_context = make_context
        self._local_backend = local_backend
        self._budget: TokenBudget | None = None
        self._active_user = 0
        self._active_prefetch = 0
        self._shown: OrderedDict[str, tuple[str, str, str, str, str, str]] = OrderedDict()
        self._settings = settings
        self._ttft = recent_ttft_ms
        self._on_update = on_update
        self.metrics = metrics
        self._docs: dict[str, _Doc] = {}
        self._ids = itertools.count(1)
        self._slots: asyncio.Semaphore | None = None
        self._slots_size = 0

    # ------------------------------------------------------------------ document events
    def _doc(self, uri: str) -> _Doc:
        d = self._docs.get(uri)
        if d is None:
            d = self._docs[uri] = _Doc()
        return d

    def keystroke(self, uri: str) -> None:
        """Record a change of ``uri`` for the typing-cadence estimate."""
        self._doc(uri).cadence.keystroke(time.monotonic() * 1000)

    def close_document(self, uri: str) -> None:
        d = self._docs.pop(uri, None)
        if d is not None:
            if d.latest is not None:
                d.latest.superseded.set()
            if d.stream is not None and d.stream.close():
                self.metrics.count("sched.streams_aborted")
            self._drop_prefetch(d, "closed")

    def forget_streams(self) -> None:
        """Drop finished streams, so nothing cached survives a cache clear."""
        for d in self._docs.values():
            if d.stream is not None and d.stream.done:
                d.stream = None

    def close_all(self) -> None:
        """Close every running stream (a backend switch or shutdown)."""
        for uri in list(self._docs):
            self.close_document(uri)

    def active_streams(self) -> int:
        return sum(1 for d in self._docs.values() if d.stream is not None and not d.stream.done)

    # ------------------------------------------------------------------ requests
    async def request(self, req: Request) -> Answer | None:
        """Schedule ``req`` and return its answer, or None when there is nothing to show.

        Raises ``asyncio.CancelledError`` when the LSP request is cancelled; its stream is
        closed first unless a newer request uses it.
        """
        req.id = next(self._ids)
        req.trace_id = new_trace_id()  # follows this completion into every task it starts
        doc = self._doc(req.uri)
        self.metrics.count("sched.requests")
        prev = doc.latest
        doc.latest = req
        if prev is not None and not prev.finished:
            prev.superseded.set()
            self.metrics.count("sched.superseded")
        try:
            answer = await self._schedule(doc, req)
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
                self._start_updates(doc, req, answer)
            else:  # after the answer is on its way: speculation is not on the keystroke path
                asyncio.get_running_loop().call_soon(self._speculate_accept, req, answer.text)
        return answer

    async def _schedule(self, doc: _Doc, req: Request) -> Answer | None:
        p = doc.prefetch
        if p is not None:
            typed = p.typed_since_anchor(req.doc_prefix, req.doc_suffix)
            if typed is not None and not p.failed and p.agrees(typed) and (p.text or not p.done):
                if not p.used:
                    p.used = True
                    self.metrics.count("prefetch.used")
                if p.done:
                    rem = p.remainder(typed, req.ctx)
                    if rem:
                        return Answer(rem, "prefetch", p, typed)
                else:  # the speculation came true while it streams: it becomes the user stream
                    doc.prefetch = None
                    if doc.stream is not None and doc.stream.close():
                        self.metrics.count("sched.streams_aborted")
                    doc.stream = p
            elif not (p.doc_suffix == req.doc_suffix and p.doc_prefix.startswith(req.doc_prefix)):
                self._drop_prefetch(doc, "diverged")  # the user went another way
        s = doc.stream
        if s is not None:
            typed = s.typed_since_anchor(req.doc_prefix, req.doc_suffix)
            if typed is not None and not s.failed and s.agrees(typed):
                if s.done:
                    # Typing through a shown suggestion (or asking again where it was shown).
                    rem = s.remainder(typed, req.ctx)
                    if rem:
                        self.metrics.count("sched.typed_through" if typed else "sched.reshown")
                        return Answer(rem, "typed_through" if typed else "reshown", s, typed)
                else:
                    self.metrics.count("sched.joined")
                    got = await self._follow(req, s, typed)
                    if got is not _DIVERGED:
                        return got  # type: ignore[return-value]
                    self.metrics.count("sched.diverged")
            if not s.done and s.close():
                self.metrics.count("sched.streams_aborted")

        if self._cache is not None:
            hit = await self._cache.lookup(self._cache_key(req.ctx))
            if hit is not None:
                rem = clean(hit.text[hit.typed:], req.ctx)
                if rem:
                    self.metrics.count(f"sched.cache_hits.{hit.layer}")
                    return Answer(rem, f"cache_{hit.layer}")
            if req.superseded.is_set():
                return None

        st = self._settings()
        wait = debounce_ms(
            invoked=req.invoked, cadence_ms=doc.cadence.interval_ms(),
            line_prefix=req.ctx.line_prefix, line_suffix=req.ctx.line_suffix,
            ttft_ms=self._ttft(), floor_ms=st.debounce_min_ms, ceiling_ms=st.debounce_max_ms,
        )
        self.metrics.observe("debounce", wait)
        if wait > 0 and await self._superseded_within(req, wait / 1000):
            return None
        if req.superseded.is_set():
            return None

        s = InflightStream(req.uri, req.ctx, req.doc_prefix, req.doc_suffix)
        doc.stream = s
        self.metrics.count("sched.streams_started")
        s.run(lambda filt, on_delta: self._run_pump(req.ctx, filt, on_delta), self._stream_ended)
        got = await self._follow(req, s, "")
        return None if got is _DIVERGED else got  # type: ignore[return-value]

    # ------------------------------------------------------------------ prefetch
    def shown(self, item_id: str, req: Request, text: str) -> None:
        """Remember a suggestion handed to the editor, so an accept can be traced back."""
        self.metrics.count("suggestions.shown")
        self.metrics.count("tokens.shown", tokens.count(text) if text else 0)
        self._shown[item_id] = (req.uri, req.doc_prefix, req.doc_suffix, text, req.ctx.language, req.ctx.line_suffix)
        while len(self._shown) > 256:
            self._shown.popitem(last=False)

    def accepted(self, item_id: str, chars: int | None) -> None:
        """The editor accepted item ``item_id`` (``chars`` UTF-16 units of it, when the client
        says: a partial accept). Speculates the next line when the accepted text ends one."""
        self.metrics.count("accepted")
        rec = self._shown.get(item_id)
        if rec is None:
            return
        uri, doc_prefix, doc_suffix, text, language, line_suffix = rec
        taken = _take_units(text, chars) if chars is not None else text
        self.metrics.count("accepted_chars", len(taken))
        self.metrics.count("tokens.accepted", tokens.count(taken) if taken else 0)
        if taken != text:
            self.metrics.count("accepted_partial")
            return
        if line_suffix.strip():
            return  # text follows on the line: no next line to speculate
        accepted_prefix = doc_prefix + text
        last_line = accepted_prefix[accepted_prefix.rfind("\n") + 1:]
        self.speculate(uri, accepted_prefix + "\n" + next_line_indent(last_line), doc_suffix, language, "next_line")

    def _speculate_accept(self, req: Request, text: str) -> None:
        if text:
            self.speculate(req.uri, req.doc_prefix + text, req.doc_suffix, req.ctx.language, "after_shown")

    def speculate(self, uri: str, doc_prefix: str, doc_suffix: str, language: str, why: str) -> None:
        """Start a prefetch at the speculated document text, if the budget allows."""
        st = self._settings()
        doc = self._docs.get(uri)
        if doc is None or not st.prefetch_enabled or self._make_context is None:
            return
        p = doc.prefetch
        if p is not None:
            typed = p.typed_since_anchor(doc_prefix, doc_suffix)
            if typed == "" or (typed is not None and not p.failed and p.agrees(typed) and (p.text or not p.done)):
                return  # the running or finished prefetch already covers (or tried) this
        live = sum(1 for d in self._docs.values() if d.prefetch is not None and not d.prefetch.done and d is not doc)
        if live >= st.prefetch_max_concurrent or (
            self._active_user + live >= st.max_concurrent_streams - 1
        ):
            self.metrics.count("prefetch.skipped_busy")
            return
        ctx = self._make_context(doc_prefix, doc_suffix, language)
        if ctx is None:
            return
        estimate = tokens.count(ctx.prefix) + tokens.count(ctx.suffix) + st.max_tokens
        if not self._token_budget().try_reserve(estimate):
            self.metrics.count("prefetch.skipped_budget")
            return
        self._drop_prefetch(doc, "replaced")
        s = InflightStream(uri, ctx, doc_prefix, doc_suffix)
        doc.prefetch = s
        self.metrics.count("prefetch.issued")
        self.metrics.count(f"prefetch.issued.{why}")
        self.metrics.count("prefetch.tokens_reserved", estimate)
        s.run(lambda filt, on_delta: self._run_prefetch(ctx, filt, on_delta), self._prefetch_ended)

    def _token_budget(self) -> TokenBudget:
        st = self._settings()
        per_min = st.prefetch_tokens_per_min or (LOCAL_TOKENS_PER_MIN if self._local_backend() else CLOUD_TOKENS_PER_MIN)
        if self._budget is None or self._budget.per_min != per_min:
            self._budget = TokenBudget(per_min)
        return self._budget

    async def _run_prefetch(self, ctx: CompletionContext, filt: StreamFilter, on_delta) -> str:
        if self._cache is not None:
            hit = await self._cache.lookup(self._cache_key(ctx))
            if hit is not None and hit.typed == 0:
                self.metrics.count("prefetch.skipped_cached")
                return "cached"
        self._active_prefetch += 1
        try:
            return await self._pump(ctx, filt, on_delta)
        finally:
            self._active_prefetch -= 1

    def _prefetch_ended(self, s: InflightStream) -> None:
        if s.outcome != "cached":
            self.metrics.count("prefetch.tokens_generated", tokens.count(s.filter.raw) if s.filter.raw else 0)
        self._stream_ended(s)

    def _drop_prefetch(self, doc: _Doc, why: str) -> None:
        p, doc.prefetch = doc.prefetch, None
        if p is None:
            return
        if p.close():
            self.metrics.count("prefetch.cancelled")
            self.metrics.count(f"prefetch.cancelled.{why}")
        if not p.used and p.outcome != "cached":
            self.metrics.count("prefetch.wasted")

    def _cancel_prefetches(self) -> None:
        for d in self._docs.values():
            if d.prefetch is not None and not d.prefetch.done:
                self._drop_prefetch(d, "user_priority")

    def _close_if_orphaned(self, doc: _Doc, req: Request, s: InflightStream) -> None:
        if doc.latest is req and s.close():
            self.metrics.count("sched.streams_aborted")

    def _stream_ended(self, s: InflightStream) -> None:
        if s.aborted:
            self.metrics.count("sched.streams_ended.aborted")
        if self._cache is None or s.failed:
            return
        stored = self._cache.put(self._cache_key(s.ctx), s.text, partial=s.outcome != "complete")
        if stored:
            self.metrics.count("cache.stored_partial" if s.outcome != "complete" else "cache.stored")

    async def _run_pump(self, ctx: CompletionContext, filt: StreamFilter, on_delta) -> str:
        st = self._settings()
        if self._slots is None or self._slots_size != st.max_concurrent_streams:
            self._slots = asyncio.Semaphore(st.max_concurrent_streams)
            self._slots_size = st.max_concurrent_streams
        if self._active_user + self._active_prefetch >= st.max_concurrent_streams:
            self._cancel_prefetches()  # user requests come first
        async with self._slots:
            self._active_user += 1
            try:
                return await self._pump(ctx, filt, on_delta)
            finally:
                self._active_user -= 1

    async def _superseded_within(self, req: Request, timeout_s: float) -> bool:
        t = time.perf_counter()
        try:
            await asyncio.wait_for(req.superseded.wait(), timeout_s)
        except TimeoutError:
            return False
        finally:
            req.waited_s += time.perf_counter() - t
        return True

    async def _follow(self, req: Request, s: InflightStream, typed: str):
        """Wait on ``s`` for ``req`` per the answer policy; _DIVERGED if the stream stops
        agreeing with ``typed``."""
        deadline_s = self._settings().first_line_deadline_ms / 1000
        sup = asyncio.ensure_future(req.superseded.wait())
        try:
            while True:
                if req.superseded.is_set():
                    rem = s.remainder(typed, req.ctx)
                    return Answer(rem, "superseded", s, typed) if rem else None
                if not s.agrees(typed):
                    return _DIVERGED
                produced = s.text[len(typed):] if s.text.startswith(typed) else ""
                if s.done:
                    rem = s.remainder(typed, req.ctx)
                    return Answer(rem, "stream" if not typed else "joined", s, typed) if rem else None
                if "\n" in produced.lstrip("\n") or s.filter.done:
                    rem = s.remainder(typed, req.ctx)
                    if rem:
                        return Answer(rem, "stream" if not typed else "joined", s, typed)
                timeout = None
                if s.first_text_at and produced.strip():
                    left = s.first_text_at + deadline_s - time.perf_counter()
                    if left <= 0:
                        rem = s.remainder(typed, req.ctx)
                        if rem:
                            self.metrics.count("sched.answered_at_deadline")
                            return Answer(rem, "stream" if not typed else "joined", s, typed)
                    else:
                        timeout = left
                changed = s.changed()
                t = time.perf_counter()
                await asyncio.wait({changed, sup}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                req.waited_s += time.perf_counter() - t
                if not changed.done():
                    changed.cancel()
        finally:
            sup.cancel()

    # ------------------------------------------------------------------ updates
    def _start_updates(self, doc: _Doc, req: Request, answer: Answer) -> None:
        if doc.updates is not None and not doc.updates.done():
            doc.updates.cancel()
        doc.updates = asyncio.ensure_future(self._updates(doc, req, answer))

    async def _updates(self, doc: _Doc, req: Request, answer: Answer) -> None:
        s = answer.stream
        assert s is not None
        last = answer.text
        seq = 0
        while doc.latest is req and not req.superseded.is_set():
            done = s.done
            text = s.remainder(answer.typed, req.ctx)
            if text != last or done:
                if text.startswith(last) or done:
                    seq += 1
                    self._on_update(req, text, done, seq)
                    self.metrics.count("sched.updates_sent")
                    last = text
            if done:
                self._speculate_accept(req, text)
                return
            await s.changed()

    def snapshot(self) -> dict[str, Any]:
        return {
            "documents": len(self._docs),
            "active_streams": self.active_streams(),
            "active_prefetches": self._active_prefetch,
        }


def _take_units(text: str, units: int) -> str:
    """The start of ``text`` that is ``units`` UTF-16 code units long."""
    n = 0
    for i, ch in enumerate(text):
        if n >= units:
            return text[:i]
        n += 2 if ord(ch) > 0xFFFF else 1
    return text
