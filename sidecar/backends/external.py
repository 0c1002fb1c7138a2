"""Engines someone else runs (llama-server, Ollama): what they share.

Reaching an engine at its root URL, waiting until it is ready (``wait_until_ok``,
:class:`ExternalEngineBackend`), reading a body line by line without Unicode line
breaks splitting a JSON line (``iter_lines``), and the JSON helpers for their error
bodies and stream lines. Backends move bytes only; the request bodies are built on the
prompt side (``sidecar/completion/prompts``). See docs/architecture.md.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncGenerator
from typing import Any

import httpx2 as httpx

from ..providers import LOCAL
from .base import StreamInfo, UpstreamRequest
from .errors import ENGINE, UNKNOWN, BackendError, clip
from .openai_compat import OpenAICompatBackend

log = logging.getLogger(__name__)

#: The longest line (SSE field or NDJSON object) a local engine may send, in bytes.
MAX_LINE_BYTES = 8 * 1024 * 1024


async def iter_lines(resp: httpx.Response, max_line_bytes: int = MAX_LINE_BYTES) -> AsyncGenerator[bytes, None]:
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
    refused_fails_fast: bool = False,
) -> None:
    """Poll ``GET {backend.base_url}/{path}`` until it answers 200.

    A refused or failed connection and 5xx answers (503: the model is loading) are
    retried every 50 ms to 250 ms (doubling) until ``timeout_s`` seconds have passed; a
    4xx answer means the URL is not ``engine``'s root and fails at once. With
    ``refused_fails_fast``, a first attempt whose connection fails (nothing listens there)
    fails at once too: an engine that is not running is not loading either.

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
            text = clip(raw.decode("utf-8", "replace"), 200)
            if r.status_code < 500:
                raise BackendError(
                    ENGINE,
                    f"{url} answered HTTP {r.status_code}: is {backend.base_url} the root URL of {engine}?",
                    r.status_code,
                    text,
                )
            last = f"HTTP {r.status_code} {message_of(raw) or text}".strip()
        except httpx.TransportError as exc:
            last = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            if refused_fails_fast and refused and isinstance(exc, httpx.ConnectError):
                raise BackendError(
                    ENGINE, f"{engine} is not running at {backend.base_url} ({last}); {start_hint}"
                ) from None
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


def message_of(raw: bytes) -> str:
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
        return clip(str(err.get("message") or ""))
    return clip(str(err))


class ExternalEngineBackend(OpenAICompatBackend):
    """An engine someone else runs, reached at its root URL (a trailing ``/v1`` is
    dropped). :meth:`ensure_ready` polls ``health_path`` until it answers 200 (see
    :func:`wait_until_ok`), then runs :meth:`_after_ready`, all within
    ``ready_timeout_s`` seconds; after the first success it returns at once, and
    concurrent callers share one wait. Raises BackendError(ENGINE) on timeout.
    """

    health_path = "health"
    engine_label = "engine"
    loads_models = True  # llama-server and Ollama load a model on a request (Ollama after keep_alive)
    start_hint = "start it and check the URL."

    def __init__(
        self,
        *,
        name: str,
        provider: str = LOCAL.name,
        base_url: str,
        model: str,
        ready_timeout_s: float = 120.0,
        **kwargs: Any,
    ) -> None:
        root = base_url.rstrip("/")
        if root.endswith("/v1"):
            root = root[: -len("/v1")]
        super().__init__(name=name, provider=provider, base_url=root, model=model, **kwargs)
        self.prewarm_path = self.health_path
        self.ready_timeout_s = ready_timeout_s
        self._ready = False
        self._ready_task: asyncio.Task[None] | None = None

    @property
    def ready(self) -> bool:
        """True once :meth:`ensure_ready` has succeeded."""
        return self._ready

    async def ensure_ready(self) -> None:
        """Return once the engine is ready. An engine that refuses the connection (nothing
        listens: it is not running) fails at once; one that answers but is not ready (503
        while it loads its model) is polled by one background task that every caller
        shares, so no caller holds a lock while it waits and each can be bounded by its own
        deadline (the scheduler answers the LSP request at its deadline meanwhile).

        Raises BackendError(ENGINE) naming the URL, the cause and how to start the engine.
        """
        if self._ready:
            return
        task = self._ready_task
        if task is None or task.done():
            task = self._ready_task = asyncio.ensure_future(self._become_ready())
        await asyncio.shield(task)

    async def _become_ready(self) -> None:
        deadline = time.perf_counter() + self.ready_timeout_s
        await wait_until_ok(
            self,
            self.health_path,
            self.ready_timeout_s,
            engine=self.engine_label,
            start_hint=self.start_hint,
            refused_fails_fast=True,
        )
        await self._after_ready(deadline)
        self._ready = True
        log.info("%s ready at %s", self.name, self.base_url)

    async def aclose(self) -> None:
        if self._ready_task is not None and not self._ready_task.done():
            self._ready_task.cancel()
        await super().aclose()

    async def _after_ready(self, deadline: float) -> None:
        """Work to finish before the engine counts as ready (``deadline``: perf_counter s)."""

    async def stream(self, req: UpstreamRequest, info: StreamInfo) -> AsyncGenerator[str, None]:
        """Like :meth:`OpenAICompatBackend.stream`, with the engine's own errors renamed
        by :meth:`_named` (each engine's subclass says how), so the user reads what the
        engine meant, not a bare HTTP status."""
        agen = super().stream(self._routed(req), info)
        try:
            async for delta in agen:
                yield delta
        except BackendError as err:
            raise self._named(err, req) from None
        finally:
            await agen.aclose()

    def _routed(self, req: UpstreamRequest) -> UpstreamRequest:
        """``req`` as this engine takes it (e.g. a path prefix); unchanged by default."""
        return req

    def _named(self, err: BackendError, req: UpstreamRequest) -> BackendError:
        """``err`` with the engine's meaning in its kind and message; unchanged by default."""
        return err
