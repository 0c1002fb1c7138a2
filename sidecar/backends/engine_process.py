"""The managed engine's process: llama-cpp-python's OpenAI-compatible server as a child
process on 127.0.0.1 (docs/architecture.md, "The embedded engine"): its command line,
its start, its log and its stop. When it is ready is ``managed_engine.py``'s.

The child runs our launcher (``engine_launcher.py``), which keeps the weights out of
llama.cpp's extra buffer types (the AMX crash). The engine's output goes to its log
file, never to our stdout (the LSP channel). The child dies with us: SIGTERM on stop,
``PR_SET_PDEATHSIG`` on Linux if we are killed, and an ``atexit`` hook otherwise. What
it needs installed is checked by ``engine_setup.py``.
"""

from __future__ import annotations

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

import platformdirs

from ..models.hardware import default_threads
from ..models.shipped import INSTALL_HINT
from .child_env import child_environment
from .engine_setup import check_model_file, engine_installed, shipped_model_path
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


class EngineProcess:
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

    def __init__(
        self,
        model_path: str | None,
        *,
        n_ctx: int = 2048,
        n_gpu_layers: int | None = 0,
        threads: int | None = None,
        secrets: tuple[str | None, ...] = (),
    ) -> None:
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
        self.ready_at = 0.0  # when it was called ready (``ManagedEngine.wait_ready``); 0: not yet
        self.log_path = Path(platformdirs.user_log_dir("sidecar")) / "engine.log"
        self._log_offset = 0
        self._checked: Path | None = None  # the model file check() accepted

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        """The engine process's pid while it runs; None before the start and after it ended."""
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def command(self, model: Path) -> list[str]:
        """The child's command line: our launcher with llama-cpp-python server options."""
        cmd = [
            sys.executable,
            "-m",
            "sidecar.backends.engine_launcher",
            "--model",
            str(model),
            "--model_alias",
            model.stem,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--n_gpu_layers",
            str(self.n_gpu_layers),
            # Logits for the last token only: the server's default (True) computes them for
            # every prompt token, a n_ctx x vocabulary buffer (152k tokens for Qwen2.5-Coder):
            # a cold 1,500-token prompt took ~30 % longer and 3x the memory (docs/architecture.md,
            # "Local code models").
            "--logits_all",
            "False",
            # The weights read into memory the engine owns rather than mapped from the file:
            # on a 2-vCPU Xeon VM the 1.5B decoded 10.6 tokens/s against 5.9 from the
            # mapped file (prefill 93 against 82 tokens/s; the 0.5B unchanged), at the
            # same resident size (docs/engines.md, "Weights in memory, not mapped").
            "--use_mmap",
            "False",
        ]
        cmd += ["--n_threads", str(self.threads or default_threads())]
        return cmd

    def check(self, header: bool = True) -> Path:
        """The model file to load, checked (engine installed, the file a GGUF whose header
        parses; without ``header`` only its first bytes are read); the header takes ~0.3 s,
        so call it off the event loop. Raises what :meth:`spawn` raises for these causes.
        A file whose header was checked once is not read again."""
        if not engine_installed():
            raise BackendError(
                ENGINE_MISSING,
                f"the embedded engine (llama-cpp-python) is not installed: {INSTALL_HINT}",
                permanent=True,
            )
        model = self.model_path or shipped_model_path()
        if self._checked != model:
            check_model_file(model, header=header)
            if header:
                self._checked = model
        return model

    def spawn(self, header: bool = True) -> None:
        """Start the child process (returns at once; see :meth:`wait_ready`). With
        ``header`` False the model's header is not parsed first: the caller checks it
        (:meth:`check`) while the engine starts (``LocalEngineBackend``), which takes
        the ~0.3 s of that parse off the first suggestion.

        Raises BackendError, ``permanent`` when retrying cannot help: llama-cpp-python is
        not installed (ENGINE_MISSING), the model file is missing or not a loadable GGUF
        (ENGINE); not permanent when the process cannot start.
        """
        model = self.check(header=header)
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
