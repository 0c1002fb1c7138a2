"""The prompt side: every wire format a backend is sent, built from a
``CompletionContext`` (``build.py``: the strategy choice, OpenAI-shaped FIM, family FIM
templates, chat, stop sequences; ``infill.py``: llama-server ``/infill``; ``ollama.py``:
Ollama ``/api/generate``; ``snippets.py``: other open files' snippets in each format).
Backends only move these bodies; they never import this package. See
docs/architecture.md."""

from ..families import template_for
from .build import build_request, choose_strategy, stop_sequences
from .infill import infill_request
from .ollama import generate_request

# template_for is owned by ``completion/families.py``; it is offered here because
# ``sidecar doctor``'s FIM check picks the prompt shape through this package.
__all__ = ["build_request", "choose_strategy", "generate_request", "infill_request", "stop_sequences", "template_for"]
