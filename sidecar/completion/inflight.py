"""In-flight upstream streams, and whether a newer request can use one.

A stream is anchored at the document text before and after the cursor when it started
(line breaks normalized to ``\\n``). A later request for the same document can use it
when its text after the cursor is unchanged and its text before the cursor is the anchor
plus ``typed``, where ``typed`` agrees with what the stream has produced: either the
stream's text starts with ``typed`` (the user typed what is shown) or ``typed`` starts
with the stream's text (the user typed ahead of the stream, which may still produce it).
The request is then answered with the rest of the stream's text after ``typed``
(:meth:`InflightStream.match` says whether, with what ``typed``). The same test serves
typing-through a finished suggestion (the stream is done).

A stream's life is one state (:class:`StreamState`): ``WAITING`` for its first text,
``KEPT`` (a local engine's prompt evaluation that outlives its request), ``STREAMING``,
then ``DONE`` with how it ended (:class:`StreamEnd`). Its :class:`StreamRole`, fixed
when it starts, says whether it may outlive the requests that use it. Who closes a
stream, and when, is in ``session.py``.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from .context import CompletionContext
from .postprocess import StreamFilter, clean

log = logging.getLogger(__name__)


class StreamState(enum.Enum):
    """Where a stream is in its life."""

    WAITING = "waiting"  # started, no text yet (the backend loads, wakes or reads the prompt)
    KEPT = "kept"  # a local engine's prompt evaluation, run on past its request's deadline
    STREAMING = "streaming"  # text is arriving
    DONE = "done"  # over: ``InflightStream.end`` says how


class StreamEnd(enum.Enum):
    """How a stream ended: what its fill returned (``request.Upstream.run_stream``), or
    ``ABORTED`` when it was closed (or failed outside the backend's errors) first."""

    COMPLETE = "complete"  # the model's own end, or the filter's
    PARTIAL = "partial"  # cut: the token limit, the deadline, a dropped connection
    ERROR = "error"  # the backend failed (the error went to the user's reports)
    ABORTED = "aborted"  # closed before its end (``InflightStream.close``)
    CACHED = "cached"  # a prefetch the cache already had: nothing went upstream


class StreamRole(enum.Enum):
    """Why a stream may outlive the request that started it (coldstart.py)."""

    PLAIN = "plain"  # closed as soon as no request agrees with it
    LOADER = "loader"  # started while the backend was cold: it may be loading the model
    WAKING = "waking"  # a loader to a cloud that may be waking its model: nobody waits on it


class InflightStream:
    """One upstream stream (a user's or a speculative prefetch): its anchor, the text so
    far, and the task that fills it.

    ``run(fill)`` starts the task; ``fill(filt, on_delta)`` is the coroutine that feeds
    ``filt`` from the backend. ``changed`` is set on every new piece of text and at the
    end. ``close()`` cancels the task, which closes the HTTP response and its socket.
    """

    def __init__(
        self,
        uri: str,
        ctx: CompletionContext,
        doc_prefix: str,
        doc_suffix: str,
        cut_logprob: float | None = None,
        lookahead: int = 0,
    ) -> None:
        self.uri = uri
        self.ctx = ctx
        self.doc_prefix = doc_prefix
        self.doc_suffix = doc_suffix
        # cut_logprob: the confidence cut (postprocess/confidence.py); lookahead: lines
        # read past a one-line answer for the request after its accept (``reach``).
        self.filter = StreamFilter(ctx, cut_logprob, lookahead)
        self.started_at = time.perf_counter()
        self.first_text_at = 0.0
        self.state = StreamState.WAITING
        self.end: StreamEnd | None = None  # set when DONE
        # A loader was started while the backend was cold (no byte from it since it started
        # or came back): it is loading the model, so it is not closed when the request that
        # started it moves on; it runs to its end (bounded by the cold-start deadline). A
        # waking one goes to a cloud (a backend that does not say it loads models): it runs
        # on like a loader, but nobody waits for it or joins it once it is silent past the
        # usual first token (``session.stalled``): a true stall on a cloud must hold no
        # later request (coldstart.py).
        self.role = StreamRole.PLAIN
        # A stream to a local engine (``Upstream.local_backend``): until its first text the
        # engine is evaluating the prompt, which takes seconds for a long one on a CPU. Its
        # silence is not a stall, and at its request's deadline it runs on in the
        # background (``KEPT``) so that the evaluation is not thrown away; unlike a loader
        # it is closed as usual once a newer request no longer agrees with it.
        self.local = False
        self.used = False  # a prefetch that answered a request (prefetch.py)
        self._waiters: list[asyncio.Future[None]] = []
        self.task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ state
    @property
    def done(self) -> bool:
        return self.state is StreamState.DONE

    @property
    def failed(self) -> bool:
        """It ended with the backend's error."""
        return self.end is StreamEnd.ERROR

    @property
    def aborted(self) -> bool:
        """It was closed (``close``) before its end."""
        return self.end is StreamEnd.ABORTED

    @property
    def loader(self) -> bool:
        return self.role is not StreamRole.PLAIN

    @property
    def waking(self) -> bool:
        return self.role is StreamRole.WAKING

    def keep(self) -> bool:
        """A local engine's prompt evaluation, still without text, outlives its request
        (``KEPT``). False (nothing changes) for any other stream."""
        if self.state is StreamState.WAITING and self.local and self.role is StreamRole.PLAIN:
            self.state = StreamState.KEPT
            return True
        return False

    # ------------------------------------------------------------------ text
    @property
    def text(self) -> str:
        """Model text so far, up to where the filter decided the completion ends."""
        return self.filter.raw_kept()

    @property
    def reach(self) -> str:
        """``text`` and the lookahead after it (``StreamFilter``): what a request that
        types through the answer, or accepts it, is answered from. A stream that ended
        while reading its lookahead other than by the model's own end (``max_tokens``,
        the deadline, closed) keeps only the lookahead's complete lines: a line cut by
        the token limit is not a line the model finished. For the same reason a
        multi-line answer that was itself cut (outcome ``partial``: ``max_tokens`` or the
        deadline) ends at its last complete line; a cut first line is kept (it is all
        there is)."""
        r = self.filter.raw_reach()
        if self.done and self.end is not StreamEnd.COMPLETE and self.filter.done and not self.filter.settled:
            cut = len(self.filter.raw_kept())
            last = r.rfind("\n", cut)
            r = r[: last + 1] if last >= cut else r[:cut]
        elif self.done and self.end is StreamEnd.PARTIAL and not self.filter.done:
            last = r.rfind("\n")
            if last > 0 and r[:last].strip():
                r = r[:last]
        return r

    def typed_since_anchor(self, doc_prefix: str, doc_suffix: str) -> str | None:
        """What the user typed after the anchor, or None when the document moved elsewhere."""
        if doc_suffix != self.doc_suffix or not doc_prefix.startswith(self.doc_prefix):
            return None
        return doc_prefix[len(self.doc_prefix) :]

    def match(self, doc_prefix: str, doc_suffix: str) -> str | None:
        """What the user typed since the anchor, when the document ``doc_prefix`` /
        ``doc_suffix`` can still use this stream (module doc: the anchor holds, what was
        typed agrees, the stream did not fail); else None."""
        typed = self.typed_since_anchor(doc_prefix, doc_suffix)
        if typed is None or self.failed or not self.agrees(typed):
            return None
        return typed

    @property
    def logprobs(self) -> list[tuple[str, float]]:
        """``(token, natural log-probability)`` of the text so far, where the backend sent
        them (else empty); the confidence gate reads them (gate.py)."""
        return self.filter.token_logprobs

    def covers(self, doc_prefix: str, doc_suffix: str) -> bool:
        """Whether this stream holds, or is still writing, text for the document
        ``doc_prefix``/``doc_suffix`` (its answer or lookahead goes past it): a speculative
        prefetch there would repeat it."""
        typed = self.match(doc_prefix, doc_suffix)
        if typed is None:
            return False
        produced = self.reach
        return not self.done or bool(produced[len(typed) :].strip())

    def agrees(self, typed: str) -> bool:
        """True when ``typed`` is consistent with the stream (see module doc)."""
        produced = self.reach
        if produced.startswith(typed):
            return True
        return not self.done and typed.startswith(produced)

    def remainder(self, typed: str, ctx: CompletionContext, *, finished_lines_only: bool = False) -> str:
        """The cleaned suggestion that is left after ``typed``, for a request at ``ctx``.
        A stream that started where several lines were allowed keeps them while the user
        types through its first line (the request's own context would allow one).

        ``finished_lines_only``: while the stream runs, only the lines the model has
        ended with a line break (leading line breaks aside); "" while the first line is
        still being written. For a client that gets no updates: never a stub. Past the
        answer's end it is answered from the lookahead (``reach``)."""
        produced = self.reach
        if not produced.startswith(typed):
            return ""
        rest = produced[len(typed) :]
        if finished_lines_only and not (self.done or self.filter.settled):
            body = rest.lstrip("\n")
            cut = body.rfind("\n")
            if cut < 0:
                return ""
            rest = rest[: len(rest) - len(body) + cut]
        return clean(rest, ctx, multiline=True if self.ctx.multiline else None)

    # ------------------------------------------------------------------ task
    def run(
        self,
        fill: Callable[[StreamFilter, Callable[[], None]], Awaitable[StreamEnd]],
        on_end: Callable[[InflightStream], None] | None = None,
    ) -> None:
        """Start the task. ``fill`` returns how the stream ended (``COMPLETE``,
        ``PARTIAL``, ``ERROR`` or, for a prefetch the cache had, ``CACHED``);
        ``on_end(self)`` runs once the stream is over, however it ended."""

        async def body() -> None:
            end: StreamEnd | None = None
            try:
                end = await fill(self.filter, self._on_delta)
            except Exception:  # noqa: BLE001 - a fault the backend did not classify ends this stream only
                log.exception("upstream stream failed")
                end = StreamEnd.ERROR
            finally:
                self._finish(on_end, end)

        self.task = asyncio.ensure_future(body())
        # A task cancelled before its first step never runs ``body`` (nor its
        # ``finally``): end the stream from the task's done callback as well.
        self.task.add_done_callback(lambda _t: self._finish(on_end, None))

    def _finish(self, on_end: Callable[[InflightStream], None] | None, end: StreamEnd | None) -> None:
        """Mark the stream over (``end``; None: cancelled, ``ABORTED``), wake its
        waiters and run ``on_end`` (once)."""
        if self.done:
            return
        self.state = StreamState.DONE
        self.end = end if end is not None else StreamEnd.ABORTED
        self._wake()
        if on_end is not None:
            try:
                on_end(self)
            except Exception:  # noqa: BLE001 - a cache problem must not break a stream
                log.exception("stream end hook failed")

    def _on_delta(self) -> None:
        if not self.first_text_at and self.filter.raw:
            self.first_text_at = time.perf_counter()
            if self.state in (StreamState.WAITING, StreamState.KEPT):
                self.state = StreamState.STREAMING
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

    def close(self, *, force: bool = False) -> bool:
        """Abort the stream if it is still running. Returns True when it was.

        A ``loader`` stream is only closed with ``force`` (a backend switch, shutdown):
        closing it before its first text would make the engine drop the model load it is
        waiting for."""
        if self.done or self.task is None or self.task.done():
            return False
        if self.loader and not self.first_text_at and not force:
            return False
        self.task.cancel()
        return True

    def diagnostics(self) -> dict[str, object]:
        """Age (s), loader, characters so far, first text seen, and where the task waits."""
        return {
            "age_s": round(time.perf_counter() - self.started_at, 3),
            "loader": self.loader,
            "chars": len(self.text),
            "first_text": bool(self.first_text_at),
            "waiting_in": self.waiting_in(),
        }

    def waiting_in(self) -> str:
        """Where this running stream's task is waiting (its innermost awaited coroutine frame,
        following ``cr_await``), for the ``sidecar.stats`` diagnostics of a stream that
        does not end."""
        task = self.task
        if task is None or task.done():
            return ""
        coro: Any = task.get_coro()  # a coroutine or generator: its frame chain is read below
        where = ""
        for _ in range(64):
            frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
            if frame is None:
                break
            where = f"{frame.f_code.co_filename.rsplit('/', 2)[-1]}:{frame.f_lineno} {frame.f_code.co_name}"
            coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
            if coro is None:
                break
        return where
