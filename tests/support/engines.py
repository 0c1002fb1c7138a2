"""The document and model the external-engine tests (llama-server, Ollama) complete in."""

from __future__ import annotations

from sidecar.completion.context import build_context

MODEL = "qwen2.5-coder:1.5b"

DOC = "import os\n\ndef add(a, b):\n    \n\nprint(add(1, 2))\n"
BLANK_LINE = DOC.index("    \n") + 4  # the end of the indented blank line in add()
MID_LINE = DOC.index("(1, 2)")  # inside print(...): text follows the cursor


def ctx_at(offset: int = BLANK_LINE):
    return build_context(DOC, offset, "python", 256, 128)
