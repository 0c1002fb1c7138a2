"""Ollama's endpoints: ``/api/version``, ``/api/tags`` and ``/api/generate``. A part of
:class:`.server.SimulatedBackend` (a mixin: it uses the server's recorder, faults,
latency model and state)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable

from aiohttp import web

from . import engines
from .protocol import RequestError
from .recorder import RecordedRequest
from .responses import WholeAnswer, respond_whole, send, send_status, stream_frames
from .tokens import count_tokens, plan_output

logger = logging.getLogger(__name__)


class OllamaRoutes:
    """Ollama's endpoints: ``/api/version``, ``/api/tags`` and ``/api/generate``."""

    def set_ollama_models(self, models: Iterable[str] | None, no_insert: Iterable[str] = ()) -> None:
        """The models the Ollama endpoints have "pulled" (``None``, the default: any name
        is served, and ``/api/tags`` lists :attr:`model`). Names without a tag mean
        ``:latest``. Models in ``no_insert`` have no FIM template: a ``suffix`` gets 400
        ``... does not support insert``."""
        self._ollama_models = None if models is None else [engines.ollama_name(m) for m in models]
        self._ollama_no_insert = {engines.ollama_name(m) for m in no_insert}

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
                "details": {
                    "format": "gguf",
                    "family": "qwen2",
                    "parameter_size": "1.5B",
                    "quantization_level": "Q4_K_M",
                },
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
            body = {
                "model": params.model,
                "created_at": engines.created_at(),
                "response": "",
                "done": True,
                "done_reason": "load",
            }
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
            return await send_status(
                request, record, 500, {"error": "an error was encountered while running the model"}
            )

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
                request,
                record,
                engines.OllamaFraming(stats),
                plan,
                fault,
                latency,
                self._recorder.changed,
                extra_delay_s=load_s,
            )
        if load_s:
            await asyncio.sleep(load_s)
        shape = WholeAnswer(stats.final(plan, plan.text))
        return await respond_whole(request, record, shape, plan, 0, fault, latency)  # type: ignore[arg-type]
