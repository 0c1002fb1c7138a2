"""The managed engine's process: llama-cpp-python's OpenAI-compatible server as a child
process on 127.0.0.1 (docs/architecture.md, "The embedded engine").

The child runs our launcher (``engine_launcher.py``), which keeps the weights out of
llama.cpp's extra buffer types (the AMX crash). Readiness is a 200 from
``GET /v1/models`` followed by the warm-up prompt (``engine_start.py``). The engine's
output goes to its log file, never to our stdout (the LSP channel). The child dies with
us: SIGTERM on stop, ``PR_SET_PDEATHSIG`` on Linux if we are killed, and an ``atexit``
hook otherwise. What it needs installed is checked by ``engine_setup.py``; the restart
policy is ``local_engine.py``'s.
"""

from __future__ import annotations

import asyncio
import atexit
import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2 as httpx
import platformdirs

from .child_env import child_environment
from .engine_setup import CRASH_FIX, DOCTOR_HINT, INSTALL_HINT, check_model_file, engine_installed, shipped_model_path
from .engine_start import WARMUP_MAX_TOKENS, EngineStartError, describe_exit, warmup_prompt
from .errors import ENGINE, ENGINE_MISSING, BackendError

log = logging.getLogger(__name__)

#: The engine log is rotated at a start once it is larger than this (bytes).
ENGINE_LOG_MAX_BYTES = 4 * 1024 * 1024


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
    """One llama-cpp-python server process on 127.0.0.1, started through our launcher
    (:mod:`sidecar.backends.engine_launcher`, which keeps the weights out of llama.cpp's
    extra buffer types; see there why).

    ``n_ctx`` is in tokens; ``n_gpu_layers`` follows llama.cpp (0 = CPU only, -1 = all;
    None = all when the installed build has a GPU backend, else 0).
    The engine's own output goes to ``<platform log dir>/sidecar/engine.log``, never to our
    stdout (the LSP channel). The child's environment holds no secret
    (:func:`sidecar.backends.child_env.child_environment`); ``secrets`` are values to
    keep out of it even under an allowed name (the configured API key).
    """

    def __init__(self, model_path: str | None, *, n_ctx: int = 2048, n_gpu_layers: int | None = 0,
                 threads: int | None = None,
                 secrets: tuple[str | None, ...] = ()) -> None:
        self.model_path = Path(model_path) if model_path else None
        self.n_ctx = n_ctx
        if n_gpu_layers is None:  # the default: every layer where the build can offload
            from ..models.hardware import engine_offloads

            n_gpu_layers = -1 if engine_offloads() else 0
        self.n_gpu_layers = n_gpu_layers
        self.threads = threads
        self.secrets = secrets
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        self.ready_at = 0.0
        self.warmup_ms: float | None = None
        self.warmup_text: str | None = None  # the warm-up's prompt (for the window budget's prior)
        # The prompt of a completion request waiting for the engine to be ready, set by
        # the backend (``LocalEngineBackend.stream``); the warm-up uses it when there is one.
        self.waiting_prompt: str | None = None
        self.log_path = Path(platformdirs.user_log_dir("sidecar")) / "engine.log"
        self._log_offset = 0
        self._checked: Path | None = None  # the model file check() accepted

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def command(self, model: Path) -> list[str]:
        """The child's command line: our launcher with llama-cpp-python server options."""
        cmd = [
            sys.executable, "-m", "sidecar.backends.engine_launcher",
            "--model", str(model),
            "--model_alias", model.stem,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--n_ctx", str(self.n_ctx),
            "--n_gpu_layers", str(self.n_gpu_layers),
            # Logits for the last token only: the server's default (True) computes them for
            # every prompt token, a n_ctx x vocabulary buffer (152k tokens for Qwen2.5-Coder):
            # a cold 1,500-token prompt took ~30 % longer and 3x the memory (DESIGN.md §6).
            "--logits_all", "False",
        ]
        if self.threads:
            cmd += ["--n_threads", str(self.threads)]
        return cmd

    def check(self) -> Path:
        """The model file to load, checked (engine installed, the file a GGUF whose header
        parses); reads the header, so call it off the event loop. Raises what
        :meth:`spawn` raises for these causes. A file checked once is not read again."""
        if not engine_installed():
            raise BackendError(ENGINE_MISSING, f"the embedded engine (llama-cpp-python) is not installed: "
                                               f"{INSTALL_HINT}", permanent=True)
        model = self.model_path or shipped_model_path()
        if self._checked != model:
            check_model_file(model)
            self._checked = model
        return model

    def spawn(self) -> None:
        """Start the child process (returns at once; see :meth:`wait_ready`).

        Raises BackendError, ``permanent`` when retrying cannot help: llama-cpp-python is
        not installed (ENGINE_MISSING), the model file is missing or not a loadable GGUF
        (ENGINE); not permanent when the process cannot start.
        """
        model = self.check()
        self.port = _free_port()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        try:  # one earlier generation is kept: engine.log.1
            if self.log_path.stat().st_size > ENGINE_LOG_MAX_BYTES:
                os.replace(self.log_path, self.log_path.with_name(self.log_path.name + ".1"))
        except OSError:
            pass
        logf = open(self.log_path, "ab")
        self._log_offset = logf.tell()
        root = str(Path(__file__).resolve().parents[2])  # the directory holding `sidecar`
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
        env = child_environment({"PYTHONUNBUFFERED": "1", "PYTHONPATH": path}, secrets=self.secrets)
        try:
            self.proc = subprocess.Popen(
                self.command(model),
                stdin=subprocess.DEVNULL,
                stdout=logf,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
                env=env,
            )
        except OSError as exc:
            raise BackendError(ENGINE, f"cannot start the local engine: {exc}") from None
        finally:
            logf.close()
        self.started_at = time.perf_counter()
        self.ready_at = 0.0
        atexit.register(self.stop_sync)
        log.info("local engine pid %s starting on port %s with %s", self.proc.pid, self.port, model.name)

    def log_tail(self, lines: int = 3) -> str:
        """The last ``lines`` non-empty lines this run wrote to the engine log."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_offset)
                data = f.read()[-20000:]
        except OSError:
            return ""
        out = [ln.strip() for ln in data.decode("utf-8", "replace").splitlines() if ln.strip()]
        return " | ".join(out[-lines:])

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
        """Poll ``GET /v1/models`` until it answers 200, then run the warm-up: a completion
        of ``WARMUP_MAX_TOKENS`` tokens, which loads the weights and exercises the same
        code path as a real request. Its prompt is that of the completion request waiting
        for the engine (``waiting_prompt``) when there is one: the engine keeps that
        prompt in its KV cache, so the user's first request then costs decoding only
        (opening a 1,382-line file with the 0.5B code model: the first suggestion 4.1-4.5 s
        after opening with the generic warm-up, docs/architecture.md "Cold backends");
        else :func:`warmup_prompt` (~170 tokens). With ``request_grace_s`` (seconds) the
        warm-up waits that long for a request once the server answers: an editor asks
        for its first suggestion about when the server comes up (a second or two after
        start), and a warm-up on the built-in prompt would make that request wait for it.

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
                    raise EngineStartError(f"the local engine was not ready after {timeout_s:.0f} s; see {self.log_path}")
                await asyncio.sleep(0.1)
            grace_end = time.perf_counter() + request_grace_s
            while self.waiting_prompt is None and time.perf_counter() < grace_end:
                await asyncio.sleep(0.02)
            t = time.perf_counter()
            prompt, self.waiting_prompt = self.waiting_prompt or warmup_prompt(), None
            self.warmup_text = prompt
            # On the waiting request's prompt, one decode step is enough: that request
            # decodes right after, and every token here is one it waits for.
            waiting = prompt != warmup_prompt()
            body = {"prompt": prompt, "max_tokens": 2 if waiting else WARMUP_MAX_TOKENS, "temperature": 0.0}
            try:
                r = await client.post(f"{self.base_url}/completions", json=body,
                                      timeout=max(1.0, deadline - time.perf_counter()))
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
        log.info("local engine ready in %.1f s (warm-up %.0f ms, on %s)", self.ready_at - self.started_at,
                 self.warmup_ms, "the waiting request's prompt" if waiting else "the built-in prompt")

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
