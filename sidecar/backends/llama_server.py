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
- Closing the connection stops generation (DESIGN.md §3), so the stream runs over
  HTTP/1.1 like every other backend.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from contextlib import aclosing
from typing import Any, AsyncIterator

import httpx2 as httpx

from ..completion import prompt
from ..completion.context import CompletionContext
from .base import StreamInfo, UpstreamRequest
from .errors import (
    BAD_REQUEST,
    ENGINE,
    FIM_UNSUPPORTED,
    OVERLOADED,
    UNKNOWN,
    BackendError,
)
from .openai_compat import OpenAICompatBackend

log = logging.getLogger(__name__)

#: The longest line (SSE field or NDJSON object) a local engine may send, in bytes.
MAX_LINE_BYTES = 8 * 1024 * 1024


def infill_request(
    ctx: CompletionContext,
    *,
    max_tokens: int,
    temperature: float,
    extra: list[dict] | None = None,
) -> UpstreamRequest:
    """The ``/infill`` request for ``ctx`` (strategy ``"infill"``).

    ``max_tokens`` becomes ``n_predict`` (tokens); ``extra`` items are
    ``{"filename": str, "text": str}`` (other files' text, e.g. neighbouring tabs) and go
    to ``input_extra`` as given. ``stop`` comes from :func:`prompt.stop_sequences` (at
    most four), and ``cache_prompt`` is always on. The backend adds ``model`` and
    ``stream``.

    Raises ValueError when an ``extra`` item lacks a string ``text`` or has a non-string
    ``filename``.
    """
    chunks: list[dict[str, str]] = []
    for item in extra or []:
        text = item.get("text") if isinstance(item, dict) else None
        filename = item.get("filename", "") if isinstance(item, dict) else None
        if not isinstance(text, str) or not isinstance(filename, str):
            raise ValueError('input_extra items must be {"filename": str, "text": str}')
        chunks.append({"filename": filename, "text": text})
    body: dict[str, Any] = {
        "input_prefix": ctx.prefix,
        "input_suffix": ctx.suffix,
        "input_extra": chunks,
        "n_predict": max_tokens,
        "temperature": temperature,
        "stop": prompt.stop_sequences(ctx),
        "cache_prompt": True,
    }
    return UpstreamRequest(endpoint="infill", body=body, strategy="infill")


async def iter_lines(resp: httpx.Response, max_line_bytes: int = MAX_LINE_BYTES) -> AsyncIterator[bytes]:
    """Yield the lines of a response body, split on ``b"\\n"`` only (a trailing ``\\r``
    is dropped), so that U+2028 and other Unicode line breaks inside JSON strings never
    split a line. The last line may lack its ``\\n``.

    Raises BackendError(UNKNOWN) when one line grows past ``max_line_bytes`` bytes.
    """
    buf = bytearray()
    async for chunk in resp.aiter_bytes():
        buf += chunk
        start = 0
        while True:
            end = buf.find(b"\n", start)
            if end < 0:
                break
            line = bytes(buf[start:end])
            start = end + 1
            yield line[:-1] if line.endswith(b"\r") else line
        if start:
            del buf[:start]
        if len(buf) > max_line_bytes:
            raise BackendError(UNKNOWN, f"the engine sent a line longer than {max_line_bytes} bytes")
    if buf:
        yield bytes(buf[:-1] if buf.endswith(b"\r") else buf)


async def wait_until_ok(
    backend: OpenAICompatBackend,
    path: str,
    timeout_s: float,
    *,
    engine: str,
    start_hint: str,
) -> None:
    """Poll ``GET {backend.base_url}/{path}`` until it answers 200.

    A refused or failed connection and 5xx answers (503: the model is loading) are
    retried every 50 ms to 250 ms (doubling) until ``timeout_s`` seconds have passed; a
    4xx answer means the URL is not ``engine``'s root and fails at once.

    Raises BackendError(ENGINE) with a message naming the URL and the last cause;
    ``start_hint`` (e.g. "start it with `ollama serve`") ends the message when nothing
    answered at all.
    """
    url = f"{backend.base_url}/{path}"
    deadline = time.perf_counter() + timeout_s
    delay = 0.05
    last = "no answer"
    refused = True
    while True:
        remaining = deadline - time.perf_counter()
        try:
            r = await backend._client.get(path, timeout=max(0.1, min(5.0, remaining)))
            raw = await r.aread()
            backend.last_activity = time.perf_counter()
            if r.status_code == 200:
                return
            refused = False
            text = raw.decode("utf-8", "replace")[:200]
            if r.status_code < 500:
                raise BackendError(
                    ENGINE,
                    f"{url} answered HTTP {r.status_code}: is {backend.base_url} the root URL of {engine}?",
                    r.status_code,
                    text,
                )
            last = f"HTTP {r.status_code} {_message_of(raw) or text}".strip()
        except httpx.TransportError as exc:
            last = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if time.perf_counter() + delay > deadline:
            if refused:
                raise BackendError(
                    ENGINE,
                    f"{engine} did not answer at {backend.base_url} within {timeout_s:g} s ({last}); {start_hint}",
                )
            raise BackendError(
                ENGINE,
                f"{engine} at {backend.base_url} was not ready after {timeout_s:g} s (last answer: {last})",
            )
        await asyncio.sleep(delay)
        delay = min(0.25, delay * 2)


def _message_of(raw: bytes) -> str:
    """The message of an engine's error body: ``{"error": {"message"}}``,
    ``{"error": "..."}`` or ``{"message"}``; ``""`` when there is none."""
    try:
        obj = json.loads(raw)
    except ValueError:
        return ""
    if not isinstance(obj, dict):
        return ""
    err = obj.get("error", obj)
    if isinstance(err, dict):
        return str(err.get("message") or "")[:300]
    return str(err)[:300]


def parse_json_object(raw: bytes, info: StreamInfo) -> dict | None:
    """``raw`` as a JSON object, or None (counted in ``info.malformed_events``)."""
    try:
        obj = json.loads(raw)
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        info.malformed_events += 1
        log.warning("skipped a malformed stream line (%d bytes)", len(raw))
        return None
    return obj


class ExternalEngineBackend(OpenAICompatBackend):
    """An engine someone else runs, reached at its root URL (a trailing ``/v1`` is
    dropped). :meth:`ensure_ready` polls ``health_path`` until it answers 200 (see
    :func:`wait_until_ok`), then runs :meth:`_after_ready`, all within
    ``ready_timeout_s`` seconds; after the first success it returns at once, and
    concurrent callers share one wait. Raises BackendError(ENGINE) on timeout.
    """

    health_path = "health"
    engine_label = "engine"
    start_hint = "start it and check the URL."

    def __init__(self, *, name: str, kind: str = "local", base_url: str, model: str,
                 ready_timeout_s: float = 120.0, **kwargs: Any) -> None:
        root = base_url.rstrip("/")
        if root.endswith("/v1"):
            root = root[: -len("/v1")]
        super().__init__(name=name, kind=kind, base_url=root, model=model, **kwargs)
        self.prewarm_path = self.health_path
        self.ready_timeout_s = ready_timeout_s
        self._ready = False
        self._ready_lock = asyncio.Lock()

    @property
    def ready(self) -> bool:
        """True once :meth:`ensure_ready` has succeeded."""
        return self._ready

    async def ensure_ready(self) -> None:
        if self._ready:
            return
        async with self._ready_lock:
            if self._ready:
                return
            deadline = time.perf_counter() + self.ready_timeout_s
            await wait_until_ok(self, self.health_path, self.ready_timeout_s,
                                engine=self.engine_label, start_hint=self.start_hint)
            await self._after_ready(deadline)
            self._ready = True
            log.info("%s ready at %s", self.name, self.base_url)

    async def _after_ready(self, deadline: float) -> None:
        """Work to finish before the engine counts as ready (``deadline``: perf_counter s)."""


class LlamaServerBackend(ExternalEngineBackend):
    """llama.cpp's ``llama-server`` at ``base_url``, its ROOT URL (``http://127.0.0.1:8080``;
    a trailing ``/v1`` is dropped). Requests built by :func:`infill_request` go to
    ``{root}/infill``.

    ``ready_timeout_s`` (seconds) bounds :meth:`ensure_ready`'s wait for the model load.
    Other arguments are :class:`OpenAICompatBackend`'s (timeouts in milliseconds;
    ``api_key`` for a server started with ``--api-key``).
    """

    api = "llama-server"
    health_path = "health"
    engine_label = "llama-server"
    start_hint = "start it with `llama-server -m MODEL.gguf --port PORT` and check the URL."

    def __init__(self, *, name: str = "llama-server", base_url: str, model: str = "llama-server", **kwargs: Any) -> None:
        super().__init__(name=name, base_url=base_url, model=model, **kwargs)


    async def stream(self, req: UpstreamRequest, info: StreamInfo) -> AsyncIterator[str]:
        """Like :meth:`OpenAICompatBackend.stream`, with llama-server's errors named:
        501 "Infill is not supported" (a model without FIM tokens) raises
        BackendError(FIM_UNSUPPORTED); 503 while loading raises ENGINE; 404 (no such
        endpoint: a wrong URL or a server too old for ``/infill``) raises BAD_REQUEST.

        OpenAI-shaped requests (endpoint ``completions`` or ``chat/completions``, e.g. a
        plain ``prefix`` fallback from ``prompt.build_request``) go to llama-server's
        ``/v1/...`` endpoints and are parsed as OpenAI SSE.
        """
        if req.endpoint in ("completions", "chat/completions"):
            req = UpstreamRequest(endpoint="v1/" + req.endpoint, body=req.body, strategy=req.strategy)
        agen = super().stream(req, info)
        try:
            async for delta in agen:
                yield delta
        except BackendError as err:
            raise self._named(err, req) from None
        finally:
            await agen.aclose()

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
            return BackendError(OVERLOADED, f"{self.name} is busy (HTTP 503): {err.detail or 'no free slot'}", 503, err.detail)
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
                raise BackendError(ENGINE, f"{self.name} reported an error: {_message_of(raw)}", resp.status_code)
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
                raise BackendError(ENGINE, f"{self.name} failed mid-stream: {_message_of(payload)}")
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
                        msg = _message_of(value) or value[:300].decode("utf-8", "replace")
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


__all__ = ["ExternalEngineBackend", "LlamaServerBackend", "MAX_LINE_BYTES", "infill_request", "iter_lines", "wait_until_ok"]
