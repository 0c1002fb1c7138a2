"""Ollama's ``POST /api/generate`` request body (Ollama docs/api.md, "Generate a
completion"): ``prompt``, ``suffix`` (Ollama renders the model's FIM template), ``raw``,
``options`` (``num_predict``, ``temperature``, ``stop``), ``keep_alive``. Sent by
``backends/ollama.py``."""

from __future__ import annotations

from typing import Any

from ...backends.base import UpstreamRequest
from ...backends.ollama import DEFAULT_KEEP_ALIVE
from ..context import CompletionContext
from .build import stop_sequences


def generate_request(
    ctx: CompletionContext,
    *,
    model: str,
    fim: bool,
    max_tokens: int,
    temperature: float,
    keep_alive: str = DEFAULT_KEEP_ALIVE,
) -> UpstreamRequest:
    """The ``/api/generate`` request for ``ctx``.

    ``fim=True`` (a model with a FIM template, e.g. ``qwen2.5-coder``): ``prompt`` is the
    prefix and ``suffix`` the text after the cursor; Ollama renders the template;
    strategy ``"suffix"``. ``fim=False``: ``raw: true`` and the prefix alone, a plain
    continuation; strategy ``"prefix"``. ``max_tokens`` becomes ``options.num_predict``
    (tokens); ``stop`` comes from :func:`.build.stop_sequences`; ``keep_alive`` is an
    Ollama duration (``"30m"``, ``"-1"`` forever). ``model`` is recorded in the body too;
    the backend sets ``model`` and ``stream`` when sending.
    """
    body: dict[str, Any] = {"model": model, "prompt": ctx.prefix}
    if fim:
        body["suffix"] = ctx.suffix
    body["raw"] = not fim
    body["options"] = {
        "num_predict": max_tokens,
        "temperature": temperature,
        "stop": stop_sequences(ctx),
    }
    body["keep_alive"] = keep_alive
    return UpstreamRequest(endpoint="api/generate", body=body, strategy="suffix" if fim else "prefix")
