"""llama-server's own endpoints: ``GET /health`` and ``POST /infill`` (with a timed prefill
slot). A part of :class:`.server.SimulatedBackend` (a mixin: it uses the server's
recorder, faults, latency model and state)."""

from __future__ import annotations

import asyncio
import json
import logging

from aiohttp import web

from . import engines
from .faults import Fault
from .protocol import RequestError
from .recorder import RecordedRequest
from .responses import WholeAnswer, apply_plain_fault, respond_whole, send, send_status, stream_frames
from .tokens import OutputPlan, plan_output

logger = logging.getLogger(__name__)


class LlamaServerRoutes:
    """llama-server's own endpoints: ``GET /health`` and ``POST /infill`` (with a timed prefill slot)."""

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
        if tokens_per_s is not None and (
            isinstance(tokens_per_s, bool) or not isinstance(tokens_per_s, (int, float)) or not tokens_per_s > 0
        ):
            raise ValueError(f"tokens_per_s must be a number > 0 or None, got {tokens_per_s!r}")
        self.infill_prefill_tps = None if tokens_per_s is None else float(tokens_per_s)

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
            return await send_status(
                request, record, 401, engines.llama_error(401, "Invalid API Key", "authentication_error")
            )
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
        shape = WholeAnswer(final)
        return await respond_whole(request, record, shape, plan, 0, fault, latency)  # type: ignore[arg-type]

    async def _infill_on_slot(
        self,
        request: web.Request,
        record: RecordedRequest,
        params: engines.InfillParams,
        plan: OutputPlan,
        fault: Fault | None,
        prompt: list[str],
        text: str,
    ) -> web.StreamResponse:
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
            stats = engines.InfillStats(
                model=self.model,
                prompt_n=prompt_n,
                cache_n=cache_n,
                stop_word=engines.stopping_word(text, params.stop),
                ttft_ms=latency.ttft_ms,
                tokens_per_s=latency.tokens_per_s,
            )
            if params.stream:
                resp = await stream_frames(
                    request, record, engines.InfillFraming(stats), plan, fault, latency, self._recorder.changed
                )
            else:
                final = stats.final(plan)
                final["content"] = plan.text
                resp = await respond_whole(request, record, WholeAnswer(final), plan, 0, fault, latency)  # type: ignore[arg-type]
            self._kv_pieces = list(prompt) + plan.pieces
            return resp
        finally:
            # The slot frees when the answer ends or its client leaves, but never during
            # the prompt's evaluation.
            if job.done():
                release(job)
            else:
                job.add_done_callback(release)
