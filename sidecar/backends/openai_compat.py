"""Streaming client for OpenAI-compatible completion APIs (SiliconFlow, vLLM, SGLang,
llama-cpp-python, LM Studio) over one httpx keep-alive pool.

Facts it relies on (DESIGN.md §3):
- HTTP/1.1 by default: closing a response closes its socket, and the engine stops
  generating. Over HTTP/2 httpx does not reset the stream, so the server keeps billing.
- httpx timeouts are per phase; the caller wraps each request in an overall deadline.
- SSE is parsed with httpx2's ``EventSource`` (derived from httpx-sse: lines split on
  CR/LF only, unlike ``aiter_lines``, and an event size limit).
  Events are ``data: {json}`` with text in ``choices[0].text`` (chat:
  ``choices[0].delta.content``), a final ``data: [DONE]``; chunks with empty
  ``choices`` and ``:`` comment lines are skipped; a malformed event is counted and skipped.
"""

from __future__ import annotations

import json
import logging
import time
from typing import AsyncIterator

import httpx2 as httpx
from httpx2 import EventSource, SSEError

from .base import StreamInfo, UpstreamRequest
from .errors import CONNECTION, TIMEOUT, UNKNOWN, BackendError, classify

log = logging.getLogger(__name__)

KEEPALIVE_EXPIRY_S = 60.0


class OpenAICompatBackend:
    """A backend at ``base_url`` (ending in ``/v1``) speaking OpenAI's streaming API.

    ``api_key`` goes only into the Authorization header of requests to ``base_url``.
    Timeouts are in milliseconds. One ``httpx.AsyncClient`` (and so one connection pool)
    lives as long as this object.
    """

    def __init__(
        self,
        *,
        name: str,
        kind: str,
        base_url: str,
        model: str,
        api_key: str | None = None,
        connect_timeout_ms: int = 3000,
        read_timeout_ms: int = 30000,
        http2: bool = False,
    ) -> None:
        self.name = name
        self.kind = kind
        # The request shape: subclasses for other engine APIs set ``api`` on the class.
        self.api = getattr(type(self), "api", None) or ("siliconflow" if kind == "siliconflow" else "openai")
        self.base_url = base_url.rstrip("/")
        self.model = model
        headers = {"User-Agent": "sidecar/0.1"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.AsyncClient(
            base_url=self.base_url + "/",
            headers=headers,
            http1=True,
            http2=http2,
            timeout=httpx.Timeout(
                connect=connect_timeout_ms / 1000,
                read=read_timeout_ms / 1000,
                write=10.0,
                pool=connect_timeout_ms / 1000,
            ),
            limits=httpx.Limits(max_connections=16, max_keepalive_connections=8, keepalive_expiry=KEEPALIVE_EXPIRY_S),
            trust_env=False,
        )
        self.last_activity = 0.0  # perf_counter seconds of the last byte exchanged

    # ------------------------------------------------------------------ lifecycle
    async def ensure_ready(self) -> None:
        return None

    # A cheap GET that opens a pooled connection; engines with their own health endpoint
    # set their path.
    prewarm_path = "models"

    async def prewarm(self) -> None:
        """GET ``prewarm_path`` (``/models``) so a TCP (and TLS) connection sits in the pool
        before the first completion. Errors are logged at debug level and ignored."""
        try:
            r = await self._client.get(self.prewarm_path)
            await r.aread()
            self.last_activity = time.perf_counter()
            log.debug("prewarm %s -> HTTP %s", self.name, r.status_code)
        except Exception as exc:  # noqa: BLE001 - prewarm is best effort
            log.debug("prewarm %s failed: %s", self.name, exc)

    def idle_for_s(self) -> float:
        """Seconds since the last upstream traffic (inf when none yet)."""
        return float("inf") if not self.last_activity else time.perf_counter() - self.last_activity

    async def aclose(self) -> None:
        await self._client.aclose()

    def has_idle_connection(self) -> bool:
        """True when the pool holds an idle keep-alive connection (True if unknown)."""
        try:
            conns = self._client._transport._pool.connections  # type: ignore[attr-defined]
        except AttributeError:
            return True
        return any(c.is_idle() for c in conns)

    def busy_connections(self) -> int | None:
        """Pooled connections that are not idle (a diagnostic; None if httpx changes its
        internals)."""
        try:
            conns = self._client._transport._pool.connections  # type: ignore[attr-defined]
            busy = [c for c in conns if not c.is_idle() and not c.is_closed()]
            if busy:
                log.debug("busy connections: %s", busy)
            return len(busy)
        except AttributeError:
            return None

    # ------------------------------------------------------------------ streaming
    async def stream(self, req: UpstreamRequest, info: StreamInfo) -> AsyncIterator[str]:
        """Yield text deltas of one streamed completion.

        Raises BackendError (HTTP error, connect failure, read timeout). A connection cut
        after some text ends the stream quietly with ``info.truncated = True``.
        Cancelling or closing the generator closes the HTTP response, and so the socket.
        """
        body = dict(req.body)
        body["model"] = self.model
        body["stream"] = True
        chat = req.endpoint.startswith("chat")
        info.sent_at = time.perf_counter()
        try:
            async with self._client.stream(
                "POST",
                req.endpoint,
                json=body,
                headers={"Accept": "text/event-stream", "Cache-Control": "no-store"},
            ) as resp:
                info.headers_at = time.perf_counter()
                self.last_activity = info.headers_at
                info.trace_id = resp.headers.get("x-siliconcloud-trace-id") or resp.headers.get("x-request-id")
                if resp.status_code >= 400:
                    raw = await resp.aread()
                    raise classify(resp.status_code, raw, backend=self.name, model=self.model, used_suffix=req.used_suffix)
                async for delta in self._deltas(resp, info, chat):
                    yield delta
        except BackendError:
            raise
        except httpx.TimeoutException as exc:
            raise BackendError(TIMEOUT, f"{self.name} did not answer in time ({type(exc).__name__}).") from None
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            if info.events:
                info.truncated = True
                log.warning("%s stream cut after %d events: %s", self.name, info.events, exc)
            else:
                raise BackendError(CONNECTION, f"{self.name} closed the connection: {exc}") from None
        except httpx.TransportError as exc:
            raise BackendError(CONNECTION, f"cannot reach {self.name} at {self.base_url}: {exc}") from None
        finally:
            info.ended_at = time.perf_counter()
            self.last_activity = info.ended_at

    async def _deltas(self, resp: httpx.Response, info: StreamInfo, chat: bool) -> AsyncIterator[str]:
        ctype = resp.headers.get("content-type", "")
        if "text/event-stream" not in ctype:
            # Some servers answer a streaming request with one JSON body; anything else
            # (an HTML page from a proxy or a wrong base URL) is an error worth naming.
            raw = await resp.aread()
            obj = _loads(raw, info) if "json" in ctype or raw[:1] in (b"{", b"[") else None
            if obj is None:
                kind = ctype.split(";")[0] or "no content type"
                raise BackendError(
                    UNKNOWN,
                    f"{self.name} answered with {kind}, not an event stream; is {self.base_url} an "
                    f"OpenAI-compatible API base URL (ending in /v1)?",
                    resp.status_code,
                )
            if "error" in obj:
                raise BackendError(UNKNOWN, f"{self.name} reported an error: {_error_text(obj['error'])}", resp.status_code)
            text = _text_of(obj, chat, final=True)
            if text:
                info.first_token_at = time.perf_counter()
                info.events += 1
                yield text
            return
        done = False
        try:
            async for sse in EventSource(resp):
                data = sse.data
                if done or not data:
                    continue  # read to the end so the connection goes back to the pool
                if data.strip() == "[DONE]":
                    done = True
                    continue
                obj = _loads(data.encode(), info)
                if obj is None:
                    continue
                if "error" in obj:
                    raise BackendError(UNKNOWN, f"{self.name} reported an error mid-stream: {_error_text(obj['error'])}")
                info.events += 1
                choices = obj.get("choices")
                if isinstance(obj.get("usage"), dict):
                    info.usage = obj["usage"]
                if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
                    if choices:
                        info.malformed_events += 1
                    continue
                choice = choices[0]
                if choice.get("finish_reason"):
                    info.finish_reason = choice["finish_reason"]
                text = _text_of(obj, chat, final=False)
                if text:
                    if not info.first_token_at:
                        info.first_token_at = time.perf_counter()
                    yield text
        except SSEError as exc:  # an oversized event; the content type was checked above
            raise BackendError(UNKNOWN, f"{self.name} sent an invalid event stream: {exc}") from None
        if not done:  # the connection ended without [DONE]
            info.truncated = True


def _error_text(err: object) -> str:
    if isinstance(err, dict):
        return str(err.get("message") or err)[:300]
    return str(err)[:300]


def _loads(raw: bytes, info: StreamInfo) -> dict | None:
    try:
        obj = json.loads(raw)
    except ValueError:
        info.malformed_events += 1
        log.warning("skipped a malformed stream event (%d bytes)", len(raw))
        return None
    if not isinstance(obj, dict):
        info.malformed_events += 1
        return None
    return obj


def _text_of(obj: dict | None, chat: bool, final: bool) -> str:
    if not obj:
        return ""
    choices = obj.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return ""
    c = choices[0]
    if chat:
        part = c.get("message") if final else c.get("delta")
        val = (part or {}).get("content") if isinstance(part, dict) else None
    else:
        val = c.get("text")
    return val if isinstance(val, str) else ""
