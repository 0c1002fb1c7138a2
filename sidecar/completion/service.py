"""The completion service: from a document and a cursor to the text of one suggestion.

It owns the backend, the per-model FIM fallbacks and the metrics. One call to
:meth:`CompletionService.complete` is one upstream stream at most (two when a model
refuses native FIM and the request is retried with the next strategy). Every slow step is
an ``await``, so a cancelled LSP request stops here and closes its upstream stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

from ..backends.base import StreamInfo
from ..backends.errors import FIM_UNSUPPORTED, BackendError
from ..backends.factory import build_backend
from ..backends.openai_compat import KEEPALIVE_EXPIRY_S
from ..config import Settings
from ..metrics import Metrics
from . import tokens
from .cache import CacheKey, CompletionCache
from .context import CompletionContext, NotCompletable, build_context
from .postprocess import StreamFilter
from .prompt import build_request, choose_strategy
from .scheduler import Scheduler, UpdateSink

log = logging.getLogger(__name__)

ERROR_QUIET_S = 60.0
LATENCY_WARN_EVERY_S = 600.0

# Fields whose change needs a new backend (and so a new connection pool or engine).
_BACKEND_FIELDS = (
    "provider", "mode", "api_key", "base_url", "siliconflow_region", "model", "http2",
    "connect_timeout_ms", "request_timeout_ms", "cold_start_timeout_ms",
    "local_model_path", "local_n_ctx", "local_n_gpu_layers", "local_threads",
    "local_engine", "local_url", "local_model",
)


@dataclass
class Completion:
    """One finished suggestion. Times are milliseconds from the start of ``complete``."""

    id: str
    text: str
    strategy: str
    ttft_ms: float | None
    upstream_ms: float
    wait_ms: float  # waiting for the backend to be ready (cold engine start)
    total_ms: float
    trace_id: str | None
    truncated: bool


@dataclass
class StreamOutcome:
    """How one upstream stream went. Times in milliseconds."""

    info: StreamInfo
    strategy: str = ""
    wait_ms: float = 0.0  # waiting for the backend to be ready (cold engine start)
    upstream_ms: float = 0.0
    error: BackendError | None = None
    deadline_hit: bool = False


class CompletionService:
    """Runs completions against the configured backend.

    ``on_error(err)`` is called once per failure cause, and again only after that cause
    was absent for a minute (the server turns it into one ``window/showMessage``); ``on_status(d)``
    receives ``sidecar/status`` payloads.
    """

    def __init__(self, settings: Settings, *, on_error: Callable[[BackendError], None],
                 on_status: Callable[[dict[str, Any]], None] | None = None,
                 on_update: UpdateSink | None = None) -> None:
        self.settings = settings
        self.metrics = Metrics()
        self._on_error = on_error
        self._on_status = on_status or (lambda _d: None)
        self._error_seen: dict[str, float] = {}  # cause -> monotonic time last seen
        self._rejected: dict[str, set[str]] = {}
        self._ids = itertools.count(1)
        self._prewarm_task: asyncio.Task[None] | None = None
        self._bg: set[asyncio.Task[Any]] = set()
        self._latency_warned_at = -1e9
        self.backend = build_backend(settings, self._on_switch)
        self._wire(self.backend)
        self.cache: CompletionCache | None = None
        if settings.cache_enabled:
            self.cache = CompletionCache(
                settings.resolved_cache_path, max_entries=settings.cache_max_entries,
                max_bytes=settings.cache_max_bytes, ttl_s=settings.cache_ttl_s,
            )
        self.scheduler = Scheduler(
            pump=self._pump, settings=lambda: self.settings, recent_ttft_ms=self.recent_ttft_ms,
            on_update=on_update or (lambda *_a: None), metrics=self.metrics,
            cache=self.cache, cache_key=self.cache_key, make_context=self.make_context,
            local_backend=lambda: self._target().kind == "local",
        )

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
            self._report(err)
            self._on_status(self.status("error"))
            return
        self._on_status(self.status("ready"))

    def status(self, health: str) -> dict[str, Any]:
        """The ``sidecar/status`` payload: mode, backend, model, health, recent latency (ms)."""
        ttft = self.metrics.recent("upstream_ttft")
        b = self._target()
        return {
            "mode": self.settings.resolved_mode,
            "side": "local" if b.kind == "local" else "cloud",
            "backend": b.name,
            "provider": b.kind,
            "model": b.model,
            "health": health,
            "recentTtftMs": ttft[-1] if ttft else None,
            "enginePid": getattr(getattr(self.backend, "engine", None), "pid", None),
        }

    async def apply_settings(self, settings: Settings) -> bool:
        """Adopt new settings; rebuild the backend if a connection-relevant field changed.

        Returns True when the backend was replaced. The old backend is closed in the
        background, which closes its in-flight streams.
        """
        old = self.settings
        self.settings = settings
        if all(getattr(old, f) == getattr(settings, f) for f in _BACKEND_FIELDS):
            return False
        previous = self.backend
        self.scheduler.close_all()
        self.backend = build_backend(settings, self._on_switch)
        self._wire(self.backend)
        self._rejected.clear()
        self._error_seen.clear()
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
        has_idle = getattr(self.backend, "has_idle_connection", None)
        if has_idle is not None and not has_idle():
            self.metrics.count("upstream.spare_prewarms")
            self._prewarm()

    def on_keystroke(self) -> None:
        """Called on every document change: re-open the pooled connection if it has been
        idle long enough for the keep-alive to expire, so the next completion skips the
        TCP/TLS handshake."""
        idle = getattr(self.backend, "idle_for_s", lambda: 0.0)()
        if idle > KEEPALIVE_EXPIRY_S * 0.9:
            self._prewarm()

    # ------------------------------------------------------------------ completion
    def _report(self, err: BackendError) -> None:
        """Count an upstream error and show it to the user once per cause: again only after
        the cause has been absent for ``ERROR_QUIET_S`` seconds (an intermittent 429 does
        not pop up on every other keystroke)."""
        self.metrics.count(f"errors.{err.kind}")
        log.warning("upstream error (%s): %s", err.kind, err.message)
        now = time.monotonic()
        last = self._error_seen.get(err.kind)
        self._error_seen[err.kind] = now
        if last is None or now - last > ERROR_QUIET_S:
            self._on_error(err)

    async def run_stream(self, ctx: CompletionContext, filt: StreamFilter,
                         on_delta: Callable[[], None] | None = None) -> StreamOutcome:
        """Stream one upstream completion for ``ctx`` into ``filt`` until the filter says
        stop, the stream ends, or ``request_timeout_ms`` passes; call ``on_delta()`` after
        each piece of text. A model that refuses native FIM is retried once per strategy.

        Upstream errors are reported (one message per cause) and returned in
        ``StreamOutcome.error``; never raises BackendError. Raises
        ``asyncio.CancelledError`` when cancelled, after closing the upstream stream.
        """
        t0 = time.perf_counter()
        s = self.settings
        target = self._target()
        model = target.model
        rejected = self._rejected.setdefault(model, set())
        out = StreamOutcome(info=StreamInfo())
        try:
            await target.ensure_ready()
        except BackendError as err:
            self._record(target, err)
            self._report(err)
            out.error = err
            return out
        out.wait_ms = (time.perf_counter() - t0) * 1000
        for _attempt in range(3):
            strategy = choose_strategy(target.api, model, s.fim, frozenset(rejected))
            req = build_request(ctx, strategy, provider=target.api, model=model,
                                max_tokens=s.max_tokens, temperature=s.temperature)
            out.info = info = StreamInfo()
            out.strategy = req.strategy
            self.metrics.count("upstream.requests")
            try:
                async with asyncio.timeout(s.request_timeout_ms / 1000):
                    async with contextlib.aclosing(target.stream(req, info)) as deltas:
                        async for delta in deltas:
                            stop = filt.feed(delta)
                            if on_delta is not None:
                                on_delta()
                            if stop:
                                self.metrics.count("upstream.closed_early")
                                break
                if filt.done:  # closed before its end: the socket went with it
                    self._spare_connection()
            except TimeoutError:
                out.deadline_hit = True
                self.metrics.count("upstream.deadline")
                log.info("deadline of %d ms reached with %d chars", s.request_timeout_ms, len(filt.raw))
            except BackendError as err:
                if err.kind == FIM_UNSUPPORTED and strategy not in rejected:
                    log.info("model %s refused strategy %s; falling back", model, strategy)
                    rejected.add(strategy)
                    continue
                self._record(target, err)
                self._report(err)
                out.error = err
                return out
            except asyncio.CancelledError:
                self.metrics.count("upstream.cancelled")
                # Closing a stream mid-way closes its socket (HTTP/1.1); open a spare one
                # now so the next request does not pay for a TCP and TLS handshake.
                self._spare_connection()
                raise
            break
        t_end = time.perf_counter()
        self._record(target, None)
        log.info("upstream stream ended", extra={"fields": {
            "backend": target.name, "model": model, "strategy": out.strategy,
            "upstream_trace_id": info.trace_id, "ttft_ms": info.ttft_ms,
            "events": info.events, "chars": len(filt.raw), "closed_early": filt.done,
            "truncated": info.truncated, "deadline": out.deadline_hit,
        }})
        out.upstream_ms = ((info.ended_at or t_end) - info.sent_at) * 1000 if info.sent_at else 0.0
        if info.ttft_ms is not None:
            self.metrics.observe("upstream_ttft", info.ttft_ms)
            self._check_latency(info, target)
        self.metrics.observe("upstream_stream", out.upstream_ms)
        self.metrics.count("upstream.malformed_events", info.malformed_events)
        generated = info.usage.get("completion_tokens") if isinstance(info.usage.get("completion_tokens"), int) else None
        self.metrics.count("tokens.generated", generated if generated is not None else (tokens.count(filt.raw) if filt.raw else 0))
        if info.truncated:
            self.metrics.count("upstream.truncated")
        return out

    async def _pump(self, ctx: CompletionContext, filt: StreamFilter, on_delta: Callable[[], None]) -> str:
        out = await self.run_stream(ctx, filt, on_delta)
        if out.error is not None:
            return "error"
        return "partial" if (out.info.truncated or out.deadline_hit) else "complete"

    def make_context(self, doc_prefix: str, doc_suffix: str, language: str) -> CompletionContext | None:
        """Windows for a speculated document (``\n`` line breaks), cut exactly as a real
        request's would be, so the cache key matches; None when not completable."""
        s = self.settings
        try:
            return build_context(doc_prefix + doc_suffix, len(doc_prefix), language, s.prefix_tokens, s.suffix_tokens)
        except NotCompletable:
            return None

    def _target(self) -> Any:
        """The concrete backend for the next stream (a router picks a side)."""
        pick = getattr(self.backend, "pick", None)
        return pick() if pick is not None else self.backend

    def _record(self, target: Any, err: BackendError | None) -> None:
        record = getattr(self.backend, "record", None)
        if record is not None:
            record(target, err)

    def _wire(self, backend: Any) -> None:
        """Let a managed engine tell the user about restarts (once per restart)."""
        for b in (backend, getattr(backend, "local", None)):
            if b is not None and hasattr(b, "notify"):
                b.notify = lambda msg: self._on_error(BackendError("engine_restart", msg))

    def _on_switch(self, side: str, why: str) -> None:
        """Auto mode changed sides: tell the editor (status) and the user (once per switch)."""
        self.metrics.count(f"auto.switched_to_{side}")
        self._on_status(self.status("ready" if side == "local" else "fallback"))
        self._on_error(BackendError("switch", f"auto mode: using the {side} backend ({why})."))

    def cache_key(self, ctx: CompletionContext) -> CacheKey:
        """The cache key of a context on the backend and model the next stream would use."""
        b = self._target()
        return CacheKey(backend=f"{b.kind}:{getattr(b, 'base_url', '')}", model=b.model,
                        language=ctx.language, prefix=ctx.prefix, suffix=ctx.suffix)

    def busy_connections(self) -> int | None:
        """Upstream connections currently carrying a request (None when unknown)."""
        fn = getattr(self.backend, "busy_connections", None)
        return fn() if fn else None

    def recent_ttft_ms(self) -> float | None:
        """Median of the last 20 upstream TTFTs in ms (None before the first)."""
        xs = self.metrics.recent("upstream_ttft")[-20:]
        return statistics.median(xs) if xs else None

    def _check_latency(self, info: StreamInfo, target: Any) -> None:
        """Warn once (then at most every ``LATENCY_WARN_EVERY_S``) when the recent p90 TTFT
        passes ``latency_warn_ms``, naming the likely cause: a slow network round trip
        (response headers were slow too) or a slow or overloaded model."""
        xs = self.metrics.recent("upstream_ttft")[-20:]
        if len(xs) < 5:
            return
        p90 = sorted(xs)[int(0.9 * (len(xs) - 1))]
        now = time.monotonic()
        if p90 < self.settings.latency_warn_ms or now - self._latency_warned_at < LATENCY_WARN_EVERY_S:
            return
        self._latency_warned_at = now
        headers_ms = (info.headers_at - info.sent_at) * 1000 if info.headers_at else None
        if headers_ms is not None and headers_ms > 0.5 * (info.ttft_ms or 0):
            cause = (f"the connection is slow (response headers took {headers_ms:.0f} ms): check the network, "
                     f"a proxy, or the region (SiliconFlow .cn vs .com)")
        else:
            cause = f"{target.name} is slow to start generating ({target.model}); try a smaller model or local mode"
        self.metrics.count("latency_warnings")
        self._on_status(self.status("slow"))
        self._on_error(BackendError("slow", f"completions are slow: p90 time to first token {p90:.0f} ms over the last "
                                            f"{len(xs)} requests; likely cause: {cause}. Run `sidecar doctor` for details."))

    def new_id(self) -> str:
        return f"c{next(self._ids)}"

    async def complete(self, ctx: CompletionContext) -> Completion | None:
        """Stream one completion for ``ctx`` to its end and return it cleaned, or None when
        there is nothing to show (empty text, an upstream error, a deadline with no text).
        This is the unscheduled path (``scheduling = "naive"``): no debounce, no reuse.

        Raises ``asyncio.CancelledError`` when the caller is cancelled; the upstream stream
        is closed before it propagates. Never raises BackendError.
        """
        t0 = time.perf_counter()
        self.metrics.count("requests")
        filt = StreamFilter(ctx)
        out = await self.run_stream(ctx, filt)
        if out.error is not None:
            return None
        text = filt.text()
        if not text:
            self.metrics.count("empty")
            return None
        self.metrics.count("suggestions")
        info = out.info
        return Completion(
            id=self.new_id(), text=text, strategy=out.strategy, ttft_ms=info.ttft_ms,
            upstream_ms=out.upstream_ms, wait_ms=out.wait_ms, total_ms=(time.perf_counter() - t0) * 1000,
            trace_id=info.trace_id, truncated=info.truncated,
        )
