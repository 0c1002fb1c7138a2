"""What every process that loads a model with llama-cpp-python here does first: keep the
weights out of llama.cpp's "extra" buffer types, whose AMX path crashes on machines that
advertise AMX but cannot run it (why, and what it costs: docs/architecture.md, "The
embedded engine", and the docstring of ``backends/engine_launcher.py``). The managed
engine's launcher and the speed measurement (``speed.py``) both call it.
"""

from __future__ import annotations


def disable_extra_buffer_types() -> None:
    """Make every ``llama_model_params`` that llama-cpp-python creates start with
    ``use_extra_bufts = False``. Raises RuntimeError when the installed llama-cpp-python
    has no such field (then the launcher refuses to start rather than risk the crash)."""
    import llama_cpp.llama_cpp as lib

    fields = {field[0] for field in lib.llama_model_params._fields_}  # (name, type) or (name, type, bits)
    if "use_extra_bufts" not in fields:
        raise RuntimeError(
            "this llama-cpp-python has no llama_model_params.use_extra_bufts; install llama-cpp-python==0.3.36"
        )
    original = lib.llama_model_default_params
    if getattr(original, "_sidecar_safe", False):
        return

    def safe_default_params():
        params = original()
        params.use_extra_bufts = False
        return params

    safe_default_params._sidecar_safe = True  # type: ignore[attr-defined]
    lib.llama_model_default_params = safe_default_params
