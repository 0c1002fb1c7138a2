"""Reading the body of an OpenAI-compatible streamed completion into text deltas
(docs/architecture.md, "Facts we checked"); a part of
:class:`~.openai_compat.OpenAICompatBackend`, whose subclasses for other engine APIs
override ``_deltas`` and call it for the OpenAI-shaped bodies.

- SSE is parsed with httpx2's ``EventSource`` (derived from httpx-sse: lines split on
  CR/LF only, unlike ``aiter_lines``, and an event size limit; an oversized event is a
  ``BackendError(UNKNOWN)``).
- Events are ``data: {json}`` with text in ``choices[0].text`` (chat:
  ``choices[0].delta.content``), a final ``data: [DONE]``; chunks with empty
  ``choices`` and ``:`` comment lines are skipped; a malformed event is counted
  (``StreamInfo.malformed_events``) and skipped. The stream is read to its end, so the
  connection goes back to the pool; one that ends without ``[DONE]`` is truncated.
- A body that is not an event stream is taken when it is one JSON completion (some
  servers answer a streaming request so); anything else (an HTML page from a proxy or a
  wrong base URL) is a ``BackendError(UNKNOWN)`` that names the content type. An
  ``error`` object, in a body or mid-stream, is a ``BackendError(UNKNOWN)`` with its
  message.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator

import httpx2 as httpx
from httpx2 import EventSource, SSEError

from .base import StreamInfo, parse_json_object
from .errors import UNKNOWN, BackendError, clip

log = logging.getLogger(__name__)


class _OpenAIEvents:
    """The event parsing of :class:`~.openai_compat.OpenAICompatBackend` (it uses the
    backend's ``name`` and ``base_url`` in its messages)."""

    name: str
    base_url: str

    async def _deltas(self, resp: httpx.Response, info: StreamInfo, chat: bool) -> AsyncIterator[str]:
        ctype = resp.headers.get("content-type", "")
        if "text/event-stream" not in ctype:
            # Some servers answer a streaming request with one JSON body; anything else
            # (an HTML page from a proxy or a wrong base URL) is an error worth naming.
            raw = await resp.aread()
            obj = parse_json_object(raw, info, "stream event") if "json" in ctype or raw[:1] in (b"{", b"[") else None
            if obj is None:
                kind = ctype.split(";")[0] or "no content type"
                raise BackendError(
                    UNKNOWN,
                    f"{self.name} answered with {kind}, not an event stream; is {self.base_url} an "
                    f"OpenAI-compatible API base URL (ending in /v1)?",
                    resp.status_code,
                )
            if "error" in obj:
                raise BackendError(
                    UNKNOWN, f"{self.name} reported an error: {_error_text(obj['error'])}", resp.status_code
                )
            text = _text_of(obj, chat, final=True)
            if text:
                info.first_token_at = time.perf_counter()
                info.events += 1
                yield text
            return
        done = False
        try:
            async for sse in EventSource(resp):
                data = sse.data
                if done or not data:
                    continue  # read to the end so the connection goes back to the pool
                if data.strip() == "[DONE]":
                    done = True
                    continue
                obj = parse_json_object(data.encode(), info, "stream event")
                if obj is None:
                    continue
                if "error" in obj:
                    raise BackendError(
                        UNKNOWN, f"{self.name} reported an error mid-stream: {_error_text(obj['error'])}"
                    )
                info.events += 1
                choices = obj.get("choices")
                if isinstance(obj.get("usage"), dict):
                    info.usage = obj["usage"]
                if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
                    if choices:
                        info.malformed_events += 1
                    continue
                choice = choices[0]
                if choice.get("finish_reason"):
                    info.finish_reason = choice["finish_reason"]
                text = _text_of(obj, chat, final=False)
                _logprobs_of(choice, info.token_logprobs)
                if text:
                    if not info.first_token_at:
                        info.first_token_at = time.perf_counter()
                    yield text
        except SSEError as exc:  # an oversized event; the content type was checked above
            raise BackendError(UNKNOWN, f"{self.name} sent an invalid event stream: {exc}") from None
        if not done:  # the connection ended without [DONE]
            info.truncated = True


def _error_text(err: object) -> str:
    if isinstance(err, dict):
        return clip(str(err.get("message") or err))
    return clip(str(err))


def _logprobs_of(choice: dict, out: list[tuple[str, float]]) -> None:
    """Append a chunk's token log-probabilities to ``out``: the legacy completions shape
    (``logprobs.tokens`` / ``logprobs.token_logprobs``, OpenAI API reference, "Completions")
    or the chat shape (``logprobs.content[].token`` / ``.logprob``); anything else is
    ignored."""
    lp = choice.get("logprobs")
    if not isinstance(lp, dict):
        return
    toks, vals = lp.get("tokens"), lp.get("token_logprobs")
    if isinstance(toks, list) and isinstance(vals, list):
        out.extend(
            (t, float(v))
            for t, v in zip(toks, vals)
            if isinstance(t, str) and isinstance(v, (int, float)) and not isinstance(v, bool)
        )
        return
    content = lp.get("content")
    if isinstance(content, list):
        out.extend(
            (c["token"], float(c["logprob"]))
            for c in content
            if isinstance(c, dict)
            and isinstance(c.get("token"), str)
            and isinstance(c.get("logprob"), (int, float))
            and not isinstance(c.get("logprob"), bool)
        )


def _text_of(obj: dict | None, chat: bool, final: bool) -> str:
    if not obj:
        return ""
    choices = obj.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return ""
    c = choices[0]
    if chat:
        part = c.get("message") if final else c.get("delta")
        val = (part or {}).get("content") if isinstance(part, dict) else None
    else:
        val = c.get("text")
    return val if isinstance(val, str) else ""
