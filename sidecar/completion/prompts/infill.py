"""llama-server's ``POST /infill`` request body (llama.cpp tools/server/README.md):
``input_prefix``, ``input_suffix``, ``input_extra`` (other files' text, placed before
the FIM prompt), ``n_predict``, ``temperature``, ``stop``, ``cache_prompt``. The server
applies the model's own FIM tokens. Sent by ``backends/llama_server.py``."""

from __future__ import annotations

from typing import Any

from ...backends.base import UpstreamRequest
from ..context import CompletionContext
from . import snippets
from .build import stop_sequences


def infill_request(
    ctx: CompletionContext,
    *,
    max_tokens: int,
    temperature: float,
    extra: list[dict] | None = None,
) -> UpstreamRequest:
    """The ``/infill`` request for ``ctx`` (strategy ``"infill"``).

    ``max_tokens`` becomes ``n_predict`` (tokens); ``extra`` items are
    ``{"filename": str, "text": str}`` (other files' text, e.g. neighbouring tabs) and go
    to ``input_extra`` as given, followed by ``ctx.snippets`` (other open files,
    :mod:`..crossfile`, as :func:`.snippets.input_extra` renders them). ``stop`` comes
    from :func:`.build.stop_sequences` (at most four), and ``cache_prompt`` is always on.
    The backend adds ``model`` and ``stream``.

    Raises ValueError when an ``extra`` item lacks a string ``text`` or has a non-string
    ``filename``.
    """
    chunks: list[dict[str, str]] = []
    for item in extra or []:
        text = item.get("text") if isinstance(item, dict) else None
        filename = item.get("filename", "") if isinstance(item, dict) else None
        if not isinstance(text, str) or not isinstance(filename, str):
            raise ValueError('input_extra items must be {"filename": str, "text": str}')
        chunks.append({"filename": filename, "text": text})
    chunks.extend(snippets.input_extra(ctx.snippets))
    body: dict[str, Any] = {
        "input_prefix": ctx.prefix,
        "input_suffix": ctx.suffix,
        "input_extra": chunks,
        "n_predict": max_tokens,
        "temperature": temperature,
        "stop": stop_sequences(ctx),
        "cache_prompt": True,
    }
    return UpstreamRequest(endpoint="infill", body=body, strategy="infill")
