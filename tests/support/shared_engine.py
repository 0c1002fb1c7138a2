"""Request bodies for the simulator's shared engine."""

from __future__ import annotations


def completion_body(prompt: str, max_tokens: int = 4, stream: bool = True, suffix: str | None = None) -> dict:
    """An OpenAI-style ``/completions`` body for model ``m``."""
    body = {"model": "m", "prompt": prompt, "max_tokens": max_tokens, "stream": stream}
    if suffix is not None:
        body["suffix"] = suffix
    return body
