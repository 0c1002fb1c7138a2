"""Ollama as an external local engine: ``POST /api/generate`` with NDJSON streaming.

Follows Ollama's API reference (docs/api.md, "Generate a completion"):

- The body has ``model``, ``prompt``, ``suffix`` (text after the cursor: Ollama then
  renders the model's own FIM template, and answers 400 "... does not support insert"
  for a model that has none), ``raw`` (no template at all: a plain continuation of
  ``prompt``), ``options`` (``num_predict``, ``temperature``, ``stop``), ``keep_alive``
  (how long the model stays in memory after the request, e.g. ``"30m"``) and ``stream``.
- The stream is NDJSON (``application/x-ndjson``): ``{"model", "created_at",
  "response": "text", "done": false}`` per chunk, and last ``{"done": true,
  "done_reason": "stop" | "length", "prompt_eval_count", "eval_count", durations in
  nanoseconds, ...}``. Errors are ``{"error": "message"}``: 404 for a model that was not
  pulled, and the same object as a line when generation fails mid-stream.
- ``GET /api/version`` answers as soon as the server is up; a model loads on its first
  request (an empty prompt only loads it), so :meth:`OllamaBackend.ensure_ready` loads it.
- Closing the connection stops generation (docs/architecture.md, "Facts we checked").
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import httpx2 as httpx

from ..providers import OLLAMA
from .base import JSON_HEADERS, StreamInfo, UpstreamRequest, json_body, parse_json_object
from .errors import BAD_REQUEST, CONNECTION, ENGINE, FIM_UNSUPPORTED, MODEL_NOT_FOUND, UNKNOWN, BackendError, classify
from .external import ExternalEngineBackend, iter_lines, message_of

log = logging.getLogger(__name__)

#: How long Ollama keeps the model in memory after a request (an Ollama duration).
DEFAULT_KEEP_ALIVE = "30m"


class OllamaBackend(ExternalEngineBackend):
    """Ollama at ``base_url``, its ROOT URL (``http://127.0.0.1:11434``; a trailing
    ``/v1`` is dropped); ``model`` is an Ollama model name (``qwen2.5-coder:1.5b``).

    ``ready_timeout_s`` (seconds) bounds :meth:`ensure_ready` (server start plus model
    load). With ``preload`` (default) :meth:`ensure_ready` loads the model, kept for
    ``keep_alive`` (an Ollama duration), so the first completion does not pay the load.
    Other arguments are :class:`OpenAICompatBackend`'s (timeouts in milliseconds).
    """

    api = "ollama"
    health_path = "api/version"
    engine_label = OLLAMA.label
    start_hint = "start it with `ollama serve` and check the URL."

    def __init__(
        self,
        *,
        name: str = OLLAMA.label,
        base_url: str,
        model: str,
        preload: bool = True,
        keep_alive: str = DEFAULT_KEEP_ALIVE,
        **kwargs: Any,
    ) -> None:
        super().__init__(name=name, base_url=base_url, model=model, **kwargs)
        self.preload = preload
        self.keep_alive = keep_alive

    async def _after_ready(self, deadline: float) -> None:
        """With ``preload``, load the model (empty-prompt ``/api/generate``) so the first
        completion does not pay for it. Raises BackendError: ENGINE when the load times
        out or fails; MODEL_NOT_FOUND (with the ``ollama pull`` command) for a model
        Ollama has not pulled."""
        if self.preload:
            await self._load(max(1.0, deadline - time.perf_counter()))

    async def _load(self, timeout_s: float) -> None:
        t0 = time.perf_counter()
        body = {"model": self.model, "keep_alive": self.keep_alive, "stream": False}
        try:
            r = await self._client.post(
                "api/generate", content=json_body(body), headers=JSON_HEADERS, timeout=timeout_s
            )
            raw = await r.aread()
        except httpx.TimeoutException:
            raise BackendError(ENGINE, f"{self.name} did not load '{self.model}' within {timeout_s:.0f} s") from None
        except httpx.TransportError as exc:
            raise BackendError(ENGINE, f"{self.name} failed while loading '{self.model}': {exc}") from None
        self.last_activity = time.perf_counter()
        if r.status_code >= 400:
            raise self._named(classify(r.status_code, raw, backend=self.name, model=self.model, headers=r.headers))
        log.info("%s loaded %s in %.1f s", self.name, self.model, time.perf_counter() - t0)

    async def list_models(self) -> list[str]:
        """Names of the models Ollama has pulled (``GET /api/tags``), e.g.
        ``["qwen2.5-coder:1.5b"]``. Raises BackendError(CONNECTION or UNKNOWN)."""
        try:
            r = await self._client.get("api/tags")
            raw = await r.aread()
        except httpx.TransportError as exc:
            raise BackendError(CONNECTION, f"cannot reach {self.name} at {self.base_url}: {exc}") from None
        info = StreamInfo()
        obj = parse_json_object(raw, info) if r.status_code == 200 else None
        models = obj.get("models") if obj else None
        if not isinstance(models, list):
            raise BackendError(
                UNKNOWN, f"{self.base_url}/api/tags answered HTTP {r.status_code} without a model list", r.status_code
            )
        return [m["name"] for m in models if isinstance(m, dict) and isinstance(m.get("name"), str)]

    def _named(self, err: BackendError, req: UpstreamRequest | None = None) -> BackendError:
        """Ollama's errors named: 404 for a model not pulled raises
        BackendError(MODEL_NOT_FOUND) whose message gives the ``ollama pull`` command;
        400 "does not support insert" (a ``suffix`` for a model without a FIM template)
        raises FIM_UNSUPPORTED; other 404s (a wrong URL) raise BAD_REQUEST; 500 raises
        ENGINE."""
        if not err.status:
            return err
        detail = err.detail
        low = detail.lower()
        if err.status == 404 and ("model" in low or ("not found" in low and "page" not in low)):
            return BackendError(
                MODEL_NOT_FOUND,
                f"{self.name} has no model '{self.model}': run `ollama pull {self.model}`, or choose a model "
                f"that `ollama list` shows.",
                404,
                detail,
            )
        if err.status == 404:
            endpoint = req.endpoint if req else "api/generate"
            return BackendError(
                BAD_REQUEST,
                f"{self.base_url}/{endpoint} does not exist (HTTP 404): set Ollama's root URL "
                f"(e.g. http://127.0.0.1:11434, without /v1).",
                404,
                detail,
            )
        if err.status == 400 and "does not support insert" in low:
            return BackendError(
                FIM_UNSUPPORTED,
                f"{self.name}'s model '{self.model}' has no fill-in-the-middle template: {detail}",
                400,
                detail,
            )
        if err.status == 500:
            return BackendError(ENGINE, f"{self.name} failed: {detail or 'HTTP 500'}", 500, detail)
        return err

    async def _deltas(self, resp: httpx.Response, info: StreamInfo, chat: bool) -> AsyncIterator[str]:
        """Text of Ollama's NDJSON lines (``response``), up to the ``done: true`` line.

        Lines are split on ``b"\\n"`` only (U+2028 may occur inside JSON strings).
        Malformed lines are counted in ``info.malformed_events`` and skipped; the body is
        read to its end; a body that ends without ``done: true`` sets ``info.truncated``.
        The last line fills ``info.finish_reason`` (``done_reason``) and ``info.usage``:
        ``prompt_tokens`` (``prompt_eval_count``), ``completion_tokens``
        (``eval_count``), and ``load_ms``, ``prompt_eval_ms``, ``eval_ms``, ``total_ms``
        (Ollama's nanosecond durations, in milliseconds). An ``{"error": ...}`` line
        raises BackendError(ENGINE).
        """
        ctype = resp.headers.get("content-type", "")
        if "json" not in ctype:  # not Ollama: an HTML page from a proxy or a wrong URL
            await resp.aread()
            kind = ctype.split(";")[0] or "no content type"
            raise BackendError(
                UNKNOWN,
                f"{self.name} answered with {kind}, not NDJSON; is {self.base_url} Ollama's root URL?",
                resp.status_code,
            )
        done = False
        async with aclosing(iter_lines(resp)) as lines:
            async for line in lines:
                if done or not line.strip():
                    continue  # read to the end so the connection goes back to the pool
                obj = parse_json_object(line, info)
                if obj is None:
                    continue
                if "error" in obj:
                    raise BackendError(ENGINE, f"{self.name} failed mid-stream: {message_of(line)}")
                info.events += 1
                text = obj.get("response")
                if isinstance(text, str) and text:
                    if not info.first_token_at:
                        info.first_token_at = time.perf_counter()
                    yield text
                if obj.get("done") is True:
                    done = True
                    self._final(obj, info)
        if not done:
            info.truncated = True

    @staticmethod
    def _final(obj: dict, info: StreamInfo) -> None:
        reason = obj.get("done_reason")
        info.finish_reason = reason if isinstance(reason, str) and reason else "stop"
        usage: dict[str, Any] = {}
        for src, dst in (("prompt_eval_count", "prompt_tokens"), ("eval_count", "completion_tokens")):
            if isinstance(obj.get(src), int):
                usage[dst] = obj[src]
        for src, dst in (
            ("load_duration", "load_ms"),
            ("prompt_eval_duration", "prompt_eval_ms"),
            ("eval_duration", "eval_ms"),
            ("total_duration", "total_ms"),
        ):
            if isinstance(obj.get(src), (int, float)):
                usage[dst] = obj[src] / 1e6
        info.usage = usage


__all__ = ["DEFAULT_KEEP_ALIVE", "OllamaBackend"]
