"""Wire shapes of SiliconFlow/OpenAI-compatible answers and request validation."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .tokens import count_tokens

MAX_STOP_SEQUENCES = 4

SSE_DONE = b"data: [DONE]\n\n"
SSE_KEEPALIVE = b": keep-alive\n\n"
SSE_MALFORMED = b"data: {not json\n\n"


def sse_event(obj: Any) -> bytes:
    """One SSE ``data:`` event. Non-ASCII stays raw (as real servers send it)."""
    return b"data: " + json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


def error_body(code: int, message: str) -> dict[str, Any]:
    """A SiliconFlow-shaped error body ``{"code", "message", "data": null}``."""
    return {"code": code, "message": message, "data": None}


class RequestError(Exception):
    """A request the simulated backend rejects with HTTP ``status`` and ``body``."""

    def __init__(self, status: int, body: dict[str, Any] | str) -> None:
        super().__init__(body)
        self.status = status
        self.body = body


def invalid(message: str) -> RequestError:
    return RequestError(400, error_body(20015, message))


@dataclass(frozen=True)
class GenerationParams:
    """The fields of a generation request the simulator acts on."""

    model: str
    stream: bool
    stop: tuple[str, ...]
    max_tokens: int | None
    prompt_tokens: int


def parse_generation(body: Any, chat: bool, default_model: str) -> GenerationParams:
    """Validate a ``/v1/completions`` (``chat=False``) or ``/v1/chat/completions`` body.

    ``stop`` may be a string or a list of at most 4 strings; ``max_tokens`` a
    non-negative integer or absent (no limit). Unknown fields are ignored.

    Raises:
        RequestError: 400 with a SiliconFlow-style body when the body is invalid.
    """
    if not isinstance(body, dict):
        raise invalid("Request body must be a JSON object")
    model = body.get("model", default_model)
    if not isinstance(model, str) or not model:
        raise invalid("`model` must be a non-empty string")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise invalid("`stream` must be a boolean")

    stop_raw = body.get("stop")
    if stop_raw is None:
        stop: tuple[str, ...] = ()
    elif isinstance(stop_raw, str):
        stop = (stop_raw,)
    elif isinstance(stop_raw, list) and all(isinstance(s, str) for s in stop_raw):
        stop = tuple(stop_raw)
    else:
        raise invalid("`stop` must be a string or a list of strings")
    if len(stop) > MAX_STOP_SEQUENCES:
        raise invalid(f"`stop` accepts at most {MAX_STOP_SEQUENCES} sequences, got {len(stop)}")

    max_tokens = body.get("max_tokens")
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 0):
        raise invalid("`max_tokens` must be a non-negative integer")

    prompt_tokens = 0
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise invalid("`messages` must be a non-empty list")
        for message in messages:
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, str):
                prompt_tokens += count_tokens(content)
        for key in ("prefix", "suffix"):
            if isinstance(body.get(key), str):
                prompt_tokens += count_tokens(body[key])
    else:
        prompt = body.get("prompt")
        if isinstance(prompt, list) and all(isinstance(p, str) for p in prompt):
            prompt = "".join(prompt)
        if not isinstance(prompt, str):
            raise invalid("`prompt` must be a string")
        prompt_tokens = count_tokens(prompt)
        suffix = body.get("suffix")
        if suffix is not None and not isinstance(suffix, str):
            raise invalid("`suffix` must be a string")
        if suffix:
            prompt_tokens += count_tokens(suffix)
    return GenerationParams(model, stream, stop, max_tokens, prompt_tokens)


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


class Shape:
    """Builds the JSON objects of one endpoint's answers (one instance per request)."""

    chunk_object = ""
    full_object = ""

    def __init__(self, response_id: str, created: int, model: str) -> None:
        self.id = response_id
        self.created = created
        self.model = model

    def _envelope(self, obj: str, choices: list, extra: dict | None = None) -> dict[str, Any]:
        out = {"id": self.id, "object": obj, "created": self.created, "model": self.model, "choices": choices}
        if extra:
            out.update(extra)
        return out

    def empty_chunk(self) -> dict[str, Any]:
        """A chunk with ``choices: []`` (clients must skip it)."""
        return self._envelope(self.chunk_object, [])

    def preamble(self) -> list[dict[str, Any]]:
        """Chunks sent before the first token besides the empty one."""
        return []

    def token_chunk(self, text: str) -> dict[str, Any]:
        raise NotImplementedError

    def final_chunk(self, finish_reason: str, use: dict[str, int]) -> dict[str, Any]:
        raise NotImplementedError

    def full(self, text: str, finish_reason: str, use: dict[str, int]) -> dict[str, Any]:
        raise NotImplementedError


class CompletionShape(Shape):
    """``/v1/completions``: text in ``choices[0].text``."""

    chunk_object = "text_completion"
    full_object = "text_completion"

    #: When set (the request asked for ``logprobs``): ``token text -> log-probability``
    #: for each chunk's legacy ``logprobs`` object (OpenAI API reference, "Completions").
    logprob: Callable[[str], float] | None = None

    def token_chunk(self, text: str) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": 0, "text": text, "finish_reason": None}
        if self.logprob is not None:
            choice["logprobs"] = {
                "tokens": [text],
                "token_logprobs": [self.logprob(text)],
                "top_logprobs": None,
                "text_offset": [0],
            }
        return self._envelope(self.chunk_object, [choice])

    def final_chunk(self, finish_reason: str, use: dict[str, int]) -> dict[str, Any]:
        return self._envelope(
            self.chunk_object, [{"index": 0, "text": "", "finish_reason": finish_reason}], {"usage": use}
        )

    def full(self, text: str, finish_reason: str, use: dict[str, int]) -> dict[str, Any]:
        return self._envelope(
            self.full_object, [{"index": 0, "text": text, "finish_reason": finish_reason}], {"usage": use}
        )


class ChatShape(Shape):
    """``/v1/chat/completions``: text in ``choices[0].delta.content`` / ``message.content``."""

    chunk_object = "chat.completion.chunk"
    full_object = "chat.completion"

    def preamble(self) -> list[dict[str, Any]]:
        return [
            self._envelope(
                self.chunk_object,
                [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
            )
        ]

    def token_chunk(self, text: str) -> dict[str, Any]:
        return self._envelope(self.chunk_object, [{"index": 0, "delta": {"content": text}, "finish_reason": None}])

    def final_chunk(self, finish_reason: str, use: dict[str, int]) -> dict[str, Any]:
        return self._envelope(
            self.chunk_object,
            [{"index": 0, "delta": {"content": ""}, "finish_reason": finish_reason}],
            {"usage": use},
        )

    def full(self, text: str, finish_reason: str, use: dict[str, int]) -> dict[str, Any]:
        return self._envelope(
            self.full_object,
            [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason}],
            {"usage": use},
        )
