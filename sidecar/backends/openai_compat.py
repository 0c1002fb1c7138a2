"""Streaming client for OpenAI-compatible completion APIs (SiliconFlow, vLLM, SGLang,
llama-cpp-python, LM Studio) over one httpx keep-alive pool.

Facts it relies on (docs/architecture.md, "Facts we checked"):
- HTTP/1.1 by default: closing a response closes its socket, and the engine stops
  generating. Over HTTP/2 httpx does not reset the stream, so the server keeps billing.
- httpx timeouts are per phase; the caller wraps each request in an overall deadline.
- Each streamed body is read into text deltas by ``openai_events.py`` (SSE, the
  OpenAI event shapes, JSON bodies and errors).
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import AsyncGenerator, Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx2 as httpx

from .base import JSON_HEADERS, BackendBase, StreamInfo, UpstreamRequest, json_body
from .errors import BAD_REQUEST, CONNECTION, TIMEOUT, BackendError, classify
from .openai_events import _OpenAIEvents
from .ratelimit import CoolDown

log = logging.getLogger(__name__)

KEEPALIVE_EXPIRY_S = 60.0

#: Endpoints whose bodies follow OpenAI's completions API (they take ``user``).
_OPENAI_ENDPOINTS = ("completions", "chat/completions", "v1/completions", "v1/chat/completions")


def is_loopback_url(url: str) -> bool:
    """True when ``url``'s host is this machine: ``localhost`` (and ``*.localhost``, RFC
    6761 §6.3), 127.0.0.0/8 or ``::1``. Such URLs never go through a proxy."""
    host = (urlsplit(url).hostname or "").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class OpenAICompatBackend(_OpenAIEvents, BackendBase):
    """A backend at ``base_url`` (ending in ``/v1``) speaking OpenAI's streaming API.

    ``api_key`` goes only into the Authorization header (``Bearer``) of requests to
    ``base_url`` (redirects are not followed, so it never reaches another host).
    ``headers`` are sent with every request (after the built-in ones, before
    Authorization). ``user`` (an end-user id) is added to OpenAI-shaped request bodies.
    ``trust_env`` lets httpx read ``HTTPS_PROXY``/``HTTP_PROXY``/``ALL_PROXY``/``NO_PROXY``
    and ``SSL_CERT_FILE``; it is ignored (off) for a loopback ``base_url``, which never
    goes through a proxy. Timeouts are in milliseconds. One ``httpx.AsyncClient`` (and so
    one connection pool) lives as long as this object; ``cooldown`` is its
    :class:`~.ratelimit.CoolDown` (429/503 handling, used by the completion service).
    ``provider`` says who serves (``sidecar/providers.py``); ``api``, the wire format,
    is the class's unless given (a provider's own dialect: ``Provider.api``).
    """

    #: The wire format (a dialect of ``completion/dialects.py``); engine subclasses set theirs.
    api: str = "openai"
    #: Set in ``__init__``; class attributes, as they replace BackendBase's read-only properties.
    base_url: str = ""
    cooldown: CoolDown | None = None

    def __init__(
        self,
        *,
        name: str,
        provider: str,
        base_url: str,
        model: str,
        api_key: str | None = None,
        connect_timeout_ms: int = 3000,
        read_timeout_ms: int = 30000,
        http2: bool = False,
        headers: Mapping[str, str] | None = None,
        user: str | None = None,
        trust_env: bool = False,
        api: str | None = None,
    ) -> None:
        super().__init__()
        self.name = name
        self.provider = provider
        if api is not None:
            self.api = api
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.user = user or None
        self.cooldown = CoolDown()
        sent = {"User-Agent": "sidecar/0.1"}
        sent.update(headers or {})
        if api_key:
            sent["Authorization"] = f"Bearer {api_key}"
        self.trust_env = bool(trust_env) and not is_loopback_url(self.base_url)
        self._client = httpx.AsyncClient(
            base_url=self.base_url + "/",
            headers=sent,
            http1=True,
            http2=http2,
            timeout=httpx.Timeout(
                connect=connect_timeout_ms / 1000,
                read=read_timeout_ms / 1000,
                write=10.0,
                pool=connect_timeout_ms / 1000,
            ),
            limits=httpx.Limits(max_connections=16, max_keepalive_connections=8, keepalive_expiry=KEEPALIVE_EXPIRY_S),
            trust_env=self.trust_env,
            follow_redirects=False,
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
    async def stream(self, req: UpstreamRequest, info: StreamInfo) -> AsyncGenerator[str, None]:
        """Yield text deltas of one streamed completion.

        Raises BackendError (HTTP error, connect failure, read timeout). A connection cut
        after some text ends the stream quietly with ``info.truncated = True``.
        Cancelling or closing the generator closes the HTTP response, and so the socket.
        """
        body = dict(req.body)
        body["model"] = self.model
        body["stream"] = True
        if self.user and req.endpoint in _OPENAI_ENDPOINTS:
            body.setdefault("user", self.user)
        chat = req.endpoint.startswith("chat")
        try:
            # Lone surrogates from the editor's text become U+FFFD here (base.json_body).
            content = json_body(body)
        except (TypeError, ValueError) as exc:  # a value JSON cannot hold: our bug, one clear error
            raise BackendError(BAD_REQUEST, f"could not encode the request to {self.name}: {exc}") from None
        info.sent_at = time.perf_counter()
        extra: dict[str, Any] = {}  # keyword arguments of the client's stream()
        if req.read_timeout_s is not None:
            t = self._client.timeout
            extra["timeout"] = httpx.Timeout(connect=t.connect, read=req.read_timeout_s, write=t.write, pool=t.pool)
        try:
            async with self._client.stream(
                "POST",
                req.endpoint,
                content=content,
                headers={**JSON_HEADERS, "Accept": "text/event-stream", "Cache-Control": "no-store"},
                **extra,
            ) as resp:
                info.headers_at = time.perf_counter()
                self.last_activity = info.headers_at
                if info.on_headers is not None:
                    info.on_headers()
                info.trace_id = resp.headers.get("x-siliconcloud-trace-id") or resp.headers.get("x-request-id")
                if resp.status_code >= 400:
                    raw = await resp.aread()
                    raise classify(
                        resp.status_code,
                        raw,
                        backend=self.name,
                        model=self.model,
                        used_suffix=req.used_suffix,
                        headers=resp.headers,
                    )
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
