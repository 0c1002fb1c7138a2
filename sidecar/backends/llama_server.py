"""llama.cpp's ``llama-server`` as an external local engine: FIM through ``POST /infill``.

Follows llama-server's README (tools/server/README.md in llama.cpp):

- ``POST /infill`` takes ``input_prefix``, ``input_suffix``, ``input_extra`` (a list of
  ``{"filename": str, "text": str}``: other files' text, placed before the FIM prompt),
  ``n_predict``, ``temperature``, ``stop`` and ``cache_prompt`` (reuse the KV cache for
  the part of the prompt the previous request shared). The server applies the model's
  own FIM tokens; a model without them gets HTTP 501 "Infill is not supported".
- With ``stream: true`` the answer is SSE: ``data: {"content": "...", "stop": false, ...}``
  per token and a last event with ``"stop": true``, ``stop_type``, ``tokens_cached`` and
  ``timings`` (``cache_n``: prompt tokens reused from the KV cache). No ``[DONE]``.
  A failure mid-stream comes as an ``error: {...}`` line.
- ``GET /health``: 503 while the model loads, 200 ``{"status": "ok"}`` when ready.
- Closing the connection stops generation (docs/architecture.md, "Facts we checked"), so the stream runs over
  HTTP/1.1 like every other backend.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import httpx2 as httpx

from ..providers import LLAMA_SERVER
from .base import StreamInfo, UpstreamRequest, parse_json_object
from .errors import BAD_REQUEST, ENGINE, FIM_UNSUPPORTED, OVERLOADED, UNKNOWN, BackendError
from .external import ExternalEngineBackend, iter_lines, message_of


class LlamaServerBackend(ExternalEngineBackend):
    """llama.cpp's ``llama-server`` at ``base_url``, its ROOT URL (``http://127.0.0.1:8080``;
    a trailing ``/v1`` is dropped). Requests built by ``completion.prompts.infill_request`` go to
    ``{root}/infill``.

    ``ready_timeout_s`` (seconds) bounds :meth:`ensure_ready`'s wait for the model load.
    Other arguments are :class:`OpenAICompatBackend`'s (timeouts in milliseconds;
    ``api_key`` for a server started with ``--api-key``).
    """

    api = "llama-server"
    health_path = "health"
    engine_label = LLAMA_SERVER.label
    start_hint = "start it with `llama-server -m MODEL.gguf --port PORT` and check the URL."

    def __init__(
        self, *, name: str = LLAMA_SERVER.label, base_url: str, model: str = LLAMA_SERVER.name, **kwargs: Any
    ) -> None:
        super().__init__(name=name, base_url=base_url, model=model, **kwargs)

    def _routed(self, req: UpstreamRequest) -> UpstreamRequest:
        """OpenAI-shaped requests (endpoint ``completions`` or ``chat/completions``, e.g. a
        plain ``prefix`` fallback of the prompt side) go to llama-server's ``/v1/...``
        endpoints and are parsed as OpenAI SSE; ``infill`` goes to ``/infill``.

        Errors are named (:meth:`_named`): 501 "Infill is not supported" (a model without
        FIM tokens) raises BackendError(FIM_UNSUPPORTED); 503 while loading raises ENGINE;
        404 (a wrong URL or a server too old for ``/infill``) raises BAD_REQUEST; 503
        with every slot taken raises OVERLOADED."""
        if req.endpoint in ("completions", "chat/completions"):
            return UpstreamRequest(
                endpoint="v1/" + req.endpoint, body=req.body, strategy=req.strategy, read_timeout_s=req.read_timeout_s
            )
        return req

    def _named(self, err: BackendError, req: UpstreamRequest) -> BackendError:
        low = err.detail.lower()
        infill = req.endpoint == "infill"
        if infill and (err.status == 501 or (err.status in (400, 500) and "not supported" in low)):
            return BackendError(
                FIM_UNSUPPORTED,
                f"{self.name} cannot fill in the middle with its model: {err.detail or 'HTTP 501'}",
                err.status,
                err.detail,
            )
        if err.status == 503 and "loading" in low:
            return BackendError(ENGINE, f"{self.name} is still loading its model; try again shortly.", 503, err.detail)
        if err.status == 404:
            return BackendError(
                BAD_REQUEST,
                f"{self.base_url}/{req.endpoint} does not exist (HTTP 404): set the llama-server root URL "
                f"(without /v1), and use a llama-server recent enough to have /{req.endpoint}.",
                404,
                err.detail,
            )
        if err.status == 503:
            # A shared engine with every slot taken: the service cools down (ratelimit.py).
            return BackendError(
                OVERLOADED,
                f"{self.name} is busy (HTTP 503): {err.detail or 'no free slot'}",
                503,
                err.detail,
                retry_after_s=err.retry_after_s,
            )
        return err

    async def _deltas(self, resp: httpx.Response, info: StreamInfo, chat: bool) -> AsyncIterator[str]:
        """Text of llama-server's SSE events (``content``), up to the ``stop: true`` event.

        Malformed events are counted in ``info.malformed_events`` and skipped; the body is
        read to its end after the stop event (so the connection returns to the pool); a
        body that ends without one sets ``info.truncated``. The stop event fills
        ``info.finish_reason`` (``"length"`` when ``n_predict`` cut it, else ``"stop"``)
        and ``info.usage``: ``prompt_tokens``, ``completion_tokens``, ``cached_tokens``
        (``timings.cache_n``, the prompt tokens reused from the KV cache; servers without
        it report ``tokens_cached``, the tokens in the slot's cache), ``timings``.
        A ``data: [DONE]`` is ignored; an ``error:`` line or an ``{"error": ...}`` event
        raises BackendError(ENGINE). Answers of the ``/v1/...`` endpoints are OpenAI SSE
        and go to :meth:`OpenAICompatBackend._deltas`.
        """
        path = resp.request.url.path
        if "/v1/" in path:
            async for delta in super()._deltas(resp, info, path.endswith("/chat/completions")):
                yield delta
            return
        ctype = resp.headers.get("content-type", "")
        if "text/event-stream" not in ctype:
            # A non-streamed answer (one JSON object), an error, or not llama-server at all.
            raw = await resp.aread()
            obj = parse_json_object(raw, info) if raw[:1] == b"{" else None
            if obj is not None and "error" in obj:
                raise BackendError(ENGINE, f"{self.name} reported an error: {message_of(raw)}", resp.status_code)
            if obj is None or "content" not in obj:
                kind = ctype.split(";")[0] or "no content type"
                raise BackendError(
                    UNKNOWN,
                    f"{self.name} answered with {kind}, not an event stream; is {self.base_url} the root URL "
                    f"of a llama-server?",
                    resp.status_code,
                )
            info.events += 1
            self._final(obj, info)
            text = obj.get("content")
            if isinstance(text, str) and text:
                info.first_token_at = time.perf_counter()
                yield text
            return

        done = False

        def event(payload: bytes) -> str:
            """Handle one event's data; return its text ("" for none)."""
            nonlocal done
            if done or payload.strip() == b"[DONE]":
                return ""  # read to the end so the connection goes back to the pool
            obj = parse_json_object(payload, info)
            if obj is None:
                return ""
            if "error" in obj:
                raise BackendError(ENGINE, f"{self.name} failed mid-stream: {message_of(payload)}")
            info.events += 1
            if obj.get("stop") is True:
                done = True
                self._final(obj, info)
            text = obj.get("content")
            return text if isinstance(text, str) else ""

        data: list[bytes] = []
        async with aclosing(iter_lines(resp)) as lines:
            async for line in lines:
                if line:
                    if line.startswith(b":"):
                        continue  # an SSE comment
                    name, _, value = line.partition(b":")
                    if value.startswith(b" "):
                        value = value[1:]
                    if name == b"data":
                        data.append(value)
                    elif name == b"error" and not done:
                        msg = message_of(value) or value[:300].decode("utf-8", "replace")
                        raise BackendError(ENGINE, f"{self.name} failed mid-stream: {msg}")
                    continue
                if data:  # a blank line ends an event
                    text = event(b"\n".join(data))
                    data = []
                    if text:
                        if not info.first_token_at:
                            info.first_token_at = time.perf_counter()
                        yield text
        if data:  # the body ended without the blank line after its last event
            text = event(b"\n".join(data))
            if text:
                if not info.first_token_at:
                    info.first_token_at = time.perf_counter()
                yield text
        if not done:
            info.truncated = True

    @staticmethod
    def _final(obj: dict, info: StreamInfo) -> None:
        stop_type = obj.get("stop_type")
        limit = stop_type == "limit" or obj.get("stopped_limit") is True
        info.finish_reason = "length" if limit else "stop"
        usage: dict[str, Any] = {}
        if isinstance(obj.get("tokens_evaluated"), int):
            usage["prompt_tokens"] = obj["tokens_evaluated"]
        if isinstance(obj.get("tokens_predicted"), int):
            usage["completion_tokens"] = obj["tokens_predicted"]
        timings = obj.get("timings")
        if isinstance(timings, dict):
            usage["timings"] = timings
        if isinstance(timings, dict) and isinstance(timings.get("cache_n"), int):
            usage["cached_tokens"] = timings["cache_n"]
        elif isinstance(obj.get("tokens_cached"), int):
            usage["cached_tokens"] = obj["tokens_cached"]
        info.usage = usage


__all__ = ["LlamaServerBackend"]
