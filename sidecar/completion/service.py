"""The completion service: what the LSP surface talks to.

It owns the backend (rebuilt when a connection-relevant setting changes), the cache, the
metrics, the scheduler and the naive pipeline (``pipeline()`` picks one per request),
the context cutting (``context_budget.py``), the stream runner (``stream.py``) and the user
reports (``reports.py``), and builds the scheduler's upstream from them (``upstream.py``).
What is left here is lifecycle: start, settings, status, document events, close. See
docs/architecture.md ("The path of a keystroke").
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from ..backends.base import Backend
from ..backends.errors import USER_MUST_ACT, BackendError
from ..backends.factory import build_backend
from ..backends.openai_compat import KEEPALIVE_EXPIRY_S
from ..config import Settings, backend_changed
from ..metrics import Metrics
from ..providers import is_local
from . import tokens
from .cache import CompletionCache
from .context import CompletionContext
from .context_budget import TYPING_S, ContextBudget
from .crossfile import CrossFileContext
from .gate import Gate
from .naive import NaivePipeline
from .reports import Reports
from .request import Answer, Request
from .retention import RetentionTracker
from .scheduler import Scheduler
from .stream import StreamDeps, StreamRunner
from .updates import UpdateSink
from .upstream import BackendUpstream

log = logging.getLogger(__name__)


#: The gate model's name among the cache file's states.
GATE_STATE = "gate"


class CompletionService:
    """Runs completions against the configured backend. ``on_error(err)``: a cause the
    user must act on (``reports.py``: ``window/showMessage``); ``on_log(message)``: a
    notice (``window/logMessage``); ``on_progress(kind, message)``: a model load
    (``$/progress``); ``on_status(d)``: ``sidecar/status`` payloads; ``crossfile``: the
    editor's other open documents for prompts (``crossfile/``); ``text_of(uri)``: the
    editor's current text of a document (None: not open), for retention."""

    def __init__(
        self,
        settings: Settings,
        *,
        on_error: Callable[[BackendError], None],
        on_status: Callable[[dict[str, Any]], None] | None = None,
        on_update: UpdateSink | None = None,
        on_log: Callable[[str], None] | None = None,
        on_progress: Callable[[str, str], None] | None = None,
        crossfile: CrossFileContext | None = None,
        text_of: Callable[[str], str | None] | None = None,
    ) -> None:
        self.settings = settings
        self.metrics = Metrics()
        self._on_error = on_error
        self._on_log = on_log or (lambda _m: None)
        self._on_progress = on_progress or (lambda _k, _m: None)
        self._on_status = on_status or (lambda _d: None)
        self._prewarm_task: asyncio.Task[None] | None = None
        #: The backend's health as last seen (``_set_health``): starting, ready or error.
        self.health = ""  # unknown until start()
        self._gate_write: asyncio.Future[None] | None = None
        self._bg: set[asyncio.Task[Any]] = set()
        self.reports = Reports(
            self.metrics,
            on_error=on_error,
            on_log=self._on_log,
            on_slow=lambda: self._on_status(self.status("slow")),
            warn_ms=lambda: self.settings.latency_warn_ms,
        )
        self.backend = build_backend(settings, self._on_switch)
        self._wire(self.backend)
        self.cache = CompletionCache.from_settings(settings)
        self.context_budget = ContextBudget(
            lambda: self.settings,
            self._target,
            self.metrics,
            crossfile,
            typing=lambda uri: self.scheduler.typed_within(uri, TYPING_S),
        )
        self.runner = StreamRunner(
            StreamDeps(
                settings=lambda: self.settings,
                target=self._target,
                record=self._record,
                metrics=self.metrics,
                reports=self.reports,
                context_budget=self.context_budget,
                spare_connection=self._spare_connection,
            )
        )
        self.upstream = BackendUpstream(self.runner, self.context_budget)  # the scheduler's Upstream
        cache = self.cache
        self.gate = Gate(
            self.metrics,
            enabled=settings.gate_enabled,
            threshold=settings.gate_threshold,
            seen_ms=settings.gate_seen_ms,
            load=(lambda: cache.get_state(GATE_STATE)) if cache else None,
            save=(lambda v: cache.put_state(GATE_STATE, v)) if cache else None,
        )
        self.gate.on_learned = self._persist_gate
        self.scheduler = Scheduler(
            self.upstream,
            on_update=on_update or (lambda *_a: None),
            metrics=self.metrics,
            cache=self.cache,
            gate=self.gate,
        )
        self._naive = NaivePipeline(self.runner, self.metrics)
        # Accepted-and-retained characters, read from the editor's text (``text_of``).
        self.retention = RetentionTracker(
            self.metrics, text_of, horizons_s=(settings.retained_short_s, settings.retained_long_s)
        )
        self.scheduler.acceptance.on_taken = self.retention.accepted

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Open the upstream connection (or start the local engine) ahead of the first
        keystroke, and the cache file."""
        self._prewarm()
        if self.cache is not None:
            self._spawn(self.cache.open())  # lookups wait for it
            self._spawn(self.gate.restore())  # the model learned in earlier sessions
        self._spawn(self._report_ready())
        # Load the tokenizer's BPE table (~0.1 s) off the keystroke path.
        self._spawn(asyncio.to_thread(tokens.encoding))

    async def _report_ready(self) -> None:
        self._set_health("starting")
        try:
            await self.backend.ensure_ready()
        except BackendError as err:
            self.reports.error(err)
            self._set_health("error")
            return
        self._set_health("ready")

    def _record(self, target: Backend, err: BackendError | None) -> None:
        """One stream on ``target`` is over (``err``: how it failed, None: it worked): the
        router's breaker hears of it, and the health follows it. A stream that worked
        makes the backend ``ready``; one that failed for a cause the user must act on
        (a rejected key, an unknown model, the engine: ``errors.USER_MUST_ACT``, or a
        permanent failure) makes it ``error``; a passing fault (a timeout, a 429)
        changes nothing."""
        self.backend.record(target, err)
        if err is None:
            self._set_health("ready")
        elif err.permanent or err.kind in USER_MUST_ACT:
            self._set_health("error")

    def _set_health(self, health: str) -> None:
        """``health`` (``starting``, ``ready``, ``error``) is the backend's now: the editor
        hears of each change (``sidecar/status``), and ``sidecar.stats`` reports it."""
        if health != self.health:
            self.health = health
            self._on_status(self.status(health))

    def status(self, health: str) -> dict[str, Any]:
        """The ``sidecar/status`` payload: mode, backend, model, health, recent latency (ms)."""
        ttft = self.metrics.recent("upstream_ttft")
        b = self._target()
        return {
            "mode": self.settings.resolved_mode,
            "side": "local" if is_local(b.provider) else "cloud",
            "backend": b.name,
            "provider": b.provider,
            "model": b.model,
            "health": health,
            "recentTtftMs": ttft[-1] if ttft else None,
            "enginePid": self.backend.engine.pid if self.backend.engine is not None else None,
            # The managed engine's OpenAI-compatible root (loopback), for tools that talk
            # to the same engine (the quality benchmark's plain-client columns).
            "engineUrl": self.backend.engine.base_url
            if self.backend.engine is not None and self.backend.engine.port
            else None,
        }

    async def apply_settings(self, settings: Settings) -> bool:
        """Adopt new settings; rebuild the backend if a connection-relevant field changed.

        Returns True when the backend was replaced. The old backend is closed in the
        background, which closes its in-flight streams.
        """
        old = self.settings
        self.settings = settings
        self.gate.enabled, self.gate.threshold = settings.gate_enabled, settings.gate_threshold
        self.gate.seen_ms = settings.gate_seen_ms
        if not backend_changed(old, settings):
            return False
        previous = self.backend
        if self._prewarm_task is not None and not self._prewarm_task.done():
            self._prewarm_task.cancel()  # the old backend's connection is not wanted any more
        self._prewarm_task = None
        self.scheduler.close_all()
        self.backend = build_backend(settings, self._on_switch)
        self._wire(self.backend)
        self.runner.reset()
        self.reports.reset()
        self._spawn(previous.aclose())
        await self.start()
        return True

    async def aclose(self) -> None:
        self.scheduler.close_all()
        self.retention.close()
        await self.gate.persist()
        if self.cache is not None:
            await self.cache.close()
        for t in list(self._bg):
            t.cancel()
        await self.backend.aclose()

    def _spawn(self, coro: Coroutine[Any, Any, object]) -> None:
        t = asyncio.ensure_future(coro)
        self._bg.add(t)
        t.add_done_callback(self._bg.discard)

    def _prewarm(self) -> None:
        if self._prewarm_task is None or self._prewarm_task.done():
            self._prewarm_task = asyncio.ensure_future(self.backend.prewarm())

    def _spare_connection(self) -> None:
        if not self.backend.has_idle_connection():
            self.metrics.count("upstream.spare_prewarms")
            self._prewarm()

    # ------------------------------------------------------------------ document events
    def keystroke(self, uri: str) -> None:
        """A change of ``uri``: it feeds the typing cadence (debounce); a pooled connection
        idle near its keep-alive expiry is re-opened (no handshake on the next request)."""
        self.scheduler.keystroke(uri)
        if self.backend.idle_for_s() > KEEPALIVE_EXPIRY_S * 0.9:
            self._prewarm()

    def close_document(self, uri: str) -> None:  # its request, stream and prefetch end
        self.scheduler.close_document(uri)
        self.retention.closed(uri)

    def _persist_gate(self) -> None:
        """The gate learned: store its model (one write in flight at a time)."""
        if self._gate_write is None or self._gate_write.done():
            self._gate_write = asyncio.ensure_future(self.gate.persist())
            self._bg.add(self._gate_write)
            self._gate_write.add_done_callback(self._bg.discard)

    def context_for(
        self, text: str, offset: int, language: str, uri: str, cursor_line: int, *, menu_item: bool = False
    ) -> CompletionContext:
        """The windows for a request at ``offset`` (characters) of the document ``text``
        (``uri``, cursor on 0-based ``cursor_line``), cut for the backend the next stream
        goes to, with snippets of the other open documents (context_budget.py).
        ``menu_item``: the text holds a completion-menu item at the cursor (its line is
        not the document's). Raises NotCompletable when there is nothing to complete."""
        ctx = self.context_budget.cut(text, offset, language, cursor_line=None if menu_item else cursor_line, uri=uri)
        return self.context_budget.add_crossfile(ctx, uri, cursor_line)

    async def complete(self, req: Request) -> Answer | None:
        """Answer ``req`` (the scheduler, or naive.py's baseline), and time it: time to
        suggestion from ``req.t0``, and the sidecar's own share (ms). None: nothing to show."""
        answer = await self.pipeline().request(req)
        if answer is None:
            return None
        self.metrics.count(f"answers.{answer.source}")
        handler_ms = (time.perf_counter() - req.t0) * 1000
        self.metrics.observe("time_to_suggestion", handler_ms)
        # Time spent in the sidecar itself: all but waiting on the backend and the debounce.
        self.metrics.observe("sidecar_overhead", max(0.0, handler_ms - (req.upstream_s + req.waited_s) * 1000))
        return answer

    def shown(self, item_id: str, req: Request, text: str) -> None:
        """``text`` went to the editor as item ``item_id`` for ``req`` (acceptance.py)."""
        self.pipeline().shown(item_id, req, text)

    def pipeline(self) -> Scheduler | NaivePipeline:
        """What answers the next request: the scheduler, or ``naive.py`` (a ``Request`` in,
        an ``Answer`` out, either way)."""
        return self._naive if self.settings.scheduling == "naive" else self.scheduler

    def accepted(self, item_id: str, chars: int | None) -> None:
        """The editor accepted ``item_id`` (``chars`` characters of it taken so far, or all)."""
        nxt = self.scheduler.acceptance.accepted(item_id, chars)
        if nxt is not None:  # it ended a line: speculate the next one (acceptance.py)
            self.scheduler.prefetch.speculate(*nxt, "next_line")

    def displayed(self, item_id: str) -> None:
        """The editor displayed ``item_id`` (``sidecar/didShowCompletion``, docs/editors.md)."""
        self.scheduler.acceptance.displayed(item_id)

    async def clear_cache(self) -> int:
        """Empty the completion cache (and forget finished streams); entries removed. The
        confidence gate forgets what it learned (its model is kept in the same file)."""
        self.scheduler.forget_streams()
        self.gate.reset()
        return await self.cache.clear() if self.cache is not None else 0

    def _target(self) -> Backend:
        """The concrete backend for the next stream (a router picks a side)."""
        return self.backend.pick()

    def _wire(self, backend: Backend) -> None:
        """Route a managed engine's restart notices to the log channel and its model loads
        to progress reports."""
        for b in backend.all_backends():
            b.notify = self._on_log
            b.progress = self._on_progress
        backend.on_local_error = self.reports.error  # auto mode's background engine starts

    def _on_switch(self, side: str, why: str) -> None:
        """Auto mode changed sides: tell the editor (status) and the user (once per switch)."""
        self.metrics.count(f"auto.switched_to_{side}")
        self._on_status(self.status("ready" if side == "local" else "fallback"))
        self._on_error(BackendError("switch", f"auto mode: using the {side} backend ({why})."))
