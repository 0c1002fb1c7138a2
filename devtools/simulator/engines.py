"""Wire shapes of the local engines the simulator imitates: llama.cpp's ``llama-server``
and Ollama.

llama-server (its README, "POST /infill" and "GET /health"):

- ``POST /infill`` takes ``input_prefix``, ``input_suffix``, ``input_extra`` (a list of
  ``{"filename", "text"}``), ``n_predict`` (-1: no limit), ``stop`` (list of strings),
  ``cache_prompt``, ``stream``. A stream is SSE: ``data: {"content": "...", "stop": false,
  ...}`` per token, then one event with ``"stop": true``, ``stop_type`` (``eos``,
  ``word``, ``limit``), ``tokens_cached`` (tokens in the slot's context afterwards) and
  ``timings`` (``cache_n``: prompt tokens reused from the KV cache, ``prompt_n``: prompt
  tokens evaluated). There is no ``[DONE]``.
- Errors are ``{"error": {"code", "message", "type"}}``; while the model loads,
  ``/health`` and the generating endpoints answer 503 ``Loading model``.

Ollama (its docs/api.md, "Generate a completion"):

- ``POST /api/generate`` takes ``model``, ``prompt``, ``suffix``, ``raw``, ``options``
  (``num_predict``: -1 no limit, ``temperature``, ``stop``), ``keep_alive``, ``stream``
  (default true). A stream is NDJSON (``application/x-ndjson``): ``{"model",
  "created_at", "response", "done": false}`` per token, then ``{"done": true,
  "done_reason", "prompt_eval_count", "eval_count", durations in nanoseconds, ...}``.
  An empty prompt only loads the model (``done_reason: "load"``).
- Errors are ``{"error": "message"}``: 404 for a model that was not pulled, 400 when a
  ``suffix`` is sent to a model without a FIM template ("does not support insert").
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from .protocol import RequestError, sse_event
from .responses import Framing
from .tokens import OutputPlan, split_tokens

OLLAMA_VERSION = "0.9.0"
NDJSON = "application/x-ndjson"


# ---------------------------------------------------------------------------- llama-server


def llama_error(status: int, message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    """A llama-server-shaped error body ``{"error": {"code", "message", "type"}}``."""
    return {"error": {"code": status, "message": message, "type": kind}}


LOADING_BODY = llama_error(503, "Loading model", "unavailable_error")
INFILL_UNSUPPORTED_BODY = llama_error(
    501, "Infill is not supported by this model: prefix token is missing. ", "not_supported_error"
)


@dataclass(frozen=True)
class InfillParams:
    prefix: str
    suffix: str
    extra: list[dict[str, str]]
    n_predict: int | None  # None: no limit
    stop: tuple[str, ...]
    stream: bool
    cache_prompt: bool


def parse_infill(body: Any) -> InfillParams:
    """Validate a ``/infill`` body. Raises RequestError(400, llama-server error body)."""

    def bad(message: str) -> RequestError:
        return RequestError(400, llama_error(400, message))

    if not isinstance(body, dict):
        raise bad("request body must be a JSON object")
    prefix = body.get("input_prefix", "")
    suffix = body.get("input_suffix", "")
    if not isinstance(prefix, str) or not isinstance(suffix, str):
        raise bad('"input_prefix" and "input_suffix" must be strings')
    extra_raw = body.get("input_extra", [])
    if not isinstance(extra_raw, list):
        raise bad('"input_extra" must be an array of {"filename": string, "text": string}')
    extra: list[dict[str, str]] = []
    for chunk in extra_raw:
        if not isinstance(chunk, dict) or not isinstance(chunk.get("text"), str):
            raise bad('extra_context chunk must contain a "text" field with a string value')
        if "filename" in chunk and not isinstance(chunk["filename"], str):
            raise bad('extra_context chunk\'s "filename" field must be a string')
        extra.append({"filename": chunk.get("filename", ""), "text": chunk["text"]})
    n_predict = body.get("n_predict", -1)
    if isinstance(n_predict, bool) or not isinstance(n_predict, int):
        raise bad('"n_predict" must be an integer')
    stop_raw = body.get("stop", [])
    if not isinstance(stop_raw, list) or not all(isinstance(s, str) for s in stop_raw):
        raise bad('"stop" must be an array of strings')
    stream = body.get("stream", False)
    cache_prompt = body.get("cache_prompt", True)
    if not isinstance(stream, bool) or not isinstance(cache_prompt, bool):
        raise bad('"stream" and "cache_prompt" must be booleans')
    return InfillParams(
        prefix, suffix, extra, n_predict if n_predict >= 0 else None, tuple(stop_raw), stream, cache_prompt
    )


def infill_prompt_pieces(p: InfillParams) -> list[str]:
    """The simulated token sequence of an infill prompt: extra chunks, then
    ``<PRE> prefix <SUF> suffix <MID>`` (as llama-server lays out a FIM prompt)."""
    pieces: list[str] = []
    for chunk in p.extra:
        pieces += ["<SEP>"] + split_tokens(chunk["filename"]) + ["\n"] + split_tokens(chunk["text"])
    return pieces + ["<PRE>"] + split_tokens(p.prefix) + ["<SUF>"] + split_tokens(p.suffix) + ["<MID>"]


def common_prefix_len(a: list[str], b: list[str]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def stopping_word(text: str, stop: tuple[str, ...]) -> str:
    """The stop sequence that cut ``text`` (the earliest one found), or ``""``."""
    best, best_pos = "", -1
    for seq in stop:
        pos = text.find(seq) if seq else -1
        if pos != -1 and (best_pos == -1 or pos < best_pos):
            best, best_pos = seq, pos
    return best


@dataclass
class InfillStats:
    """Numbers for the final ``/infill`` event."""

    model: str
    prompt_n: int  # prompt tokens evaluated now
    cache_n: int  # prompt tokens reused from the KV cache
    stop_word: str
    ttft_ms: float = 0.0
    tokens_per_s: float = 0.0

    def final(self, plan: OutputPlan) -> dict[str, Any]:
        n_prompt = self.prompt_n + self.cache_n
        if plan.finish_reason == "length":
            stop_type = "limit"
        else:
            stop_type = "word" if self.stop_word else "eos"
        predicted = len(plan.pieces)
        return {
            "index": 0,
            "content": "",
            "tokens": [],
            "id_slot": 0,
            "stop": True,
            "model": self.model,
            "tokens_predicted": predicted,
            "tokens_evaluated": n_prompt,
            "stop_type": stop_type,
            "stopping_word": self.stop_word if stop_type == "word" else "",
            "tokens_cached": n_prompt + predicted,
            "truncated": False,
            "timings": {
                "cache_n": self.cache_n,
                "prompt_n": self.prompt_n,
                "prompt_ms": self.ttft_ms,
                "predicted_n": predicted,
                "predicted_per_second": self.tokens_per_s,
            },
        }


class InfillFraming(Framing):
    """llama-server's SSE stream for ``/infill``: no keep-alive comment, no ``[DONE]``."""

    def __init__(self, stats: InfillStats) -> None:
        super().__init__()
        self.stats = stats

    def opening(self) -> list[bytes]:
        return []

    def before_tokens(self) -> list[bytes]:
        return []

    def token(self, piece: str, index: int) -> bytes:
        return sse_event(
            {
                "index": 0,
                "content": piece,
                "tokens": [],
                "stop": False,
                "id_slot": 0,
                "tokens_predicted": index + 1,
                "tokens_evaluated": self.stats.prompt_n + self.stats.cache_n,
            }
        )

    def closing(self, plan: OutputPlan) -> list[bytes]:
        return [sse_event(self.stats.final(plan))]


# ---------------------------------------------------------------------------- Ollama


def ollama_name(name: str) -> str:
    """``name`` with Ollama's default tag: ``qwen2.5-coder`` -> ``qwen2.5-coder:latest``."""
    return name if ":" in name.rsplit("/", 1)[-1] else name + ":latest"


def ollama_not_found(name: str) -> dict[str, str]:
    return {"error": f'model "{name}" not found, try pulling it first'}


def ollama_no_insert(name: str) -> dict[str, str]:
    return {"error": f"{ollama_name(name)} does not support insert"}


@dataclass(frozen=True)
class GenerateParams:
    model: str
    prompt: str
    suffix: str | None
    raw: bool
    num_predict: int | None  # None: no limit
    stop: tuple[str, ...]
    stream: bool


def parse_generate(body: Any) -> GenerateParams:
    """Validate an ``/api/generate`` body. Raises RequestError(400, ``{"error": ...}``)."""

    def bad(message: str) -> RequestError:
        return RequestError(400, {"error": message})

    if not isinstance(body, dict):
        raise bad("invalid request body")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise bad("model is required")
    prompt = body.get("prompt", "")
    suffix = body.get("suffix")
    if not isinstance(prompt, str) or (suffix is not None and not isinstance(suffix, str)):
        raise bad("prompt and suffix must be strings")
    raw = body.get("raw", False)
    stream = body.get("stream", True)
    if not isinstance(raw, bool) or not isinstance(stream, bool):
        raise bad("raw and stream must be booleans")
    options = body.get("options") or {}
    if not isinstance(options, dict):
        raise bad("options must be an object")
    num_predict = options.get("num_predict", -1)
    if isinstance(num_predict, bool) or not isinstance(num_predict, int):
        raise bad("option num_predict must be an integer")
    stop_raw = options.get("stop", [])
    if isinstance(stop_raw, str):
        stop_raw = [stop_raw]
    if not isinstance(stop_raw, list) or not all(isinstance(s, str) for s in stop_raw):
        raise bad("option stop must be a list of strings")
    keep_alive = body.get("keep_alive")
    if keep_alive is not None and (isinstance(keep_alive, bool) or not isinstance(keep_alive, (str, int, float))):
        raise bad("keep_alive must be a duration string or a number of seconds")
    return GenerateParams(
        model, prompt, suffix, raw, num_predict if num_predict >= 0 else None, tuple(stop_raw), stream
    )


def created_at() -> str:
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1e6):06d}Z"


def ndjson(obj: Any) -> bytes:
    """One NDJSON line. Non-ASCII stays raw, U+2028 included (Go's encoder would escape
    that one; sending it raw checks that clients split lines on ``\\n`` only)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


@dataclass
class GenerateStats:
    """Numbers for the final ``/api/generate`` object (durations in nanoseconds)."""

    model: str
    prompt_tokens: int
    load_s: float = 0.0
    ttft_s: float = 0.0
    tokens_per_s: float = 0.0

    def final(self, plan: OutputPlan, text: str = "") -> dict[str, Any]:
        n = len(plan.pieces)
        eval_ns = int(n / self.tokens_per_s * 1e9) if self.tokens_per_s and self.tokens_per_s != float("inf") else 0
        load_ns = int(self.load_s * 1e9)
        prompt_ns = int(self.ttft_s * 1e9)
        return {
            "model": self.model,
            "created_at": created_at(),
            "response": text,
            "done": True,
            "done_reason": plan.finish_reason,
            "context": [1, 2, 3],
            "total_duration": load_ns + prompt_ns + eval_ns,
            "load_duration": load_ns,
            "prompt_eval_count": self.prompt_tokens,
            "prompt_eval_duration": prompt_ns,
            "eval_count": n,
            "eval_duration": eval_ns,
        }


class OllamaFraming(Framing):
    """Ollama's NDJSON stream: one JSON object per line, the last with ``done: true``."""

    content_type = NDJSON
    charset = None
    malformed = b"{not json\n"
    keepalive = None

    def __init__(self, stats: GenerateStats) -> None:
        super().__init__()
        self.stats = stats

    def opening(self) -> list[bytes]:
        return []

    def before_tokens(self) -> list[bytes]:
        return []

    def token(self, piece: str, index: int) -> bytes:
        return ndjson({"model": self.stats.model, "created_at": created_at(), "response": piece, "done": False})

    def closing(self, plan: OutputPlan) -> list[bytes]:
        return [ndjson(self.stats.final(plan))]
