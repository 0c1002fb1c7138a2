"""The OpenAI/SiliconFlow wire format: ``GET /v1/models`` and the ``/v1`` generation
endpoints. A part of :class:`.server.SimulatedBackend` (a mixin: it uses the server's
recorder, faults, latency model and state)."""

from __future__ import annotations

import inspect
import json
import logging
import time
from functools import partial

from aiohttp import web

from .protocol import ChatShape, CompletionShape, RequestError, Shape, error_body, parse_generation
from .recorder import RecordedRequest
from .responses import Framing, apply_plain_fault, hang_before_answering, respond_whole, send, send_status, stream
from .shared_engine import engine_prompt, engine_stream, engine_whole
from .tokens import plan_output

logger = logging.getLogger(__name__)


class OpenAIRoutes:
    """The OpenAI/SiliconFlow wire format: ``GET /v1/models`` and the ``/v1`` generation endpoints."""

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
        if not chat and isinstance(record.body.get("logprobs"), int) and record.body["logprobs"] is not True:
            shape.logprob = self.token_logprob  # type: ignore[attr-defined]
        latency = self.latency
        if self.engine is not None:
            text_in = engine_prompt(record.body)
            if params.stream:
                return await engine_stream(
                    self.engine,
                    request,
                    record,
                    Framing(shape, params.prompt_tokens),
                    plan,
                    fault,
                    text_in,
                    self._recorder.changed,
                )
            return await engine_whole(self.engine, request, record, shape, plan, params.prompt_tokens, fault, text_in)
        if params.stream:
            return await stream(
                request, record, shape, plan, params.prompt_tokens, fault, latency, self._recorder.changed
            )
        return await respond_whole(request, record, shape, plan, params.prompt_tokens, fault, latency)
