"""The managed engine: llama-cpp-python's server as our child process
(``engine_process.py``: its command line, start, log and stop), and when it is ready
(docs/architecture.md, "The embedded engine").

Readiness is a 200 from ``GET /v1/models`` followed by the warm-up prompt
(``engine_start.py``), on the prompt of the request waiting for the engine when there
is one. The restart policy is ``local_engine.py``'s.
"""

from __future__ import annotations

import asyncio
import logging
import time

import httpx2 as httpx

from .base import JSON_HEADERS, json_body
from .engine_process import EngineProcess
from .engine_setup import CRASH_FIX, DOCTOR_HINT
from .engine_start import WARMUP_MAX_TOKENS, EngineStartError, describe_exit, warmup_prompt

log = logging.getLogger(__name__)


class ManagedEngine(EngineProcess):
    """The engine process (:class:`EngineProcess`, same arguments) and its start-up:
    :meth:`wait_ready` after :meth:`~EngineProcess.spawn`."""

    def __init__(
        self,
        model_path: str | None,
        *,
        n_ctx: int = 2048,
        n_gpu_layers: int | None = 0,
        threads: int | None = None,
        secrets: tuple[str | None, ...] = (),
    ) -> None:
        super().__init__(model_path, n_ctx=n_ctx, n_gpu_layers=n_gpu_layers, threads=threads, secrets=secrets)
        self.warmup_ms: float | None = None
        self.warmup_text: str | None = None  # the warm-up's prompt (for the window budget's prior)
        # The prompt of a completion request waiting for the engine to be ready, set by
        # the backend (``LocalEngineBackend.stream``); the warm-up uses it when there is one.
        self.waiting_prompt: str | None = None

    def _died(self, during: str) -> EngineStartError:
        code = self.proc.returncode if self.proc is not None else None
        crashed = code is not None and (code < 0 or during == "warm-up")
        msg = f"the local engine {describe_exit(code)} during {during}; its log is {self.log_path}"
        tail = self.log_tail()
        if tail and not (code is not None and code < 0):
            msg += f" (last lines: {tail[-300:]})"
        if code is not None and code < 0:
            msg += f". Fix: {CRASH_FIX}; {DOCTOR_HINT}"
        return EngineStartError(msg, returncode=code, crashed=crashed)

    async def wait_ready(self, timeout_s: float, request_grace_s: float = 0.0) -> None:
        """Poll ``GET /v1/models`` until it answers 200, then run the warm-up: one
        completion, which loads the weights and exercises the same code path as a real
        request. Its prompt is that of the completion request waiting for the engine
        (``waiting_prompt``) when there is one, with 2 tokens asked for (one decode step
        after the prompt's): the engine keeps that prompt in its KV cache, so the user's
        first request then costs decoding only (opening a 1,382-line file with the 0.5B
        code model: the first suggestion 3.0-3.4 s after opening, against 4.1-4.5 s with
        the built-in warm-up; docs/architecture.md, "What the model sees"). Else it is
        :func:`warmup_prompt` (~180 tokens) with ``WARMUP_MAX_TOKENS`` asked for. With
        ``request_grace_s`` (seconds) the warm-up waits that long for a request once the
        server answers: an editor asks for its first suggestion about when the server
        comes up (a second or two after start), and a warm-up on the built-in prompt
        would make that request wait for it.

        Raises EngineStartError (kind ENGINE) if the process exits (``crashed`` when it
        died on a signal or during the warm-up), the warm-up fails, or ``timeout_s``
        seconds pass.
        """
        deadline = time.perf_counter() + timeout_s
        async with httpx.AsyncClient(timeout=2.0, trust_env=False) as client:
            while True:
                if self.proc is None or self.proc.poll() is not None:
                    raise self._died("start-up")
                try:
                    r = await client.get(f"{self.base_url}/models")
                    if r.status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.perf_counter() > deadline:
                    raise EngineStartError(
                        f"the local engine was not ready after {timeout_s:.0f} s; see {self.log_path}"
                    )
                await asyncio.sleep(0.1)
            grace_end = time.perf_counter() + request_grace_s
            # A short poll: the request that sets it does not know a warm-up is waiting.
            while self.waiting_prompt is None and time.perf_counter() < grace_end:  # noqa: ASYNC110
                await asyncio.sleep(0.02)
            t = time.perf_counter()
            prompt, self.waiting_prompt = self.waiting_prompt or warmup_prompt(), None
            self.warmup_text = prompt
            # On the waiting request's prompt, one decode step is enough: that request
            # decodes right after, and every token here is one it waits for.
            waiting = prompt != warmup_prompt()
            body = {"prompt": prompt, "max_tokens": 2 if waiting else WARMUP_MAX_TOKENS, "temperature": 0.0}
            try:
                r = await client.post(
                    f"{self.base_url}/completions",
                    content=json_body(body),
                    headers=JSON_HEADERS,
                    timeout=max(1.0, deadline - time.perf_counter()),
                )
                failure = None if r.status_code == 200 else f"HTTP {r.status_code}: {r.text[:200]}"
            except httpx.HTTPError as exc:
                failure = f"{type(exc).__name__}: {exc}"
            if self.proc.poll() is None:
                # A crash closes the connection before the exit code is in: give it a moment.
                for _ in range(20):
                    if failure is None or self.proc.poll() is not None:
                        break
                    await asyncio.sleep(0.05)
            if self.proc.poll() is not None:
                raise self._died("warm-up")
            if failure is not None:
                raise EngineStartError(f"the local engine failed its warm-up prompt ({failure}); see {self.log_path}")
        self.warmup_ms = (time.perf_counter() - t) * 1000
        self.ready_at = time.perf_counter()
        log.info(
            "local engine ready in %.1f s (warm-up %.0f ms, on %s)",
            self.ready_at - self.started_at,
            self.warmup_ms,
            "the waiting request's prompt" if waiting else "the built-in prompt",
        )
