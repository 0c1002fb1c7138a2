"""One document's completion session (:class:`DocSession`): its typing cadence, its user
stream and prefetch, its latest request and the task sending that request's updates;
and every decision about the life of its stream. :class:`DocSessions` holds them by URI.
See docs/architecture.md ("The path of a keystroke").

A stream's state is ``inflight.StreamState`` (``WAITING`` for its first text, ``KEPT``,
``STREAMING``, ``DONE`` with its ``StreamEnd``); whether a request can use it is
``InflightStream.match``.

**When a stream dies, and who decides.** A stream ends by itself: the model's end, the
filter's (``postprocess/``), ``max_tokens``, the stream deadline (``stream.py``) or the
backend's error. Everything else that ends one is decided here, or named here:

1. **A newer request that cannot use it** (:meth:`DocSession.reuse`): the document moved
   on (typed something the stream does not agree with, moved the cursor, edited after
   it), or the stream is stalled (:func:`stalled`): closed at once.
2. **Its request's deadline** (:meth:`DocSession.at_deadline`): it runs on if it still
   helps: a loader (the model is loading), a stream with text, or a local engine still
   reading the prompt (``KEPT``); the request gets updates from it, or, for a client
   without updates, nothing now and the stream answers its next request. Else it is
   closed.
3. **A cancelled request** (:meth:`DocSession.cancelled`): closed ``CANCEL_GRACE_S``
   later unless a newer request came (it may join the stream).
4. **Another document's stream starts** (:meth:`DocSessions.give_way`): a ``KEPT``
   prompt evaluation in another document gives way to the stream a user waits for now.
5. **The document closes, the backend changes, shutdown** (:meth:`DocSessions.close`,
   :meth:`DocSessions.close_all`, the latter forcing loaders; ``ColdStart.close``, through
   ``launch.StreamLauncher.close``, forces the running loader whichever document it
   serves); a cache clear forgets finished streams (:meth:`DocSessions.forget_finished`).
6. **A prefetch** (``prefetch.py``): dropped when the user went elsewhere, when a new
   speculation replaces it, or when a user stream needs its slot; one that came true
   becomes the document's stream, and the stream it replaces is closed
   (:meth:`DocSession.replace_stream`).
7. **A model load is over** (``launch.StreamLauncher.start_after_load``, for a request
   that waited for it): the loader is adopted when it matches the request, else closed
   if it has text for a place the user left; the document's own stream that does not
   match is closed, and the request gets a stream of its own.
8. **A cloud's waking loader** nobody asked for: closed 50 ms after its first text
   comes, if no request adopted it meanwhile (``launch.StreamLauncher``).

A ``close()`` that returns False closed nothing: the stream was over, or it is a loader
without text (spared, below). ``task.cancel()`` elsewhere in ``launch.py`` cancels update
and waiting tasks, never a stream.

A loader is spared from 1-4, 6 and 7 before its first text (``InflightStream.close``
refuses without ``force``): closing it would make the engine drop the model load.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from .answer import NoStream, follow
from .debounce import Cadence
from .request import Answer, Request, Upstream

if TYPE_CHECKING:
    from ..metrics import Metrics
    from .inflight import InflightStream
    from .launch import StreamLauncher

#: How long the stream of a cancelled request waits for a newer request that may join
#: it (s). Keeps "closed within 50 ms of the cancel" with room for the close itself.
CANCEL_GRACE_S = 0.025


def request_deadline(req: Request, request_timeout_ms: float) -> float:
    """The event loop time by which ``req`` is answered: ``request_timeout_ms`` after its
    arrival (``Request.t0``, set by the LSP handler before it read the document)."""
    left_s = request_timeout_ms / 1000 - (time.perf_counter() - req.t0)
    return asyncio.get_running_loop().time() + max(0.0, left_s)


def stalled(s: InflightStream, ttft_ms: float | None) -> bool:
    """A running stream with no text long after the backend usually has its first token
    (2.5 times the recent median TTFT ``ttft_ms``, at least 1 s; 1 s before any TTFT
    is known: a first stream that stalls must not hold the next request, which would
    join it and wait for its deadline). A loader is exempt (it may be loading the
    model; not a cloud's waking one, which nobody waits for: coldstart.py), and so is a
    stream to a local engine (it is evaluating the prompt: a new
    stream would queue behind that evaluation in the engine, then repeat part of it)."""
    if s.done or s.first_text_at or (s.loader and not s.waking) or s.local:
        return False
    after_s = max(1.0, 2.5 * ttft_ms / 1000) if ttft_ms else 1.0
    return time.perf_counter() - s.started_at > after_s


class DocSession:
    """One document: its typing cadence, its user stream (``stream``) and prefetch, its
    latest request and the task sending that request's updates (module doc)."""

    def __init__(self, uri: str, metrics: Metrics) -> None:
        self.uri = uri
        self.metrics = metrics
        self.cadence = Cadence()
        self.stream: InflightStream | None = None
        self.prefetch: InflightStream | None = None
        self.latest: Request | None = None
        self.updates: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ 1. supersede
    def supersede(self, req: Request) -> None:
        """``req`` is the document's latest request; the previous one, if still waiting,
        is answered at once with what it has."""
        prev, self.latest = self.latest, req
        if prev is not None and not prev.finished:
            prev.superseded.set()
            self.metrics.count("sched.superseded")

    # ------------------------------------------------------------------ 2. reuse
    async def reuse(
        self, req: Request, *, ttft_ms: float | None, first_line_deadline_ms: float
    ) -> Answer | None | Literal[NoStream.MISS]:
        """Answer ``req`` from the document's stream when it can use it (joined, typed
        through or shown again); else close it (module doc, 1). Returns the answer (None:
        the joined stream had nothing to show), or ``NoStream.MISS`` when a new stream is
        needed."""
        s = self.stream
        if s is None:
            return NoStream.MISS
        typed = s.match(req.doc_prefix, req.doc_suffix)
        if stalled(s, ttft_ms):
            self.metrics.count("sched.stalled_streams")
        elif typed is not None:
            if s.done:
                # Typing through a shown suggestion (or asking again where it was shown).
                rem = s.remainder(typed, req.ctx)
                if rem:
                    self.metrics.count("sched.typed_through" if typed else "sched.reshown")
                    return Answer(rem, "typed_through" if typed else "reshown", s, typed)
            else:
                self.metrics.count("sched.joined")
                got = await follow(req, s, typed, first_line_deadline_ms=first_line_deadline_ms, metrics=self.metrics)
                if got is not NoStream.DIVERGED:
                    return got
                self.metrics.count("sched.diverged")
        self._close(s)
        return NoStream.MISS

    # ------------------------------------------------------------------ deadline
    def at_deadline(self, req: Request, upstream: Upstream, launcher: StreamLauncher) -> Answer | None:
        """The answer of a request whose deadline passed: what its stream has. A stream
        that still helps keeps running and the request gets updates; one that does not
        is closed (module doc, 2)."""
        self.metrics.count("sched.request_deadline")
        if self.latest is not req or req.superseded.is_set():
            return None
        s = self.stream
        if (s is None or s.done) and (upstream.backend_cold() or launcher.cold.waking()):
            if launcher.cold.running():
                # It waited for another document's model load all along: its own stream
                # starts once the model is loaded, its suggestion following as an update.
                launcher.start_after_load(self, req)
                return None
            # The deadline ran out before any stream started (a slow first request: the
            # cache opening, the debounce) while the backend is cold: start the load
            # anyway, so the suggestion follows as an update instead of never.
            s = launcher.start(self, req)
            launcher.start_updates(self, req, Answer("", "deadline", s, ""))
            return None
        if s is None or s.done:
            return None
        typed = s.match(req.doc_prefix, req.doc_suffix)
        answer, runs_on = self._what_it_has(req, s, typed) if typed is not None else (None, False)
        if not runs_on:
            closed = s.close()
            if closed:
                self.metrics.count("sched.streams_aborted")
            if (not closed and s.loader and not s.done) or (closed and launcher.cold.waking()):
                # The document's loader, for a place the user has left: spared (the model
                # load goes on); or this request's own stream, silent while a cloud's model
                # wakes: this request's suggestion follows once the model answers.
                launcher.start_after_load(self, req)
            return None
        if answer is not None and not answer.text:  # loading the model, or evaluating the prompt
            if s.keep():  # the prompt's evaluation outlives the request (inflight.py)
                self.metrics.count("sched.prefill_kept")
            if req.updates:
                launcher.start_updates(self, req, answer)
            return None
        return answer

    def _what_it_has(self, req: Request, s: InflightStream, typed: str) -> tuple[Answer | None, bool]:
        """At the deadline, what ``req`` gets from the running stream ``s`` it can use,
        and whether ``s`` runs on: ``(answer, True)`` with the text so far (the request
        then gets updates); ``(None, True)`` for a client without updates when no line
        is finished yet (never a stub; asking again is answered from the stream);
        ``(Answer("", ...), True)`` for a loader still loading the model, or a stream to a
        local engine still evaluating its prompt (updates follow; a later request joins
        it); ``(None, False)``: nothing to show, close it."""
        rem = s.remainder(typed, req.ctx)
        if rem and not req.updates:
            # No updates will follow: only the lines the model has finished; the stream runs
            # on, so asking again (or typing on) is answered from it.
            rem = s.remainder(typed, req.ctx, finished_lines_only=True)
            if not rem:
                self.metrics.count("sched.no_stub_at_deadline")
                return None, True
        if rem:
            return Answer(rem, "deadline", s, typed), True
        if (s.loader or s.local) and not s.first_text_at:
            return Answer("", "deadline", s, typed), True
        return None, False

    # ------------------------------------------------------------------ cancel
    def cancelled(self, req: Request) -> None:
        """``req`` was cancelled: close its running stream after ``CANCEL_GRACE_S`` unless
        a newer request came meanwhile (module doc, 3)."""
        self.metrics.count("sched.cancelled")
        s = self.stream
        if self.latest is req and s is not None and not s.done:
            asyncio.get_running_loop().call_later(CANCEL_GRACE_S, self._close_if_orphaned, req, s)

    def _close_if_orphaned(self, req: Request, s: InflightStream) -> None:
        if self.latest is req:
            self._close(s)

    # ------------------------------------------------------------------ helpers
    def replace_stream(self, s: InflightStream) -> None:
        """``s`` becomes the document's stream; the one it replaces, if running, is closed."""
        if self.stream is not None and self.stream is not s:
            self._close(self.stream)
        self.stream = s

    def _close(self, s: InflightStream) -> None:
        if s.close():
            self.metrics.count("sched.streams_aborted")


class DocSessions:
    """``DocSession`` by document URI (``by_uri``): created on the first event of a
    document, dropped when it closes (streams closed, request superseded), so nothing
    grows with documents that are gone."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self.by_uri: dict[str, DocSession] = {}

    def get(self, uri: str) -> DocSession:
        """The session of ``uri``, created on first use."""
        d = self.by_uri.get(uri)
        if d is None:
            d = self.by_uri[uri] = DocSession(uri, self.metrics)
        return d

    def give_way(self, doc: DocSession) -> None:
        """A user stream starts in ``doc``: a prompt evaluation kept past its request's
        deadline in another document gives way to it (module doc, 4)."""
        from .inflight import StreamState

        for other in self.by_uri.values():
            o = other.stream
            if other is not doc and o is not None and o.state is StreamState.KEPT and o.close():
                self.metrics.count("sched.prefill_kept_closed")

    def close(self, uri: str, drop_prefetch: Callable[[DocSession, str], None]) -> None:
        """Forget ``uri``: its latest request is superseded, its stream closed (a loader
        is spared: ``InflightStream.close``), its prefetch dropped."""
        d = self.by_uri.pop(uri, None)
        if d is None:
            return
        if d.latest is not None:
            d.latest.superseded.set()
        if d.stream is not None:
            d._close(d.stream)
        drop_prefetch(d, "closed")

    def close_all(self, drop_prefetch: Callable[[DocSession, str], None]) -> None:
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
