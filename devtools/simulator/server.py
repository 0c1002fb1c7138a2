"""The simulated backend: a real aiohttp server on 127.0.0.1 speaking SiliconFlow's API."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from aiohttp import web

from .control import add_control_routes
from .controls import Controls
from .faults import COMPLETION_PATHS, Fault
from .latency import LatencyModel
from .llama_routes import LlamaServerRoutes
from .loading import ModelLoading
from .ollama_routes import OllamaRoutes
from .openai_routes import OpenAIRoutes
from .queries import RecordQueries
from .ratelimits import RateLimiter
from .recorder import RecordedRequest, Recorder, redact_headers
from .responses import send_status
from .shared_engine import SharedEngine

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "Qwen/Qwen2.5-Coder-7B-Instruct"
DEFAULT_OUTPUT = "return a + b\n"

#: Maps a request's JSON body to the full output text (may be ``async``).
Responder = Callable[[dict], str | Awaitable[str]]


class SimulatedBackend(Controls, RecordQueries, OpenAIRoutes, LlamaServerRoutes, OllamaRoutes, ModelLoading):
    """An OpenAI/SiliconFlow-compatible HTTP server for tests and benchmarks.

    Endpoints (under :attr:`base_url`, which ends in ``/v1``): ``POST /v1/completions``,
    ``POST /v1/chat/completions``, ``GET /v1/models``; control endpoints under ``/_sim/``
    (see :mod:`devtools.simulator.control`).

    The output text of a generation request is, in order of priority: the next entry
    queued with :meth:`script`, the ``responder``'s answer for the request body, or
    ``default_output``. It is cut at the first stop sequence and at ``max_tokens``
    pieces (see :func:`devtools.simulator.tokens.plan_output`), then streamed one piece
    per SSE event, paced by the :class:`LatencyModel`.

    Args:
        latency: the latency model (default ``LatencyModel()``: 400 ms TTFT, 50 tokens/s).
        responder: ``body dict -> output text`` (sync or async), or ``None``.
        host: address to bind (default ``127.0.0.1``).
        port: TCP port; ``0`` picks a free one.
        model: model id listed by ``/v1/models`` and used when a request names none.
        api_key: if set, requests whose ``Authorization`` is not ``Bearer <api_key>``
            get 401 ``Invalid token`` (plain text), as SiliconFlow answers (``/infill``
            and ``/api/generate`` answer 401 in their engine's error shape).
        default_output: output when neither script nor responder gives one.

    Local-engine endpoints (at :attr:`url`, the server root; shapes in
    :mod:`devtools.simulator.engines`), sharing the script, responder, latency model,
    faults and request records:

    - llama.cpp ``llama-server``: ``POST /infill`` (SSE ``{"content", "stop"}`` events,
      a final ``stop: true`` event with ``tokens_cached`` and ``timings.cache_n``, the
      prompt tokens a KV cache of the previous prompt would have reused) and
      ``GET /health``. During :meth:`set_loading` both answer 503 ``Loading model``.
      With :attr:`infill_supported` false, ``/infill`` answers 501 like a model without
      FIM tokens.
    - RPM/TPM limits on every generating endpoint (:meth:`set_rate_limits`): 429 with
      ``Retry-After``, as a shared account answers.
    - A shared serving engine for the ``/v1`` generation endpoints (:meth:`set_engine`):
      slots, a FIFO queue, a prefix cache and batched decoding instead of the latency
      model (see :mod:`devtools.simulator.shared_engine`).
    - Ollama: ``POST /api/generate`` (NDJSON; 404 for a model not in
      :meth:`set_ollama_models`, 400 "does not support insert" for a ``suffix`` sent to a
      model listed as such; during :meth:`set_loading` a request waits for the load to
      end, as Ollama loads a model on demand), ``GET /api/version``, ``GET /api/tags``.

    Usable as ``async with SimulatedBackend(...) as sim:`` (start and stop).
    Everything runs on the event loop that called :meth:`start`; the class is not
    thread-safe.
    """

    def __init__(
        self,
        latency: LatencyModel | None = None,
        responder: Responder | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        model: str = DEFAULT_MODEL,
        api_key: str | None = None,
        default_output: str = DEFAULT_OUTPUT,
    ) -> None:
        self._initial_latency = latency if latency is not None else LatencyModel()
        self.latency = self._initial_latency
        self.responder = responder
        #: ``token text -> log-probability`` sent where a /v1/completions request asks
        #: for ``logprobs`` (a test replaces it to make the model sure or unsure).
        self.token_logprob: Callable[[str], float] = lambda _text: -0.05
        self.host = host
        self.model = model
        self.api_key = api_key
        self.default_output = default_output
        self._requested_port = port
        self._port: int | None = None
        self._runner: web.AppRunner | None = None
        self._script: deque[str] = deque()
        self._faults: deque[Fault] = deque()
        self._persistent_faults: list[Fault] = []
        self._recorder = Recorder()
        self._handler_tasks: set[asyncio.Task] = set()
        self._stopping = False
        self._loading_until = 0.0  # time.monotonic() seconds
        self._kv_pieces: list[str] = []  # llama-server's simulated KV cache (one slot)
        #: Prompt evaluation speed of the simulated llama-server slot, tokens/s (None:
        #: instant, the latency model alone paces /infill). See set_infill_prefill.
        self.infill_prefill_tps: float | None = None
        self._slot = asyncio.Lock()
        #: /infill prompt tokens evaluated (not reused from the KV cache), in all.
        self.infill_prefilled_tokens = 0
        self._ollama_models: list[str] | None = None
        self._ollama_no_insert: set[str] = set()
        #: False: ``/infill`` answers 501, as llama-server does for a model without FIM tokens.
        self.infill_supported = True
        self._load_on_demand_s = 0.0
        self._model_loaded = True
        self._load_task: asyncio.Task[None] | None = None
        self._load_waiters = 0
        #: Model loads begun and finished in load-on-demand mode (see set_load_on_demand).
        self.loads_started = 0
        self.loads_completed = 0
        #: RPM/TPM limits of the generation endpoints (see set_rate_limits).
        self.rate_limiter = RateLimiter()
        #: The shared engine pacing the /v1 generation endpoints (None: the latency model).
        self.engine: SharedEngine | None = None
        self._refused_base = 0  # rate_limiter.refused when the engine's counters were reset

    # -- lifecycle ------------------------------------------------------------------

    async def start(self) -> SimulatedBackend:
        """Bind ``host:port`` and start serving. Returns ``self``.

        Raises:
            RuntimeError: if already started.
            OSError: if the address cannot be bound.
        """
        if self._runner is not None:
            raise RuntimeError("SimulatedBackend is already started")
        app = web.Application()
        self._add_routes(app)
        # handler_cancellation: aiohttp cancels a handler as soon as its client's
        # connection is lost, which is how disconnects are noticed promptly.
        runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self._requested_port))
            sock.setblocking(False)
            site = web.SockSite(runner, sock)
            await site.start()
        except BaseException:
            sock.close()
            await runner.cleanup()
            raise
        self._port = sock.getsockname()[1]
        self._runner = runner
        logger.info("simulated backend listening on %s", self.base_url)
        return self

    async def stop(self) -> None:
        """Cancel running handlers (stalled ones too), close connections, unbind.

        Requests cut short this way are not marked ``disconnected``. Safe to call twice.
        """
        runner = self._runner
        if runner is None:
            return
        self._stopping = True
        try:
            tasks = [t for t in self._handler_tasks if not t.done()]
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=2.0)
            await runner.cleanup()
        finally:
            self._runner = None
            self._port = None
            self._stopping = False
        logger.info("simulated backend stopped")

    async def __aenter__(self) -> SimulatedBackend:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def port(self) -> int:
        """The bound TCP port. Raises RuntimeError before :meth:`start`."""
        if self._port is None:
            raise RuntimeError("SimulatedBackend is not started")
        return self._port

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT/v1``. Raises RuntimeError before :meth:`start`."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    @property
    def url(self) -> str:
        """``http://HOST:PORT`` (no ``/v1``), e.g. for the ``/_sim/`` control endpoints."""
        return self.base_url[: -len("/v1")]

    # -- control --------------------------------------------------------------------

    def reset(self) -> None:
        """Forget records, scripted outputs, faults, the simulated load and KV cache,
        rate limits and the shared engine; restore the initial latency model."""
        self._script.clear()
        self.clear_faults()
        self.latency = self._initial_latency
        self._recorder.clear()
        self._loading_until = 0.0
        self._kv_pieces = []
        self.infill_prefill_tps = None
        self.infill_prefilled_tokens = 0
        self.rate_limiter = RateLimiter()
        self.engine = None
        self._refused_base = 0

    # -- observation ----------------------------------------------------------------

    # -- HTTP plumbing ----------------------------------------------------------------

    def _add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/completions", partial(self._handle_generation, chat=False))
        app.router.add_post("/v1/chat/completions", partial(self._handle_generation, chat=True))
        app.router.add_get("/v1/models", self._handle_models)
        app.router.add_post("/infill", partial(self._handle, work=self._infill))
        app.router.add_get("/health", partial(self._handle, work=self._health))
        app.router.add_post("/api/generate", partial(self._handle, work=self._generate))
        app.router.add_get("/api/version", partial(self._handle, work=self._ollama_version))
        app.router.add_get("/api/tags", partial(self._handle, work=self._ollama_tags))
        add_control_routes(app, self)

    async def _begin(self, request: web.Request) -> tuple[RecordedRequest, bool]:
        """Record a request. Returns the record and whether its body was valid JSON."""
        received_at = time.monotonic()
        raw = await request.read()
        body: Any = None
        body_ok = True
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body_ok = False
        headers, auth_present, auth_scheme = redact_headers(request.headers)
        record = RecordedRequest(
            index=self._recorder.next_index(),
            path=request.path,
            method=request.method,
            body=body if isinstance(body, dict) else None,
            headers=headers,
            auth_present=auth_present,
            auth_scheme=auth_scheme,
            received_at=received_at,
            trace_id=uuid.uuid4().hex,
            stream=isinstance(body, dict) and body.get("stream") is True,
            client_port=_peer_port(request),
        )
        self._recorder.add(record)
        logger.debug("request #%d %s %s", record.index, record.method, record.path)
        return record, body_ok

    def _take_fault(self, path: str) -> Fault | None:
        for i, fault in enumerate(self._faults):
            if fault.applies_to(path):
                del self._faults[i]
                return fault
        for fault in reversed(self._persistent_faults):
            if fault.applies_to(path):
                return fault
        return None

    def _auth_failed(self, request: web.Request) -> bool:
        return self.api_key is not None and request.headers.get("Authorization") != f"Bearer {self.api_key}"

    def _mark_disconnected(self, record: RecordedRequest) -> None:
        if not record.disconnected:
            record.disconnected = True
            record.disconnected_at = time.monotonic()
            logger.debug("request #%d: client disconnected after %d tokens", record.index, record.tokens_sent)
            self._recorder.changed()

    async def _handle(
        self,
        request: web.Request,
        work: Callable[[web.Request, RecordedRequest, bool], Awaitable[web.StreamResponse]],
    ) -> web.StreamResponse:
        """Record a request and run ``work`` on it; note disconnects and the end time."""
        task = asyncio.current_task()
        if task is not None:
            self._handler_tasks.add(task)  # so that stop() can cancel it
        try:
            record, body_ok = await self._begin(request)
            try:
                if record.path in COMPLETION_PATHS and not self._auth_failed(request):
                    refusal = self.rate_limiter.check(record.body)
                    if refusal is not None:
                        record.fault = "rate_limit"
                        return await send_status(request, record, refusal.status, refusal.body, refusal.headers)
                return await work(request, record, body_ok)
            except asyncio.CancelledError:
                if not self._stopping:
                    self._mark_disconnected(record)
                raise
            except ConnectionResetError:
                # A write hit a closed connection before aiohttp noticed the loss; what
                # is returned here is never delivered.
                self._mark_disconnected(record)
                return web.Response(status=499)
            finally:
                record.ended_at = time.monotonic()
                self._recorder.changed()
        finally:
            if task is not None:
                self._handler_tasks.discard(task)

    # -- /v1/models -------------------------------------------------------------------

    # -- generation -------------------------------------------------------------------

    # -- llama-server -----------------------------------------------------------------

    # -- Ollama -----------------------------------------------------------------------


def _peer_port(request: web.Request) -> int | None:
    peer = request.transport.get_extra_info("peername") if request.transport else None
    return peer[1] if isinstance(peer, tuple) and len(peer) >= 2 else None
