"""The managed local engine as a backend: the engine process (``managed_engine.py``)
behind an OpenAI-compatible client, with its lifecycle policy: restarts with back-off,
start-up crashes counted, permanent errors shown once (docs/architecture.md, "The
embedded engine").

Its parts: ``engine_setup.py`` (llama-cpp-python and the shipped model, and the hints for
the user), ``engine_start.py`` (the warm-up prompt, how a failed start or an exit is
described), ``managed_engine.py`` (when the engine is ready: the warm-up) and
``engine_process.py`` (the child process).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from ..models.select import LocalModelChoice
from ..models.shipped import SHIPPED_MODEL_NAME
from ..providers import LOCAL, MANAGED
from .base import BackendBase, StreamInfo, UpstreamRequest
from .engine_start import EngineStartError, describe_exit
from .errors import ENGINE, BackendError
from .managed_engine import ManagedEngine
from .openai_compat import OpenAICompatBackend

__all__ = ["LocalEngineBackend"]

log = logging.getLogger(__name__)

RESTART_BACKOFF_S = (1.0, 2.0, 5.0, 10.0, 30.0)

#: Start-up crashes in a row after which the engine is given up on (a permanent error).
MAX_START_CRASHES = 3


#: Seconds the warm-up waits for the first completion request once the engine's server
#: answers, to warm up on that request's prompt (``ManagedEngine.wait_ready``).
WARMUP_REQUEST_GRACE_S = 0.5


class LocalEngineBackend(BackendBase):
    """The embedded default backend: a :class:`ManagedEngine` behind an OpenAI-compatible
    client. Requests wait for the engine to be ready (up to ``cold_start_timeout_ms``);
    the scheduler answers the LSP request at its own deadline meanwhile.

    Lifecycle (docs/architecture.md, "The embedded engine"):

    - a *transient* failure (the engine died after running, one start-up failure) makes
      the next request restart it, waiting ``RESTART_BACKOFF_S`` seconds between
      consecutive attempts (1, 2, 5, 10, then 30 s; back to 1 s once it has run for a
      minute); ``notify(message)`` gets one notice per restart (the log channel);
    - a *permanent* failure (the engine is not installed, the model file is missing or not
      a GGUF, or the engine crashed during start-up ``MAX_START_CRASHES`` times in a row)
      stops the restarts: :attr:`permanent_error` holds it, and every request fails at
      once with it (``permanent=True``: the user must act; the message says how);
    - ``progress(kind, message)`` is called with ``"begin"`` and ``"end"`` around each
      model load.
    """

    provider = LOCAL.name
    api = "llama-cpp-python"
    headers_before_prompt = True  # its SSE response starts before the prompt is evaluated
    loads_models = True  # the process starts (and loads the model) on the first request

    def __init__(
        self,
        engine: ManagedEngine,
        *,
        cold_start_timeout_ms: int,
        read_timeout_ms: int = 30000,
        choice: LocalModelChoice | None = None,
    ) -> None:
        super().__init__()
        self._engine = engine
        self.name = MANAGED.label
        # The model name is the GGUF's file stem: the prompt builder picks the FIM
        # template by it (``qwen2.5-coder-0.5b-instruct`` -> Qwen's FIM tokens).
        self.model = engine.model_path.stem if engine.model_path else SHIPPED_MODEL_NAME
        self.choice = choice
        self._noted = False
        self.cold_start_timeout_s = cold_start_timeout_ms / 1000
        self._read_timeout_ms = read_timeout_ms
        self._client: OpenAICompatBackend | None = None
        self._ready: asyncio.Task[None] | None = None
        self._attempts = 0
        self._start_crashes = 0
        self.restarts = 0
        self.permanent_error: BackendError | None = None
        if choice is not None and choice.error:  # the configured model cannot be had: say how, start nothing
            self.permanent_error = BackendError(ENGINE, choice.error, permanent=True)

    def start(self) -> None:
        """Spawn the engine and begin waiting for it in the background (idempotent while
        it is starting or running; nothing after a permanent failure)."""
        if self.choice is not None and self.choice.note and not self._noted:
            self._noted = True  # said once per backend, on the log channel
            log.warning("%s", self.choice.note)
            self.notify(self.choice.note)
        if self._ready is None and self.permanent_error is None:
            self._ready = asyncio.ensure_future(self._start(0.0))

    async def _start(self, delay_s: float) -> None:
        if delay_s:
            await asyncio.sleep(delay_s)
        self._attempts += 1
        self.progress("begin", f"loading the local model {self.model}")
        try:
            # The engine starts at once; the model's header is parsed off the loop while
            # it loads (~0.3 s of the first suggestion). A header that does not parse stops
            # the engine with a permanent error before it is ever called ready.
            self.engine.spawn(header=False)
            ready = asyncio.ensure_future(
                self.engine.wait_ready(self.cold_start_timeout_s, request_grace_s=WARMUP_REQUEST_GRACE_S)
            )
            try:
                await asyncio.to_thread(self.engine.check)
            except BaseException:
                ready.cancel()
                with contextlib.suppress(BaseException):
                    await ready
                raise
            await ready
        except BackendError as err:
            self.engine.stop_sync()
            if isinstance(err, EngineStartError) and err.crashed:
                self._start_crashes += 1
                if self._start_crashes >= MAX_START_CRASHES:
                    err = BackendError(
                        ENGINE,
                        f"gave up on the local engine: it crashed during start-up {self._start_crashes} times in "
                        f"a row ({err.message})",
                        permanent=True,
                    )
            if err.permanent:
                self.permanent_error = err
                log.error("local engine: %s", err.message)
            raise err from None
        finally:
            self.progress("end", "local model loaded" if self.engine.ready_at else "local model did not load")
        self._start_crashes = 0
        if self._client is None:
            self._client = OpenAICompatBackend(
                name=self.name,
                provider=self.provider,
                base_url=self.engine.base_url,
                model=self.model,
                read_timeout_ms=self._read_timeout_ms,
            )
        else:
            self._client.base_url = self.engine.base_url.rstrip("/")
            self._client._client.base_url = self.engine.base_url.rstrip("/") + "/"

    def _restart(self, why: str) -> None:
        ran_s = time.perf_counter() - (self.engine.ready_at or self.engine.started_at)
        if self.engine.ready_at and ran_s > 60:
            self._attempts = 0
        delay = RESTART_BACKOFF_S[min(self._attempts, len(RESTART_BACKOFF_S)) - 1] if self._attempts else 0.0
        self.engine.stop_sync()
        self.restarts += 1
        log.warning("%s; restarting it in %.0f s", why, delay)
        self.notify(f"{why}; restarting it" + (f" in {delay:.0f} s" if delay else ""))
        self._ready = asyncio.ensure_future(self._start(delay))

    @property
    def ready(self) -> bool:
        return self._client is not None and self.engine.alive()

    async def ensure_ready(self) -> None:
        """Wait for the engine (starting or restarting it as the policy above says).

        Raises BackendError(ENGINE or ENGINE_MISSING): ``permanent`` after a permanent
        failure, ``actionable=False`` for a failure that a restart is handling."""
        if self.permanent_error is not None:
            raise self.permanent_error
        self.start()
        assert self._ready is not None
        if self._ready.done():
            exc = self._ready.exception() if not self._ready.cancelled() else None
            if self.permanent_error is not None:
                raise self.permanent_error
            if exc is not None:
                self._restart(f"the local engine failed to start ({getattr(exc, 'message', exc)})")
            elif not self.engine.alive():
                code = self.engine.proc.returncode if self.engine.proc else None
                self._restart(f"the local engine {describe_exit(code)}")
        try:
            await asyncio.shield(self._ready)
        except BackendError as err:
            if err.permanent:
                raise
            raise BackendError(err.kind, err.message, actionable=False) from None
        if not self.engine.alive():
            code = self.engine.proc.returncode if self.engine.proc else None
            raise BackendError(
                ENGINE, f"the local engine {describe_exit(code)}; see {self.engine.log_path}", actionable=False
            )

    async def stream(self, req: UpstreamRequest, info: StreamInfo):
        await self.ensure_ready()
        assert self._client is not None
        try:
            async for delta in self._client.stream(req, info):
                yield delta
        except BackendError:
            for _ in range(10):  # a crash closes the socket a moment before the exit is seen
                if not self.engine.alive():
                    break
                await asyncio.sleep(0.02)
            if self.engine.alive():
                raise
            # The engine died under this request (a crash on this prompt): say how it
            # ended; the next request restarts it.
            code = self.engine.proc.returncode if self.engine.proc else None
            raise BackendError(
                ENGINE,
                f"the local engine {describe_exit(code)} while answering; its log is {self.engine.log_path}",
                actionable=False,
            ) from None

    @property
    def engine(self) -> ManagedEngine:
        """The engine process this backend runs (never None here)."""
        return self._engine

    def expect_prompt(self, prompt: str) -> None:
        """A completion request with this prompt waits for the engine: if the warm-up has
        not started, it runs on this prompt (``ManagedEngine.wait_ready``)."""
        if prompt and not self.ready:
            self.engine.waiting_prompt = prompt

    async def prewarm(self) -> None:
        self.start()

    def idle_for_s(self) -> float:
        return self._client.idle_for_s() if self._client else float("inf")

    def busy_connections(self) -> int | None:
        return self._client.busy_connections() if self._client else 0

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
        self.engine.stop_sync()
        if self._ready is not None and not self._ready.done():
            self._ready.cancel()
