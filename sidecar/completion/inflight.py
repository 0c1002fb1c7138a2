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
from collections.abc import Awaitable, Callable
from typing import Any

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
        self.done = False
        self.aborted = False
        self.failed = False
        self.outcome: str | None = None  # complete | partial | error | aborted | cached
        self.used = False  # a prefetch that answered a request
        # A stream started while the backend was cold (no byte from it since it started or
        # came back): it is loading the model, so it is not closed when the request that
        # started it moves on; it runs to its end (bounded by the cold-start deadline).
        self.loader = False
        # A loader to a cloud (a backend that does not say it loads models): the first
        # stream after it started or came back, which may be waking a model (a serverless
        # endpoint). It runs on like a loader, but nobody waits for it or joins it once
        # it is silent past the usual first token (``reuse.stalled``): a true stall on a
        # cloud must hold no later request (coldstart.py).
        self.waking = False
        # A stream to a local engine (``Upstream.local_backend``): until its first text the
        # engine is evaluating the prompt, which takes seconds for a long one on a CPU. Its
        # silence is not a stall, and at its request's deadline it runs on in the
        # background (``kept``) so that the evaluation is not thrown away; unlike a loader
        # it is closed as usual once a newer request no longer agrees with it.
        self.local = False
        self.kept = False
        self._waiters: list[asyncio.Future[None]] = []
        self.task: asyncio.Task[None] | None = None

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
        if self.done and self.outcome != "complete" and self.filter.done and not self.filter.settled:
            cut = len(self.filter.raw_kept())
            last = r.rfind("\n", cut)
            r = r[: last + 1] if last >= cut else r[:cut]
        elif self.done and self.outcome == "partial" and not self.filter.done:
            last = r.rfind("\n")
            if last > 0 and r[:last].strip():
                r = r[:last]
        return r

    def typed_since_anchor(self, doc_prefix: str, doc_suffix: str) -> str | None:
        """What the user typed after the anchor, or None when the document moved elsewhere."""
        if doc_suffix != self.doc_suffix or not doc_prefix.startswith(self.doc_prefix):
            return None
        return doc_prefix[len(self.doc_prefix) :]

    @property
    def logprobs(self) -> list[tuple[str, float]]:
        """``(token, natural log-probability)`` of the text so far, where the backend sent
        them (else empty); the confidence gate reads them (gate.py)."""
        return self.filter.token_logprobs

    def covers(self, doc_prefix: str, doc_suffix: str) -> bool:
        """Whether this stream holds, or is still writing, text for the document
        ``doc_prefix``/``doc_suffix`` (its answer or lookahead goes past it): a speculative
        prefetch there would repeat it."""
        typed = self.typed_since_anchor(doc_prefix, doc_suffix)
        if typed is None or self.failed or not self.agrees(typed):
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
        pump: Callable[[StreamFilter, Callable[[], None]], Awaitable[str]],
        on_end: Callable[[InflightStream], None] | None = None,
    ) -> None:
        """Start pumping. ``pump`` returns ``complete``, ``partial`` (cut, deadline) or
        ``error``; ``on_end(self)`` runs once the stream is over, however it ended."""

        async def body() -> None:
            try:
                self.outcome = await pump(self.filter, self._on_delta)
                self.failed = self.outcome == "error"
            except Exception:  # noqa: BLE001 - a fault the backend did not classify ends this stream only
                log.exception("upstream stream failed")
                self.outcome, self.failed = "error", True
            finally:
                self._finish(on_end)

        self.task = asyncio.ensure_future(body())
        # A task cancelled before its first step never runs ``body`` (nor its
        # ``finally``): end the stream from the task's done callback as well.
        self.task.add_done_callback(lambda _t: self._finish(on_end))

    def _finish(self, on_end: Callable[[InflightStream], None] | None) -> None:
        """Mark the stream over, wake its waiters and run ``on_end`` (once)."""
        if self.done:
            return
        self.done = True
        if self.outcome is None:
            self.outcome = "aborted"
        self._wake()
        if on_end is not None:
            try:
                on_end(self)
            except Exception:  # noqa: BLE001 - a cache problem must not break a stream
                log.exception("stream end hook failed")

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

    def close(self, *, force: bool = False) -> bool:
        """Abort the stream if it is still running. Returns True when it was.

        A ``loader`` stream is only closed with ``force`` (a backend switch, shutdown):
        closing it before its first text would make the engine drop the model load it is
        waiting for."""
        if self.done or self.task is None or self.task.done():
            return False
        if self.loader and not self.first_text_at and not force:
            return False
        self.aborted = True
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
