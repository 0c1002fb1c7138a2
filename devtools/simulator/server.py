"""The simulated backend: a real aiohttp server on 127.0.0.1 speaking SiliconFlow's API."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import socket
import time
import uuid
from collections import deque
from functools import partial
from typing import Any, Awaitable, Callable, Iterable, Union

from aiohttp import web

from . import engines
from .control import add_control_routes
from .faults import COMPLETION_PATHS, Fault
from .latency import LatencyModel
from .ratelimits import RateLimiter
from .shared_engine import EngineConfig, SharedEngine, engine_prompt, engine_stream, engine_whole
from .protocol import ChatShape, CompletionShape, RequestError, Shape, error_body, parse_generation
from .recorder import RecordedRequest, Recorder, redact_headers
from .responses import (TRACE_HEADER, Framing, apply_plain_fault, hang_before_answering, respond_whole, send, send_status,
                        stream, stream_frames)
from .tokens import OutputPlan, count_tokens, plan_output

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "Qwen/Qwen2.5-Coder-7B-Instruct"
DEFAULT_OUTPUT = "return a + b\n"

#: Maps a request's JSON body to the full output text (may be ``async``).
Responder = Callable[[dict], Union[str, Awaitable[str]]]


class SimulatedBackend:
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

    def script(self, outputs: Iterable[str]) -> None:
        """Append output texts to the queue; each generation request takes the next one.

        Raises:
            TypeError: if an output is not a string.
        """
        items = list(outputs)
        for item in items:
            if not isinstance(item, str):
                raise TypeError(f"scripted outputs must be strings, got {type(item).__name__}")
        self._script.extend(items)

    @property
    def pending_outputs(self) -> int:
        """How many scripted outputs are still queued."""
        return len(self._script)

    def set_responder(self, responder: Responder | None) -> None:
        """Replace the responder (``body dict -> output text``; ``None`` removes it)."""
        self.responder = responder

    def set_latency(self, latency: LatencyModel) -> None:
        """Use ``latency`` for requests that arrive from now on."""
        self.latency = latency

    def inject(self, fault: Fault, persistent: bool = False) -> None:
        """Apply ``fault`` to the next matching request, or to all of them.

        One-shot faults form a queue: each request takes the first queued fault whose
        :meth:`Fault.applies_to` matches its path (by default the two generation paths).
        A persistent fault applies to every matching request until :meth:`clear_faults`;
        one-shot faults take priority, and among persistent faults the latest wins.
        """
        if persistent:
            self._persistent_faults.append(fault)
        else:
            self._faults.append(fault)

    def clear_faults(self) -> None:
        """Drop all queued and persistent faults."""
        self._faults.clear()
        self._persistent_faults.clear()

    def set_loading(self, seconds: float) -> None:
        """Simulate a model load lasting ``seconds`` (from now; ``0`` ends it).

        Meanwhile ``GET /health`` and ``POST /infill`` answer 503
        ``{"error": {"code": 503, "message": "Loading model", ...}}`` (as llama-server
        does), and ``POST /api/generate`` waits until the load ends before its TTFT (as
        Ollama does); the ``/v1`` endpoints are not affected.

        Raises:
            ValueError: if ``seconds`` is negative.
        """
        if not seconds >= 0:
            raise ValueError(f"seconds must be >= 0, got {seconds!r}")
        self._loading_until = time.monotonic() + seconds

    def set_load_on_demand(self, seconds: float) -> None:
        """Make the ``/v1`` generation endpoints and Ollama's ``/api/generate`` load the
        model on demand, as engines that load lazily do (Ollama, a serverless cloud
        deployment): the model is unloaded now;
        the first request starts a load of ``seconds``, and every request waits for it
        before sending any byte (no headers either). When every waiting request has
        disconnected before the load ends, the load is abandoned and the next request
        starts it again. ``loads_started`` and ``loads_completed`` count them; ``0``
        turns the mode off (model loaded).

        Raises:
            ValueError: if ``seconds`` is negative.
        """
        if not seconds >= 0:
            raise ValueError(f"seconds must be >= 0, got {seconds!r}")
        self._load_on_demand_s = seconds
        self._model_loaded = seconds == 0
        if self._load_task is not None:
            self._load_task.cancel()
            self._load_task = None

    async def _await_model_load(self) -> None:
        if self._load_task is None or self._load_task.done():
            self.loads_started += 1
            self._load_task = asyncio.ensure_future(asyncio.sleep(self._load_on_demand_s))
        task = self._load_task
        self._load_waiters += 1
        try:
            await asyncio.shield(task)
            if not self._model_loaded:
                self._model_loaded = True
                self.loads_completed += 1
        finally:
            self._load_waiters -= 1
            if not self._model_loaded and self._load_waiters == 0 and not task.done():
                task.cancel()  # nobody waits any more: the engine drops the load
                logger.info("simulated backend: model load abandoned (every waiting request left)")

    @property
    def loading_s(self) -> float:
        """Seconds of the simulated model load still to go (0 when loaded)."""
        return max(0.0, self._loading_until - time.monotonic())

    def set_rate_limits(self, rpm: int | None = None, tpm: int | None = None, *,
                        retry_after_s: float | None = None, send_retry_after: bool = True) -> None:
        """Limit the generation endpoints to ``rpm`` requests and ``tpm`` tokens per
        sliding minute (None: no limit; both None turns limits off), as a shared
        SiliconFlow key is. A request over a limit gets 429 with SiliconFlow's body naming
        it and a ``Retry-After`` header in seconds: ``retry_after_s`` when given, else the
        whole seconds until the window lets it through; ``send_retry_after=False`` sends
        no header. See :mod:`devtools.simulator.ratelimits`.

        Raises:
            ValueError: for a limit that is not a positive integer, a negative wait.
        """
        self.rate_limiter = RateLimiter(rpm, tpm, retry_after_s=retry_after_s, send_retry_after=send_retry_after)
        self._refused_base = 0

    def set_engine(self, config: EngineConfig | None) -> SharedEngine | None:
        """Pace the ``/v1`` generation endpoints by one :class:`SharedEngine` with
        ``config`` (a new engine: empty cache, fresh counters), or, with ``None``, by the
        latency model again. Returns the engine. The local-engine endpoints keep theirs."""
        self.engine = None if config is None else SharedEngine(config)
        self._refused_base = self.rate_limiter.refused
        return self.engine

    def reset_engine_counters(self) -> None:
        """Start the engine's counters (and its count of 429s) afresh now."""
        if self.engine is not None:
            self.engine.reset_counters()
        self._refused_base = self.rate_limiter.refused

    def engine_stats(self) -> dict[str, Any] | None:
        """The engine's counters (:meth:`SharedEngine.stats`) plus ``rate_limited``: the
        429s the rate limiter sent since they were reset, and ``rate_limits``. None
        without an engine."""
        if self.engine is None:
            return None
        return {**self.engine.stats(), "rate_limited": self.rate_limiter.refused - self._refused_base,
                "rate_limits": self.rate_limiter.to_dict()}

    def set_infill_prefill(self, tokens_per_s: float | None) -> None:
        """Make ``/infill`` evaluate its prompt at ``tokens_per_s`` (None: instantly, the
        default), as llama-server with one slot on a slow CPU does:

        - requests hold the one slot in arrival order, from the prompt's evaluation to the
          end of their answer (or until their client leaves);
        - the prompt's tokens not shared with the slot's KV cache (``timings.prompt_n``)
          take ``prompt_n / tokens_per_s`` seconds before the first token (on top of the
          latency model's TTFT);
        - that evaluation is one batch and is not interrupted: a client that leaves during
          it does not free the slot before it ends, and the KV cache then holds the whole
          prompt, for the next request to reuse (``timings.cache_n``).

        Raises:
            ValueError: for a speed that is not a number > 0.
        """
        if tokens_per_s is not None and (isinstance(tokens_per_s, bool) or not isinstance(tokens_per_s, (int, float))
                                         or not tokens_per_s > 0):
            raise ValueError(f"tokens_per_s must be a number > 0 or None, got {tokens_per_s!r}")
        self.infill_prefill_tps = None if tokens_per_s is None else float(tokens_per_s)

    def set_ollama_models(self, models: Iterable[str] | None, no_insert: Iterable[str] = ()) -> None:
        """The models the Ollama endpoints have "pulled" (``None``, the default: any name
        is served, and ``/api/tags`` lists :attr:`model`). Names without a tag mean
        ``:latest``. Models in ``no_insert`` have no FIM template: a ``suffix`` gets 400
        ``... does not support insert``."""
        self._ollama_models = None if models is None else [engines.ollama_name(m) for m in models]
        self._ollama_no_insert = {engines.ollama_name(m) for m in no_insert}

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

    @property
    def requests(self) -> list[RecordedRequest]:
        """Records of requests (all but ``/_sim/...``) in arrival order (a new list of live records)."""
        return list(self._recorder.records)

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 5.0) -> None:
        """Wait until ``predicate()`` holds; re-checked whenever a record changes.

        Raises:
            TimeoutError: after ``timeout`` seconds.
        """
        await self._recorder.wait_until(predicate, timeout, "the condition")

    async def wait_for_requests(
        self, n: int, timeout: float = 5.0, path: str | None = None
    ) -> list[RecordedRequest]:
        """Wait until at least ``n`` requests (on ``path``, if given) have arrived.

        Returns the matching records. Raises TimeoutError after ``timeout`` seconds.
        """

        def matching() -> list[RecordedRequest]:
            return [r for r in self._recorder.records if path is None or r.path == path]

        await self._recorder.wait_until(lambda: len(matching()) >= n, timeout, f"{n} requests")
        return matching()

    async def wait_for_end(self, index: int, timeout: float = 5.0) -> RecordedRequest:
        """Wait until request ``index`` has ended (any way). Returns its record.

        Raises TimeoutError after ``timeout`` seconds.
        """
        records = self._recorder.records
        await self._recorder.wait_until(
            lambda: index < len(records) and records[index].ended_at is not None,
            timeout,
            f"request #{index} to end",
        )
        return records[index]

    async def wait_for_disconnect(self, index: int, timeout: float = 5.0) -> RecordedRequest:
        """Wait until request ``index`` ended because its client disconnected.

        Returns the record (``disconnected`` is true, ``disconnected_at`` set).

        Raises:
            TimeoutError: after ``timeout`` seconds.
            RuntimeError: if the request ended without a client disconnect.
        """
        records = self._recorder.records
        await self._recorder.wait_until(
            lambda: index < len(records)
            and (records[index].disconnected or records[index].ended_at is not None),
            timeout,
            f"request #{index} to be disconnected",
        )
        record = records[index]
        if not record.disconnected:
            raise RuntimeError(
                f"request #{index} ended without a client disconnect "
                f"(completed={record.completed}, fault={record.fault}, tokens_sent={record.tokens_sent})"
            )
        return record

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

    async def _handle_models(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, self._models)

    async def _models(self, request: web.Request, record: RecordedRequest, body_ok: bool) -> web.StreamResponse:
        if self._auth_failed(request):
            return await send_status(request, record, 401, "Invalid token")
        payload = {"object": "list", "data": [{"id": self.model, "object": "model"}]}
        body = json.dumps(payload).encode()
        fault = self._take_fault(request.path)
        if fault is not None:
            return await apply_plain_fault(request, record, fault, body, "application/json")
        resp = await send(request, record, web.Response(body=body, content_type="application/json"))
        record.completed = True
        return resp

    # -- generation -------------------------------------------------------------------

    async def _handle_generation(self, request: web.Request, chat: bool) -> web.StreamResponse:
        return await self._handle(request, partial(self._generation, chat=chat))

    async def _output_text(self, body: dict) -> str:
        if self._script:
            return self._script.popleft()
        if self.responder is not None:
            result = self.responder(body)
            if inspect.isawaitable(result):
                result = await result
            if not isinstance(result, str):
                raise TypeError(f"responder returned {type(result).__name__}, expected str")
            return result
        return self.default_output

    async def _generation(
        self, request: web.Request, record: RecordedRequest, body_ok: bool, *, chat: bool
    ) -> web.StreamResponse:
        if self._auth_failed(request):
            return await send_status(request, record, 401, "Invalid token")
        try:
            if not body_ok:
                raise RequestError(400, error_body(20015, "Request body is not valid JSON"))
            params = parse_generation(record.body, chat, self.model)
        except RequestError as exc:
            return await send_status(request, record, exc.status, exc.body)

        fault = self._take_fault(request.path)
        if fault is not None and fault.kind == "status":
            record.fault = fault.kind
            return await send_status(request, record, fault.status_code or 500, fault.body, fault.headers)
        if fault is not None and fault.kind in ("silent", "drip"):
            record.fault = fault.kind
            await hang_before_answering(request, fault)

        if not self._model_loaded:
            await self._await_model_load()
        assert record.body is not None
        try:
            text = await self._output_text(record.body)
        except Exception:
            logger.exception("simulated backend: responder failed for request #%d", record.index)
            return await send_status(request, record, 500, error_body(50500, "Internal error"))

        plan = plan_output(text, params.stop, params.max_tokens)
        record.tokens_total = len(plan.pieces)
        shape_cls = ChatShape if chat else CompletionShape
        shape: Shape = shape_cls(f"{'chatcmpl' if chat else 'cmpl'}-{record.trace_id}", int(time.time()), params.model)
        latency = self.latency
        if self.engine is not None:
            text_in = engine_prompt(record.body)
            if params.stream:
                return await engine_stream(self.engine, request, record, Framing(shape, params.prompt_tokens), plan,
                                           fault, text_in, self._recorder.changed)
            return await engine_whole(self.engine, request, record, shape, plan, params.prompt_tokens, fault, text_in)
        if params.stream:
            return await stream(
                request, record, shape, plan, params.prompt_tokens, fault, latency, self._recorder.changed
            )
        return await respond_whole(request, record, shape, plan, params.prompt_tokens, fault, latency)

    # -- llama-server -----------------------------------------------------------------

    async def _health(self, request: web.Request, record: RecordedRequest, body_ok: bool) -> web.StreamResponse:
        if self.loading_s > 0:
            return await send_status(request, record, 503, engines.LOADING_BODY)
        fault = self._take_fault(request.path)
        body = json.dumps({"status": "ok"}).encode()
        if fault is not None:
            return await apply_plain_fault(request, record, fault, body, "application/json")
        resp = await send(request, record, web.Response(body=body, content_type="application/json"))
        record.completed = True
        return resp

    async def _infill(self, request: web.Request, record: RecordedRequest, body_ok: bool) -> web.StreamResponse:
        if self._auth_failed(request):
            return await send_status(request, record, 401, engines.llama_error(401, "Invalid API Key", "authentication_error"))
        if self.loading_s > 0:
            return await send_status(request, record, 503, engines.LOADING_BODY)
        try:
            if not body_ok:
                raise RequestError(400, engines.llama_error(400, "request body is not valid JSON"))
            params = engines.parse_infill(record.body)
        except RequestError as exc:
            return await send_status(request, record, exc.status, exc.body)
        record.stream = params.stream
        if not self.infill_supported:
            return await send_status(request, record, 501, engines.INFILL_UNSUPPORTED_BODY)
        fault = self._take_fault(request.path)
        if fault is not None and fault.kind == "status":
            record.fault = fault.kind
            return await send_status(request, record, fault.status_code or 500, fault.body, fault.headers)
        assert record.body is not None
        try:
            text = await self._output_text(record.body)
        except Exception:
            logger.exception("simulated backend: responder failed for request #%d", record.index)
            return await send_status(request, record, 500, engines.llama_error(500, "Internal error", "server_error"))

        plan = plan_output(text, params.stop, params.n_predict)
        record.tokens_total = len(plan.pieces)
        prompt = engines.infill_prompt_pieces(params)
        if self.infill_prefill_tps is not None:
            return await self._infill_on_slot(request, record, params, plan, fault, prompt, text)
        cache_n = engines.common_prefix_len(prompt, self._kv_pieces) if params.cache_prompt else 0
        self.infill_prefilled_tokens += len(prompt) - cache_n
        # The slot keeps the prompt (and what it generates) for the next request.
        self._kv_pieces = prompt + plan.pieces
        latency = self.latency
        stats = engines.InfillStats(
            model=self.model,
            prompt_n=len(prompt) - cache_n,
            cache_n=cache_n,
            stop_word=engines.stopping_word(text, params.stop),
            ttft_ms=latency.ttft_ms,
            tokens_per_s=latency.tokens_per_s,
        )
        if params.stream:
            return await stream_frames(
                request, record, engines.InfillFraming(stats), plan, fault, latency, self._recorder.changed
            )
        final = stats.final(plan)
        final["content"] = plan.text
        shape = _WholeAnswer(final)
        return await respond_whole(request, record, shape, plan, 0, fault, latency)  # type: ignore[arg-type]

    async def _infill_on_slot(self, request: web.Request, record: RecordedRequest, params: engines.InfillParams,
                              plan: OutputPlan, fault: Fault | None, prompt: list[str], text: str) -> web.StreamResponse:
        """``/infill`` on the one slot with a timed prompt evaluation (see set_infill_prefill)."""
        tps = self.infill_prefill_tps
        assert tps is not None

        async def evaluate() -> tuple[int, int]:
            await self._slot.acquire()
            cache_n = engines.common_prefix_len(prompt, self._kv_pieces) if params.cache_prompt else 0
            prompt_n = len(prompt) - cache_n
            self.infill_prefilled_tokens += prompt_n
            await asyncio.sleep(prompt_n / tps)
            self._kv_pieces = list(prompt)
            return cache_n, prompt_n

        def release(t: asyncio.Task) -> None:
            if not t.cancelled() and t.exception() is None:
                self._slot.release()

        job = asyncio.ensure_future(evaluate())
        try:
            cache_n, prompt_n = await asyncio.shield(job)  # the client leaving does not stop it
            record.prompt_tokens_cached = cache_n
            record.prompt_tokens_evaluated = prompt_n
            latency = self.latency
            stats = engines.InfillStats(model=self.model, prompt_n=prompt_n, cache_n=cache_n,
                                        stop_word=engines.stopping_word(text, params.stop),
                                        ttft_ms=latency.ttft_ms, tokens_per_s=latency.tokens_per_s)
            if params.stream:
                resp = await stream_frames(request, record, engines.InfillFraming(stats), plan, fault, latency,
                                           self._recorder.changed)
            else:
                final = stats.final(plan)
                final["content"] = plan.text
                resp = await respond_whole(request, record, _WholeAnswer(final), plan, 0, fault, latency)  # type: ignore[arg-type]
            self._kv_pieces = list(prompt) + plan.pieces
            return resp
        finally:
            # The slot frees when the answer ends or its client leaves, but never during
            # the prompt's evaluation.
            if job.done():
                release(job)
            else:
                job.add_done_callback(release)

    # -- Ollama -----------------------------------------------------------------------

    def _ollama_has(self, name: str) -> bool:
        return self._ollama_models is None or engines.ollama_name(name) in self._ollama_models

    async def _ollama_version(self, request: web.Request, record: RecordedRequest, body_ok: bool) -> web.StreamResponse:
        resp = await send(request, record, web.json_response({"version": engines.OLLAMA_VERSION}))
        record.completed = True
        return resp

    async def _ollama_tags(self, request: web.Request, record: RecordedRequest, body_ok: bool) -> web.StreamResponse:
        names = self._ollama_models if self._ollama_models is not None else [engines.ollama_name(self.model)]
        models = [
            {
                "name": n,
                "model": n,
                "modified_at": "2025-01-01T00:00:00Z",
                "size": 986_000_000,
                "digest": uuid.uuid5(uuid.NAMESPACE_URL, n).hex * 2,
                "details": {"format": "gguf", "family": "qwen2", "parameter_size": "1.5B", "quantization_level": "Q4_K_M"},
            }
            for n in names
        ]
        resp = await send(request, record, web.json_response({"models": models}))
        record.completed = True
        return resp

    async def _generate(self, request: web.Request, record: RecordedRequest, body_ok: bool) -> web.StreamResponse:
        if self._auth_failed(request):  # as Ollama behind an authenticating proxy (or ollama.com) answers
            return await send_status(request, record, 401, {"error": "unauthorized"})
        try:
            if not body_ok:
                raise RequestError(400, {"error": "invalid character in request body"})
            params = engines.parse_generate(record.body)
        except RequestError as exc:
            return await send_status(request, record, exc.status, exc.body)
        record.stream = params.stream
        if not self._ollama_has(params.model):
            return await send_status(request, record, 404, engines.ollama_not_found(params.model))
        if params.suffix and engines.ollama_name(params.model) in self._ollama_no_insert:
            return await send_status(request, record, 400, engines.ollama_no_insert(params.model))
        if not self._model_loaded:  # load on demand (set_load_on_demand), as Ollama does
            await self._await_model_load()
        load_s = self.loading_s
        if not params.prompt and not params.suffix:  # only load the model
            await asyncio.sleep(load_s)
            body = {"model": params.model, "created_at": engines.created_at(), "response": "", "done": True, "done_reason": "load"}
            resp = await send(request, record, web.json_response(body))
            record.completed = True
            return resp
        fault = self._take_fault(request.path)
        if fault is not None and fault.kind == "status":
            record.fault = fault.kind
            return await send_status(request, record, fault.status_code or 500, fault.body, fault.headers)
        assert record.body is not None
        try:
            text = await self._output_text(record.body)
        except Exception:
            logger.exception("simulated backend: responder failed for request #%d", record.index)
            return await send_status(request, record, 500, {"error": "an error was encountered while running the model"})

        plan = plan_output(text, params.stop, params.num_predict)
        record.tokens_total = len(plan.pieces)
        latency = self.latency
        stats = engines.GenerateStats(
            model=params.model,
            prompt_tokens=count_tokens(params.prompt) + count_tokens(params.suffix or ""),
            load_s=load_s,
            ttft_s=latency.ttft_ms / 1000,
            tokens_per_s=latency.tokens_per_s,
        )
        if params.stream:
            return await stream_frames(
                request, record, engines.OllamaFraming(stats), plan, fault, latency, self._recorder.changed,
                extra_delay_s=load_s,
            )
        if load_s:
            await asyncio.sleep(load_s)
        shape = _WholeAnswer(stats.final(plan, plan.text))
        return await respond_whole(request, record, shape, plan, 0, fault, latency)  # type: ignore[arg-type]


class _WholeAnswer:
    """A stand-in for :class:`Shape` in ``respond_whole``: the body is already built."""

    def __init__(self, body: dict) -> None:
        self.body = body

    def full(self, text: str, finish_reason: str, use: dict[str, int]) -> dict:
        return self.body


def _peer_port(request: web.Request) -> int | None:
    peer = request.transport.get_extra_info("peername") if request.transport else None
    return peer[1] if isinstance(peer, tuple) and len(peer) >= 2 else None
