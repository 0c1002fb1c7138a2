"""The prompt side: every wire format a backend is sent, built from a
``CompletionContext`` (``build.py``: the strategy choice, OpenAI-shaped FIM, family FIM
templates, chat, stop sequences; ``infill.py``: llama-server ``/infill``; ``ollama.py``:
Ollama ``/api/generate``; ``snippets.py``: other open files' snippets in each format).
Backends only move these bodies; they never import this package. See
docs/architecture.md."""

from .build import (
    SILICONFLOW_NATIVE_FIM,
    build_request,
    choose_strategy,
    stop_sequences,
    template_for,
)
from .infill import infill_request
from .ollama import generate_request

__all__ = ["SILICONFLOW_NATIVE_FIM", "build_request", "choose_strategy", "generate_request", "infill_request",
           "stop_sequences", "template_for"]
