"""The completion service: what the LSP surface talks to.

It owns the backend (rebuilt when a connection-relevant setting changes), the cache, the
metrics, the scheduler and the naive pipeline (``pipeline()`` picks one per request),
the context cutting (``context_budget.py``), the stream runner (``stream.py``) and the user
reports (``reports.py``), and it is the scheduler's ``Upstream``. See
docs/architecture.md ("The path of a keystroke").
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import statistics
from typing import Any, Callable

from ..backends.base import Backend
from ..backends.errors import BackendError
from ..backends.factory import build_backend
from ..backends.openai_compat import KEEPALIVE_EXPIRY_S
from ..config import Settings, backend_changed
from ..metrics import Metrics
from ..providers import is_local
from . import crossfile, tokens
from .cache import CacheKey, CompletionCache
from .context import CompletionContext
from .context_budget import ContextBudget
from .naive import NaivePipeline
from .postprocess import StreamFilter
from .reports import Reports
from .scheduler import Scheduler
from .stream import StreamDeps, StreamOutcome, StreamRunner
from .updates import UpdateSink

log = logging.getLogger(__name__)



class CompletionService:
    """Runs completions against the configured backend. ``on_error(err)``: a cause the
    user must act on (``reports.py``: ``window/showMessage``); ``on_log(message)``: a
    notice (``window/logMessage``); ``on_progress(kind, message)``: a model load
    (``$/progress``); ``on_status(d)``: ``sidecar/status`` payloads."""

    def __init__(self, settings: Settings, *, on_error: Callable[[BackendError], None],
                 on_status: Callable[[dict[str, Any]], None] | None = None,
                 on_update: UpdateSink | None = None,
                 on_log: Callable[[str], None] | None = None,
                 on_progress: Callable[[str, str], None] | None = None) -> None:
        self.settings = settings
        self.metrics = Metrics()
        self._on_error = on_error
        self._on_log = on_log or (lambda _m: None)
        self._on_progress = on_progress or (lambda _k, _m: None)
        self._on_status = on_status or (lambda _d: None)
        self._ids = itertools.count(1)
        self._prewarm_task: asyncio.Task[None] | None = None
        self._bg: set[asyncio.Task[Any]] = set()
        self.reports = Reports(self.metrics, on_error=on_error, on_log=self._on_log,
                               on_slow=lambda: self._on_status(self.status("slow")),
                               warn_ms=lambda: self.settings.latency_warn_ms)
        self.backend = build_backend(settings, self._on_switch)
        self._wire(self.backend)
        self.cache = CompletionCache.from_settings(settings)
        self.contexts = ContextBudget(lambda: self.settings, self._target, self.metrics)
        self.streams = StreamRunner(StreamDeps(
            settings=lambda: self.settings, target=self._target,
            record=lambda target, err: self.backend.record(target, err),
            metrics=self.metrics, reports=self.reports, contexts=self.contexts,
            spare_connection=self._spare_connection))
        self.scheduler = Scheduler(self, on_update=on_update or (lambda *_a: None), metrics=self.metrics,
                                   cache=self.cache)
        self._naive = NaivePipeline(self)

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Open the upstream connection (or start the local engine) ahead of the first
        keystroke, and the cache file."""
        self._prewarm()
        if self.cache is not None:
            self._spawn(self.cache.open())  # lookups wait for it
        self._spawn(self._report_ready())
        # Load the tokenizer's BPE table (~0.1 s) off the keystroke path.
        self._spawn(asyncio.to_thread(tokens.encoding))

    async def _report_ready(self) -> None:
        self._on_status(self.status("starting"))
        try:
            await self.backend.ensure_ready()
        except BackendError as err:
            self.reports.error(err)
            self._on_status(self.status("error"))
            return
        self._on_status(self.status("ready"))

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
            "engineUrl": self.backend.engine.base_url if self.backend.engine is not None and self.backend.engine.port else None,
        }

    async def apply_settings(self, settings: Settings) -> bool:
        """Adopt new settings; rebuild the backend if a connection-relevant field changed.

        Returns True when the backend was replaced. The old backend is closed in the
        background, which closes its in-flight streams.
        """
        old = self.settings
        self.settings = settings
        if not backend_changed(old, settings):
            return False
        previous = self.backend
        if self._prewarm_task is not None and not self._prewarm_task.done():
            self._prewarm_task.cancel()  # the old backend's connection is not wanted any more
        self._prewarm_task = None
        self.scheduler.close_all()
        self.backend = build_backend(settings, self._on_switch)
        self._wire(self.backend)
        self.streams.reset()
        self.reports.reset()
        self._spawn(previous.aclose())
        await self.start()
        return True

    async def aclose(self) -> None:
        self.scheduler.close_all()
        if self.cache is not None:
            await self.cache.close()
        for t in list(self._bg):
            t.cancel()
        await self.backend.aclose()

    def _spawn(self, coro) -> None:
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

    def pipeline(self) -> Scheduler | NaivePipeline:
        """What answers the next request: the scheduler, or ``naive.py`` (a ``Request`` in,
        an ``Answer`` out, either way)."""
        return self._naive if self.settings.scheduling == "naive" else self.scheduler

    def accepted(self, item_id: str, chars: int | None) -> None:
        """The editor accepted ``item_id`` (``chars`` UTF-16 units of it, or all)."""
        nxt = self.scheduler.acceptance.accepted(item_id, chars)
        if nxt is not None:  # it ended a line: speculate the next one (acceptance.py)
            self.scheduler.prefetch.speculate(*nxt, "next_line")

    async def clear_cache(self) -> int:
        """Empty the completion cache (and forget finished streams); entries removed."""
        self.scheduler.forget_streams()
        return await self.cache.clear() if self.cache is not None else 0

    async def run_stream(self, ctx: CompletionContext, filt: StreamFilter,
                         on_delta: Callable[[], None] | None = None) -> StreamOutcome:
        """One upstream stream for ``ctx`` into ``filt`` (``stream.py``)."""
        return await self.streams.run(ctx, filt, on_delta)

    def local_backend(self) -> bool:  # Upstream.local_backend
        return is_local(self._target().provider)

    async def pump(self, ctx: CompletionContext, filt: StreamFilter, on_delta: Callable[[], None]) -> str:
        """``Upstream.pump``: ``complete``, ``partial`` (cut, deadline) or ``error``."""
        out = await self.run_stream(ctx, filt, on_delta)
        if out.error is not None:
            return "error"
        return "partial" if (out.info.truncated or out.deadline_hit) else "complete"

    def make_context(self, doc_prefix: str, doc_suffix: str, language: str) -> CompletionContext | None:
        """Windows for a speculated document (``Upstream.make_context``: ``context_budget.py``)."""
        return self.contexts.make_context(doc_prefix, doc_suffix, language)

    def windows(self) -> tuple[int, int]:
        """``(prefix_tokens, suffix_tokens)`` to cut now (``context_budget.py``)."""
        return self.contexts.windows()

    def backend_busy(self) -> bool:
        """True while the backend the next stream would use answers markedly slower than
        its idle level (``load.py``): speculative prefetch waits, prompts shrink."""
        return self.contexts.busy()

    def backend_limited(self) -> bool:
        """True from a 429/503 of the backend the next stream would use until its next
        success (``backends/ratelimit.py``): speculative prefetch waits meanwhile."""
        cooldown = self._target().cooldown
        return bool(cooldown is not None and cooldown.in_episode)

    def backend_cold(self) -> bool:
        """True while the backend the next stream would use loads models on request
        (``Backend.loads_models``: the managed engine, llama-server, Ollama) and has sent
        no stream event since it started or came back (it may load its model on the next
        request). A cloud's silent first stream is a fault, never a load to wait for."""
        target = self._target()
        return bool(getattr(target, "loads_models", False)) and self.streams.cold(target)

    def _target(self) -> Backend:
        """The concrete backend for the next stream (a router picks a side)."""
        return self.backend.pick()

    def _wire(self, backend: Backend) -> None:
        """Route a managed engine's restart notices to the log channel and its model loads
        to progress reports."""
        for b in backend.sides():
            b.notify = self._on_log
            b.progress = self._on_progress
        backend.on_local_error = self.reports.error  # auto mode's background engine starts

    def _on_switch(self, side: str, why: str) -> None:
        """Auto mode changed sides: tell the editor (status) and the user (once per switch)."""
        self.metrics.count(f"auto.switched_to_{side}")
        self._on_status(self.status("ready" if side == "local" else "fallback"))
        self._on_error(BackendError("switch", f"auto mode: using the {side} backend ({why})."))

    def cache_key(self, ctx: CompletionContext) -> CacheKey:
        """The cache key of a context on the backend and model the next stream would use."""
        b = self._target()
        return CacheKey(backend=f"{b.provider}:{b.base_url}", model=b.model,
                        language=ctx.language, prefix=ctx.prefix, suffix=ctx.suffix,
                        extra=crossfile.digest(ctx.snippets, ctx.repo, ctx.path))

    def recent_ttft_ms(self) -> float | None:
        """Median of the last 20 upstream TTFTs in ms (None before the first)."""
        xs = self.metrics.recent("upstream_ttft")[-20:]
        return statistics.median(xs) if xs else None

    def new_id(self) -> str:
        return f"c{next(self._ids)}"
